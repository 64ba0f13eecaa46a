//! `graft init DIR` through the real binary: the repository a team owns, as written; its
//! CI script run with the real graft on PATH, on a fresh repository and on a stale one;
//! its kustomization rendered offline with `kubectl kustomize` against this checkout's
//! deploy/install; and the refusal to write into a directory that holds anything.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::cli::{graft, stderr, stdout, success_stdout};
use crate::support::kustomize::{find, render as kustomize};
use crate::support::repo;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `graft init` with `args`, run in `cwd`.
fn init(cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    graft(cwd, &all)
}

/// A repository written with this checkout's deploy/install as its base, so that it
/// renders without the network.
fn init_local(dir: &Path, certs: &str) {
    let base = repo().join("deploy/install");
    let output = init(
        dir.parent().expect("a parent"),
        &[
            "--base",
            base.to_str().expect("UTF-8"),
            "--certs",
            certs,
            dir.to_str().expect("UTF-8"),
        ],
    );
    success_stdout(output);
}

/// Every file under `dir`, by its path from `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("under root");
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).expect("valid YAML")
}

/// `DIR/ci.sh`, with the graft under test first on PATH.
fn ci(dir: &Path) -> Output {
    let graft_dir = Path::new(env!("CARGO_BIN_EXE_graft"))
        .parent()
        .expect("graft's directory");
    let path = std::env::join_paths(std::iter::once(graft_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    Command::new(dir.join("ci.sh"))
        .env("PATH", path)
        .env_remove("GRAFT")
        .output()
        .expect("run ci.sh")
}

#[test]
fn writes_a_repository_that_pins_this_release() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    let output = init(scratch.path(), &["team"]);
    let said = stderr(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("./ci.sh"), "says what to run next: {said}");
    assert_eq!(
        files(&dir),
        [
            "README.md",
            "certificates.yaml",
            "ci.sh",
            "kustomization.yaml",
            "policies/Kustomization",
            "policies/team-label.yaml",
            "tests/team-label.yaml",
            "webhook.yaml",
        ]
    );

    let kustomization = yaml(&read(&dir.join("kustomization.yaml")));
    assert_eq!(kustomization["namespace"], "graft");
    assert_eq!(
        kustomization["resources"],
        serde_json::json!([
            format!("https://github.com/graft-dev/graft//deploy/install?ref=v{VERSION}"),
            "policies",
            "webhook.yaml",
            "certificates.yaml",
        ])
    );
    // cert-manager exactly as graft's own component sets it up.
    let component = yaml(&read(
        &repo().join("deploy/components/cert-manager/kustomization.yaml"),
    ));
    assert_eq!(kustomization["patches"], component["patches"]);
    assert_eq!(
        read(&dir.join("certificates.yaml")),
        read(&repo().join("deploy/components/cert-manager/certificates.yaml"))
    );

    // The ConfigMap is generated as graft's own examples' is, from the team's files.
    let generator = |path: &Path| yaml(&read(path))["configMapGenerator"][0].clone();
    let ours = generator(&dir.join("policies/Kustomization"));
    let graft_own = generator(&repo().join("policies/Kustomization"));
    assert_eq!(ours["name"], graft_own["name"]);
    assert_eq!(ours["options"], graft_own["options"]);
    assert_eq!(ours["files"], serde_json::json!(["team-label.yaml"]));

    // webhook.yaml is what the documented command writes, header and all.
    let regenerated = success_stdout(graft(&dir, &["webhook-config", "--policies", "policies"]));
    assert_eq!(read(&dir.join("webhook.yaml")), regenerated);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join("ci.sh"))
            .expect("ci.sh")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "ci.sh is executable: {mode:o}");
    }
    let script = read(&dir.join("ci.sh"));
    assert!(script.starts_with("#!/usr/bin/env bash\n"), "{script}");
    assert!(script.contains("set -euo pipefail"), "{script}");

    // The README has the daily loop, with the commands as they are run.
    let readme = read(&dir.join("README.md"));
    for command in [
        "graft test tests",
        "graft webhook-config --policies policies --out webhook.yaml",
        "./ci.sh",
        "kubectl apply -k . --dry-run=server",
        "kubectl apply -k .",
        &format!("ref=v{VERSION}"),
    ] {
        assert!(readme.contains(command), "README.md lacks `{command}`");
    }
}

