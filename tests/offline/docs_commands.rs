//! README.md and the guides in docs/ (policies, MutatingAdmissionPolicy, library) stay true:
//! every ```sh block runs, in order, in a scratch copy of the repository with the real `graft`
//! on PATH. ```shell blocks need a cluster (or are the two commands that build graft itself)
//! and are not run here.

use crate::support::fs::copy_tree;
use crate::support::repo;
use std::process::Command;

fn sh_blocks(document: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(document)).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match current.as_mut() {
            Some(block) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None if line.trim() == "```sh" => current = Some(String::new()),
            None => {}
        }
    }
    blocks
}

/// Runs the blocks of `document` in a scratch repository; returns their combined stdout.
fn run_blocks(document: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("repo");
    for dir in [
        "policies",
        "tests/fixtures",
        "tests/policies",
        "deploy",
        "schema",
    ] {
        copy_tree(&repo().join(dir), &root.join(dir));
    }
    let _ = std::fs::remove_dir_all(root.join("deploy/self-signed/certs"));
    let bin = scratch.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_graft"), bin.join("graft")).unwrap();
    let tmp = scratch.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let blocks = sh_blocks(document);
    assert!(!blocks.is_empty(), "{document} has no runnable blocks");
    let mut stdout = String::new();
    for block in blocks {
        // Whatever a block starts in the background ends with it.
        let script = format!("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{block}");
        let output = Command::new("sh")
            .args(["-euc", &script])
            .current_dir(&root)
            .env("PATH", &path)
            .env("TMPDIR", &tmp)
            // The blocks are what a user types on their machine, where `graft test
            // --update` runs; a CI runner's `CI` would make graft refuse it.
            .env_remove("CI")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{document}: block failed:\n{block}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        stdout.push_str(&String::from_utf8_lossy(&output.stdout));
    }
    stdout
}

#[test]
fn readme_commands_work() {
    let stdout = run_blocks("README.md");
    // The tour's server answered the review with the Multus patch, and counted it.
    assert!(stdout.contains("\"patchType\":\"JSONPatch\""), "{stdout}");
    assert!(
        stdout.contains("graft_admission_requests_total{"),
        "{stdout}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    // "Deploy": the repository `graft init` wrote passed its own CI script.
    assert!(stdout.contains("webhook.yaml is current"), "{stdout}");
}

#[test]
fn the_readme_starts_with_the_two_commands() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let first_block: Vec<&str> = text.split("```").nth(1).unwrap().lines().skip(1).collect();
    assert!(first_block[0].starts_with("cargo run --release -- serve"));
    assert!(first_block[1].starts_with("cargo test"));
}

#[test]
fn policy_guide_commands_work() {
    let stdout = run_blocks("docs/policies.md");
    assert!(
        stdout.contains(r#"[{"op":"add","path":"/spec/nodeSelector","value":{"name":"node1"}}]"#),
        "{stdout}"
    );
    // "Why was my object not mutated?": the namespace's missing label is named.
    assert!(
        stdout.contains(
            "sidecar-injection: not matched: match.namespaceSelector sidecar-injection: want enabled, got nothing (labels of namespace plain)"
        ),
        "{stdout}"
    );
    // "Your first change, end to end": the changed alias made the multus cases outdated,
    // --update rewrote them, and explain names the alias the captured pod no longer has.
    assert!(
        stdout.contains("cases rewritten to what the policies now do"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "multus-networks: not matched: match.fields[0] $.spec.nodeSelector['dynamo.nodeAlias']: want one of worker07, worker14, got worker06"
        ),
        "{stdout}"
    );
}

#[test]
fn policy_guide_examples_are_valid_policies() {
    let text = std::fs::read_to_string(repo().join("docs/policies.md")).unwrap();
    let examples: Vec<&str> = text
        .split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .filter(|block| block.contains("kind: MutationPolicy"))
        .collect();
    assert!(!examples.is_empty());
    for example in examples {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("example.yaml"), example).unwrap();
        if let Err(findings) = graft::policy::load(&[dir.path().to_path_buf()]) {
            panic!("{example}\n{findings}");
        }
    }
}

#[test]
fn mutating_admission_policy_guide_commands_work() {
    let stdout = run_blocks("docs/mutating-admission-policy.md");
    // (lint passing is the first block passing: its summary goes to stderr.)
    assert!(stdout.contains("49 passed, 0 failed"), "{stdout}");
    // apply: the sidecar, its volume and the status annotation.
    assert!(
        stdout
            .contains(r#"{"op":"add","path":"/spec/containers/1","value":{"image":"nginx:1.12.2""#),
        "{stdout}"
    );
    // review: the captured Multus worker, mutated by the MAP version.
    assert!(
        stdout.contains(r#""auditAnnotations":{"mutated-by":"multus-networks""#),
        "{stdout}"
    );
    // explain: the binding named, and the selector that kept it out.
    assert!(
        stdout.contains(
            "sidecar-injection (binding sidecar-injection-labelled-namespaces): not matched: binding sidecar-injection-labelled-namespaces matchResources.namespaceSelector: the namespace's labels do not meet sidecar-injection in (enabled), kubernetes.io/metadata.name notin (kube-system, kube-public)"
        ),
        "{stdout}"
    );
    // Two passes: IfNeeded sees graft's label, Never does not.
    assert!(
        stdout.contains(
            r#"{"op":"add","path":"/metadata/annotations/example.com~1owner","value":"platform"}"#
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            r#"{"op":"add","path":"/metadata/annotations/example.com~1owner","value":"unknown"}"#
        ),
        "{stdout}"
    );
}

/// The library's guide: a policy copied into a new repository passes its checks there,
/// and the library lints and tests clean.
#[test]
fn library_guide_commands_work() {
    let stdout = run_blocks("docs/library.md");
    assert!(stdout.contains("webhook.yaml is current"), "{stdout}");
    assert!(stdout.contains("PASS seccomp-default"), "{stdout}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}
