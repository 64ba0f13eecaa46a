//! The Dockerfile's essentials, checked without a container engine: multi-stage, pinned
//! base images, a locked release build, a non-root user, the two ports, and graft as the
//! entrypoint with `serve` as the default command.

use crate::support::read;

/// Instructions with continuation lines joined and comments dropped: (INSTRUCTION, rest).
fn instructions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read("Dockerfile").lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let text = std::mem::take(&mut current);
                if let Some((instruction, rest)) = text.split_once(char::is_whitespace) {
                    out.push((instruction.to_uppercase(), rest.trim().to_string()));
                }
            }
        }
    }
    out
}

fn all(instruction: &str) -> Vec<String> {
    instructions()
        .into_iter()
        .filter(|(i, _)| i == instruction)
        .map(|(_, rest)| rest)
        .collect()
}

#[test]
fn multi_stage_with_pinned_base_images() {
    let froms = all("FROM");
    assert!(froms.len() >= 2, "multi-stage build: {froms:?}");
    let stages: Vec<String> = froms
        .iter()
        .filter_map(|from| from.split_whitespace().nth(2).map(str::to_lowercase))
        .collect();
    for from in &froms {
        let image = from.split_whitespace().next().unwrap_or_default();
        if stages.iter().any(|stage| stage == &image.to_lowercase()) {
            continue; // FROM an earlier stage
        }
        let tag = image
            .rsplit_once('@')
            .map(|(_, digest)| digest)
            .or_else(|| image.rsplit_once(':').map(|(_, tag)| tag))
            .filter(|tag| !tag.contains('/'));
        match tag {
            Some(tag) => assert_ne!(tag, "latest", "{image}: pin a tag, not latest"),
            None => panic!("{image}: base images must carry an explicit tag"),
        }
    }
    assert!(
        froms[0].starts_with("rust:1.95"),
        "build stage on the pinned toolchain: {}",
        froms[0]
    );
}

#[test]
fn locked_release_build() {
    let build = all("RUN").join("\n");
    assert!(build.contains("cargo build"), "{build}");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
}

#[test]
fn runs_as_non_root_65532() {
    let users = all("USER");
    let last = users.last().expect("a USER instruction");
    let user = last.split(':').next().unwrap_or_default();
    assert!(user == "65532" || user == "nonroot", "USER {last}");
}

#[test]
fn exposes_webhook_and_metrics_ports() {
    let ports: Vec<String> = all("EXPOSE")
        .iter()
        .flat_map(|rest| {
            rest.split_whitespace()
                .map(|p| p.trim_end_matches("/tcp").to_string())
        })
        .collect();
    assert!(ports.contains(&"8443".to_string()), "{ports:?}");
    assert!(ports.contains(&"8080".to_string()), "{ports:?}");
}

#[test]
fn entrypoint_graft_and_serve_by_default() {
    let entrypoint = all("ENTRYPOINT");
    assert!(
        entrypoint.last().is_some_and(|e| e.contains("graft")),
        "{entrypoint:?}"
    );
    let cmd = all("CMD");
    assert!(cmd.last().is_some_and(|c| c.contains("serve")), "{cmd:?}");
}

#[test]
fn dockerignore_keeps_build_outputs_and_keys_out() {
    let ignore = read(".dockerignore");
    let lines: Vec<&str> = ignore.lines().map(str::trim).collect();
    for entry in [
        "target/",
        ".git/",
        "fuzz/target/",
        "deploy/self-signed/certs*/",
    ] {
        assert!(lines.contains(&entry), ".dockerignore lacks {entry}");
    }
}
