//! Errors through the real binary: each cause said once, with the exit code for usage
//! errors.

use crate::support::repo;
use std::process::Command;

#[test]
fn a_missing_certificate_names_the_file_and_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("tls.crt");
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--policies")
        .arg(repo().join("policies/multus-networks.yaml"))
        .arg("--tls-cert")
        .arg(&missing)
        .arg("--tls-key")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(line.contains(&missing.display().to_string()), "{line}");
    assert_eq!(
        line.matches("No such file or directory").count(),
        1,
        "the cause is said once: {line}"
    );
}