/// With this checkout's deploy/install as the base, the repository renders graft, the
/// team's policies (not graft's examples), the webhook configuration and cert-manager's
/// objects.
#[test]
fn renders_graft_with_the_teams_policies() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    init_local(&dir, "cert-manager");
    let base = yaml(&read(&dir.join("kustomization.yaml")))["resources"][0].clone();
    let base = base.as_str().expect("a path");
    assert!(
        base.starts_with("../"),
        "relative to the repository: {base}"
    );

    let objects = kustomize(&dir);
    for object in &objects {
        if object["kind"] != "Namespace"
            && !object["kind"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Cluster")
            && object["kind"] != "MutatingWebhookConfiguration"
        {
            assert_eq!(object["metadata"]["namespace"], "graft", "{object}");
        }
    }
    find(&objects, "Deployment", "graft");
    let policies = find(&objects, "ConfigMap", "graft-policies");
    let keys: Vec<&String> = policies["data"].as_object().expect("data").keys().collect();
    assert_eq!(keys, ["team-label.yaml"]);
    assert_eq!(
        policies["data"]["team-label.yaml"],
        read(&dir.join("policies/team-label.yaml")).as_str()
    );
    let config = find(&objects, "MutatingWebhookConfiguration", "graft");
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "graft/graft"
    );
    assert_eq!(
        find(&objects, "Certificate", "graft")["spec"]["secretName"],
        "graft-tls"
    );
}

/// `--certs self-signed`: no cert-manager objects; after `graft certs --out certs`, as its
/// README says, every webhook trusts exactly that CA, and the keys are git-ignored.
#[test]
fn self_signed_takes_the_ca_from_graft_certs() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    init_local(&dir, "self-signed");
    let written = files(&dir);
    assert!(written.contains(&".gitignore".to_string()), "{written:?}");
    assert!(
        !written.contains(&"certificates.yaml".to_string()),
        "{written:?}"
    );
    assert!(
        read(&dir.join(".gitignore"))
            .lines()
            .any(|l| l == "/certs*/")
    );
    assert!(read(&dir.join("README.md")).contains("graft certs --out certs"));

    success_stdout(graft(&dir, &["certs", "--out", "certs"]));
    let objects = kustomize(&dir);
    let ca = BASE64.encode(std::fs::read(dir.join("certs/ca.crt")).expect("ca.crt"));
    assert_eq!(
        find(&objects, "Secret", "graft-tls")["data"]["ca.crt"],
        ca.as_str()
    );
    let config = find(&objects, "MutatingWebhookConfiguration", "graft");
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    assert!(!webhooks.is_empty());
    for webhook in webhooks {
        assert_eq!(
            webhook["clientConfig"]["caBundle"],
            ca.as_str(),
            "{webhook}"
        );
        assert!(webhook["clientConfig"]["service"].is_object(), "{webhook}");
    }
    assert!(!objects.iter().any(|o| o["kind"] == "Certificate"));
}

#[test]
fn ci_passes_on_a_fresh_repository_and_fails_on_a_stale_webhook_config() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    init_local(&dir, "cert-manager");
    let fresh = ci(&dir);
    assert!(
        fresh.status.success(),
        "{}{}",
        stdout(&fresh),
        stderr(&fresh)
    );
    let out = stdout(&fresh);
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    assert!(out.contains("webhook.yaml is current"), "{out}");

    // The policy now also matches UPDATE, which the committed configuration never sends.
    let policy = dir.join("policies/team-label.yaml");
    let text = read(&policy);
    assert!(text.contains("operations: [CREATE]"));
    std::fs::write(&policy, text.replace("[CREATE]", "[CREATE, UPDATE]")).expect("write");
    let stale = ci(&dir);
    assert!(!stale.status.success(), "{}", stdout(&stale));
    let said = stderr(&stale);
    assert!(said.contains("webhook.yaml is stale"), "{said}");
    assert!(
        said.contains("graft webhook-config --policies policies --out webhook.yaml"),
        "{said}"
    );
    assert!(
        stdout(&stale).contains("+    - UPDATE"),
        "the diff: {}",
        stdout(&stale)
    );

    // Regenerated as it says, the repository passes again.
    success_stdout(graft(
        &dir,
        &[
            "webhook-config",
            "--policies",
            "policies",
            "--out",
            "webhook.yaml",
        ],
    ));
    let regenerated = ci(&dir);
    assert!(regenerated.status.success(), "{}", stderr(&regenerated));
}

#[test]
fn ci_fails_on_a_policy_file_the_configmap_leaves_out() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    init_local(&dir, "cert-manager");
    let policy = read(&dir.join("policies/team-label.yaml"));
    std::fs::write(
        dir.join("policies/owner-label.yaml"),
        policy.replace("name: team-label", "name: owner-label"),
    )
    .expect("write");
    let output = ci(&dir);
    assert!(!output.status.success());
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(
        said.contains("policy file owner-label.yaml is not listed"),
        "{said}"
    );
}

