//! The real `graft` binary, run as a user runs it: in a directory, with or without
//! standard input, its output captured.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs graft in `dir` (so that messages name files as the arguments do); standard
/// input is `/dev/null`.
pub fn graft(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graft"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run graft")
}

/// Runs graft in `dir` as on a developer's machine: without the `CI` variable the test
/// runner itself may have, which `graft test --update` refuses.
pub fn graft_locally(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graft"))
        .current_dir(dir)
        .args(args)
        .env_remove("CI")
        .output()
        .expect("run graft")
}

/// Runs graft in `dir` with `stdin` on a pipe, closed once written.
pub fn graft_with_stdin(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start graft");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(stdin)
        .expect("write graft's stdin");
    child.wait_with_output().expect("wait for graft")
}

/// [`graft_with_stdin`] with an empty standard input: a pipe closed at once.
pub fn graft_piped(dir: &Path, args: &[&str]) -> Output {
    graft_with_stdin(dir, args, b"")
}

/// [`graft_with_stdin`] at the repository's root (paths in `args` are relative to it),
/// standard input `stdin` or empty.
pub fn graft_in_repo(args: &[&str], stdin: Option<&[u8]>) -> Output {
    graft_with_stdin(&super::repo(), args, stdin.unwrap_or_default())
}

/// Standard output, lossily decoded.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Standard error, lossily decoded.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output of a run that must have succeeded (else its standard error is the
/// failure), as UTF-8.
pub fn success_stdout(output: Output) -> String {
    assert!(
        output.status.success(),
        "graft failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// `graft certs --out OUT` with `args`.
pub fn graft_certs(out: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("certs")
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("run graft certs")
}
