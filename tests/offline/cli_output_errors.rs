//! Every subcommand that prints, through the real binary, with a standard output that
//! fails: a reader that has gone away (`graft schema | head -1`) ends the run quietly
//! with status 141, as a process killed by SIGPIPE ends, and any other write error (a
//! full disk) is one `error:` line and status 2. Neither may panic, as `println!` does.

use crate::support::repo;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn graft(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_graft"));
    command
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs graft with stdout on a pipe whose read end is closed before graft starts, so its
/// first write fails with EPIPE, however little it prints.
fn with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    graft(args).stdout(writer).output().unwrap()
}

/// Checks that `args` print something when stdout works, so that the run on a closed
/// stdout does write to it, and that the closed stdout ends the run quietly.
fn quiet_on_closed_stdout(args: &[&str]) {
    let normal = graft(args).stdout(Stdio::piped()).output().unwrap();
    assert!(
        !normal.stdout.is_empty(),
        "graft {args:?} printed nothing: {}",
        String::from_utf8_lossy(&normal.stderr)
    );

    let output = with_closed_stdout(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "graft {args:?}: {stderr}");
    assert!(!stderr.contains("error"), "graft {args:?}: {stderr}");
    assert_eq!(output.status.code(), Some(141), "graft {args:?}: {stderr}");
}

/// A directory holding a policy lint reports an error for.
fn broken_policies() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: broken\nspec:\n  bogus: 1\n",
    )
    .unwrap();
    dir
}

fn path(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

const POLICIES: &str = "tests/fixtures/policies/";
const POD: &str = "tests/fixtures/pod-create-multus-worker.json";
const SUITE: &str = "tests/policies/multus-networks.yaml";

#[test]
fn schema() {
    quiet_on_closed_stdout(&["schema"]);
}

#[test]
fn completions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        quiet_on_closed_stdout(&["completions", shell]);
    }
}

#[test]
fn lint_with_findings() {
    let dir = broken_policies();
    quiet_on_closed_stdout(&["lint", path(dir.path())]);
    quiet_on_closed_stdout(&["lint", "--format", "json", path(dir.path())]);
    quiet_on_closed_stdout(&["serve", "--lint", "--policies", path(dir.path())]);
}

#[test]
fn lint_json_without_findings() {
    quiet_on_closed_stdout(&["lint", "--format", "json", "policies"]);
}

#[test]
fn test_suites() {
    quiet_on_closed_stdout(&["test", SUITE]);
}

#[test]
fn webhook_config() {
    quiet_on_closed_stdout(&["webhook-config"]);
}

#[test]
fn apply() {
    for output in ["yaml", "json", "patch"] {
        quiet_on_closed_stdout(&["apply", "--policies", POLICIES, "-o", output, POD]);
    }
}

#[test]
fn explain() {
    for format in ["text", "json"] {
        quiet_on_closed_stdout(&["explain", "--policies", POLICIES, "--format", format, POD]);
    }
}

#[test]
fn review() {
    quiet_on_closed_stdout(&["review", "--policies", POLICIES, POD]);
}

/// clap prints the help and ends the process itself, with its own status.
#[test]
fn help() {
    for args in [&["--help"][..], &["lint", "--help"]] {
        let output = with_closed_stdout(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "graft {args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "graft {args:?}: {stderr}");
    }
}

/// Any other write error is an error, said once and cleanly: the output is incomplete.
#[test]
fn a_full_stdout_is_an_error() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        println!("skipped: no /dev/full on this system");
        return;
    }
    let dir = broken_policies();
    let runs: [&[&str]; 9] = [
        &["schema"],
        &["completions", "bash"],
        &["lint", path(dir.path())],
        &["lint", "--format", "json", "policies"],
        &["test", SUITE],
        &["webhook-config"],
        &["apply", "--policies", POLICIES, POD],
        &["explain", "--policies", POLICIES, POD],
        &["review", "--policies", POLICIES, POD],
    ];
    for args in runs {
        let stdout = std::fs::OpenOptions::new().write(true).open(full).unwrap();
        let output = graft(args).stdout(stdout).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "graft {args:?}: {stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|line| line.contains("error"))
            .collect();
        assert_eq!(
            errors,
            ["error: cannot write to standard output: No space left on device (os error 28)"],
            "graft {args:?}: {stderr}"
        );
        assert_eq!(output.status.code(), Some(2), "graft {args:?}: {stderr}");
    }
}

/// A closed standard error is no panic either: lint's summary line goes there, and the
/// run still ends with lint's own status.
#[test]
fn a_closed_stderr_keeps_the_runs_status() {
    let broken = broken_policies();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = graft(&["lint", path(broken.path())])
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap();
    assert!(!output.stdout.is_empty(), "lint printed its findings");
    assert_eq!(output.status.code(), Some(1));
}
