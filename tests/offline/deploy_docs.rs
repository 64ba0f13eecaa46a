//! docs/operations.md stays true: every ```sh block runs, in order, in a scratch copy of the
//! repository, with the real `graft` binary and a `kubectl` whose `apply` renders offline
//! (`apply -k DIR` -> `kubectl kustomize DIR`; `apply -f FILE` -> a kustomize build of that
//! file) so no cluster is needed. ```shell blocks need a cluster: their `graft` command lines
//! are only parsed with graft's own CLI definition.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::fs::copy_tree;
use crate::support::repo;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use clap::Parser as _;
use serde::Deserialize as _;

/// The fenced blocks of the document with the given info string, in order.
fn blocks(info: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("docs/operations.md")).expect("docs");
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let fence = line.trim_start();
        match current.as_mut() {
            Some(block) if fence.starts_with("```") => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(fence);
                block.push('\n');
            }
            None if fence == format!("```{info}") => current = Some(String::new()),
            None => {}
        }
    }
    out
}

fn real_kubectl() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("kubectl"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!("kubectl is not on PATH; these tests need it to render kustomize offline")
        })
}

/// Installs `graft` and the offline `kubectl` into `bin`; applied files are kept in `log`.
fn install_tools(bin: &Path, log: &Path) {
    std::fs::create_dir_all(bin).expect("bin dir");
    std::fs::create_dir_all(log).expect("log dir");
    std::fs::copy(env!("CARGO_BIN_EXE_graft"), bin.join("graft")).expect("copy graft");
    let script = format!(
        r#"#!/bin/sh
set -eu
real='{real}'
log='{log}'
case "$*" in
  "apply -k "*) exec "$real" kustomize "$3" > /dev/null ;;
  "apply -f "*)
    dir=$(mktemp -d "$log/apply.XXXXXX")
    if [ "$3" = - ]; then cat > "$dir/object.yaml"; else cp "$3" "$dir/object.yaml"; fi
    printf 'resources: [object.yaml]\n' > "$dir/kustomization.yaml"
    exec "$real" kustomize "$dir" > /dev/null ;;
  "kustomize "*) exec "$real" "$@" ;;
esac
echo "offline kubectl: '$*' needs a cluster; put it in a shell block, not sh" >&2
exit 1
"#,
        real = real_kubectl().display(),
        log = log.display(),
    );
    let path = bin.join("kubectl");
    std::fs::write(&path, script).expect("write kubectl");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

fn render(dir: &Path) -> Vec<serde_json::Value> {
    let output = Command::new(real_kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl kustomize");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).expect("YAML"))
        .collect()
}

fn webhooks(objects: &[serde_json::Value]) -> Vec<serde_json::Value> {
    objects
        .iter()
        .find(|o| o["kind"] == "MutatingWebhookConfiguration")
        .and_then(|o| o["webhooks"].as_array().cloned())
        .expect("a MutatingWebhookConfiguration with webhooks")
}

#[test]
fn documented_offline_commands_work() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path().join("repo");
    for dir in ["deploy", "policies", "schema"] {
        copy_tree(&repo().join(dir), &root.join(dir));
    }
    // Left-overs from a developer's own runs must not change the outcome.
    for stale in [
        "deploy/self-signed/certs",
        "deploy/self-signed/certs-next",
        "deploy/production",
    ] {
        let _ = std::fs::remove_dir_all(root.join(stale));
    }
    let (bin, log) = (scratch.path().join("bin"), scratch.path().join("applied"));
    install_tools(&bin, &log);
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");

    let blocks = blocks("sh");
    assert!(
        blocks.len() >= 6,
        "docs/operations.md lost its runnable blocks"
    );
    for block in &blocks {
        let output = Command::new("sh")
            .args(["-euc", block])
            .current_dir(&root)
            .env("PATH", &path)
            .output()
            .expect("run sh");
        assert!(
            output.status.success(),
            "documented commands failed:\n{block}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // The rotation applied a configuration that trusted both CAs at once.
    let applied: Vec<String> = std::fs::read_dir(&log)
        .expect("applied dir")
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path().join("object.yaml")).ok())
        .collect();
    let both = applied.iter().any(|text| {
        let Ok(object) = serde_yaml::from_str::<serde_json::Value>(text) else {
            return false;
        };
        if object["kind"] != "MutatingWebhookConfiguration" {
            return false;
        }
        webhooks(std::slice::from_ref(&object)).iter().all(|w| {
            let bundle = w["clientConfig"]["caBundle"].as_str().unwrap_or_default();
            let pem = BASE64.decode(bundle).unwrap_or_default();
            String::from_utf8_lossy(&pem)
                .matches("BEGIN CERTIFICATE")
                .count()
                == 2
        })
    });
    assert!(
        both,
        "the rotation must apply a caBundle holding the old and the new CA"
    );

    // After the rotation, the overlay trusts exactly the new CA.
    let certs = root.join("deploy/self-signed/certs");
    let ca = BASE64.encode(std::fs::read(certs.join("ca.crt")).expect("ca.crt"));
    for webhook in webhooks(&render(&root.join("deploy/self-signed"))) {
        assert_eq!(webhook["clientConfig"]["caBundle"], ca.as_str());
    }
    assert!(!root.join("deploy/self-signed/certs-next").exists());

    // "Your own repository": `graft init` wrote one, and its CI script passed on it.
    assert!(root.join("my-graft/kustomization.yaml").is_file());

    // The fail-closed overlay fails closed on pods only.
    for webhook in webhooks(&render(&root.join("deploy/production"))) {
        let expected = if webhook["name"] == "pods.graft.dev" {
            "Fail"
        } else {
            "Ignore"
        };
        assert_eq!(webhook["failurePolicy"], expected, "{}", webhook["name"]);
    }
}

#[test]
fn documented_cluster_commands_parse() {
    let mut checked = 0;
    for block in blocks("shell") {
        for line in block.lines() {
            let command = line.split('|').next().unwrap_or_default().trim();
            let Some(rest) = command.strip_prefix("graft ") else {
                continue;
            };
            let words = std::iter::once("graft").chain(rest.split_whitespace());
            if let Err(error) = graft::cli::Cli::try_parse_from(words) {
                panic!("docs/operations.md: `{command}` does not parse:\n{error}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "expected graft commands in shell blocks");
}
