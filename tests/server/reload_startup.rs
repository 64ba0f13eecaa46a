//! An invalid policy set at startup is fatal, through the real binary: the findings are
//! printed exactly as `graft lint` prints them and the exit code is non-zero, so a bad
//! rollout stalls instead of serving nothing.

use std::process::Stdio;
use std::time::Duration;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test]
async fn an_invalid_set_at_startup_exits_non_zero_with_the_findings() -> Result {
    let policy = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: typo\n\
                  spec:\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        \
                  pth: $.metadata.labels.a\n        value: b\n";
    startup_is_refused(policy, "unknown field `pth`").await
}

#[tokio::test]
async fn a_misspelt_cel_name_at_startup_exits_non_zero_with_the_findings() -> Result {
    let policy = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: typo\n\
                  spec:\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        \
                  path: $.metadata.labels.ordinal\n        value: \"{{ string(podOrdnal(object)) }}\"\n";
    startup_is_refused(
        policy,
        "unknown function podOrdnal (hint: did you mean podOrdinal?)",
    )
    .await
}

/// Lints `policy`, expecting `needle` among the findings, then starts the server on it
/// and expects it to exit 1 with the same findings.
async fn startup_is_refused(policy: &str, needle: &str) -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("a.yaml"), policy)?;

    let lint = tokio::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("lint")
        .arg(dir.path())
        .output();
    let lint = tokio::time::timeout(Duration::from_secs(30), lint).await??;
    let expected = String::from_utf8(lint.stdout)?;
    assert!(expected.contains(needle), "{expected}");

    let serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .arg("--policies")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let serve = tokio::time::timeout(Duration::from_secs(30), serve).await??;
    assert_eq!(serve.status.code(), Some(1), "{serve:?}");
    let stderr = String::from_utf8(serve.stderr)?;
    for line in expected.lines() {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }
    Ok(())
}