#[test]
fn refuses_a_directory_that_is_not_empty() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("notes.txt"), "ours").expect("write");
    let output = init(scratch.path(), &["team"]);
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert!(
        said.contains("refusing to write into team, which is not empty (notes.txt)"),
        "{said}"
    );
    assert!(said.contains("--force"), "{said}");
    assert_eq!(files(&dir), ["notes.txt"], "nothing written");

    // A file is never a repository.
    let output = init(scratch.path(), &["team/notes.txt"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a directory"),
        "{}",
        stderr(&output)
    );

    // A fresh clone of an empty repository holds only .git: that is where a team starts.
    let clone = scratch.path().join("clone");
    std::fs::create_dir_all(clone.join(".git")).expect("mkdir");
    std::fs::write(clone.join(".git/HEAD"), "ref: refs/heads/main\n").expect("write");
    let output = init(scratch.path(), &["clone"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(clone.join("kustomization.yaml").is_file());
}

#[test]
fn force_writes_into_a_directory_and_keeps_other_files() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let dir = scratch.path().join("team");
    init_local(&dir, "cert-manager");
    std::fs::write(dir.join("notes.txt"), "ours").expect("write");
    std::fs::write(dir.join("policies/team-label.yaml"), "broken: [").expect("write");
    let again = init(scratch.path(), &["team"]);
    assert_eq!(again.status.code(), Some(2), "refused without --force");
    assert_eq!(read(&dir.join("policies/team-label.yaml")), "broken: [");

    let forced = init(scratch.path(), &["--force", "team"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(read(&dir.join("notes.txt")), "ours");
    assert!(read(&dir.join("policies/team-label.yaml")).contains("name: team-label"));
    let output = ci(&dir);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_base_that_is_neither_a_directory_nor_a_url_is_refused() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let output = init(scratch.path(), &["--base", "deploy/instal", "team"]);
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert!(
        said.contains("--base deploy/instal is neither a directory nor a kustomize remote URL"),
        "{said}"
    );
    assert!(!scratch.path().join("team").exists(), "nothing written");
}

/// A remote base other than the default is written as given.
#[test]
fn a_remote_base_is_written_as_given() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let base = "https://github.com/example/graft-fork//deploy/install?ref=v9.9.9";
    success_stdout(init(scratch.path(), &["--base", base, "team"]));
    let kustomization = yaml(&read(&scratch.path().join("team/kustomization.yaml")));
    assert_eq!(kustomization["resources"][0], base);
}

/// The default base and the components README.md shows, resolved as kustomize resolves
/// them: cloned at the release's tag, here from a local git repository holding this
/// checkout's deploy/ (a `file://` URL instead of graft's own: no network). Each path
/// and the `ref` form are the real ones.
#[test]
fn the_pinned_base_and_the_components_readme_shows_resolve() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let origin = scratch.path().join("graft");
    crate::support::fs::copy_tree(&repo().join("deploy"), &origin.join("deploy"));
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .current_dir(&origin)
            .args([
                "-c",
                "user.name=graft",
                "-c",
                "user.email=graft@example.invalid",
            ])
            .args(args)
            .output()
            .expect("git on PATH");
        assert!(output.status.success(), "git {args:?}: {}", stderr(&output));
    };
    git(&["init", "--quiet"]);
    git(&["add", "--all"]);
    git(&["commit", "--quiet", "--message", "graft"]);
    git(&["tag", &format!("v{VERSION}")]);

    let upstream = "https://github.com/graft-dev/graft";
    let local = format!("file://{}", origin.display());
    let base = format!("{local}//deploy/install?ref=v{VERSION}");
    let dir = scratch.path().join("team");
    success_stdout(init(scratch.path(), &["--base", &base, "team"]));

    let readme = read(&dir.join("README.md"));
    let shown: Vec<String> = readme
        .match_indices(&format!("{upstream}//"))
        .map(|(at, _)| {
            let rest = &readme[at..];
            rest[..rest.find([']', '`', ' ', '\n']).unwrap_or(rest.len())].to_string()
        })
        .collect();
    assert_eq!(shown.len(), 4, "{shown:?}");
    let mut components = Vec::new();
    let mut resources = Vec::new();
    for url in &shown {
        assert!(url.ends_with(&format!("?ref=v{VERSION}")), "{url}");
        let url = url.replace(upstream, &local);
        if url.contains("//deploy/components/") {
            components.push(url);
        } else {
            resources.push(url);
        }
    }
    let mut kustomization = read(&dir.join("kustomization.yaml"));
    kustomization.push_str(&format!(
        "components: {}\n",
        serde_json::to_string(&components).expect("JSON")
    ));
    let kustomization = kustomization.replace(
        "resources:\n",
        &format!(
            "resources:\n{}",
            resources
                .iter()
                .map(|url| format!("  - {url}\n"))
                .collect::<String>()
        ),
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).expect("write");

    let objects = kustomize(&dir);
    let deployment = find(&objects, "Deployment", "graft");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        format!("ghcr.io/graft-dev/graft:{VERSION}").as_str()
    );
    assert!(
        container["args"]
            .as_array()
            .is_some_and(|args| args.iter().any(|arg| arg == "--events")),
        "the events component: {container}"
    );
    let config = find(&objects, "MutatingWebhookConfiguration", "graft");
    assert_eq!(
        config["webhooks"][0]["failurePolicy"], "Fail",
        "the fail-closed component"
    );
    find(&objects, "ServiceMonitor", "graft");
    find(&objects, "ConfigMap", "graft-policies");
    find(&objects, "NetworkPolicy", "graft");
}
