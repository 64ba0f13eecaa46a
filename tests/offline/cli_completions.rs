//! `graft completions SHELL` through the real binary: a script for each shell that
//! knows every subcommand and flag, and a bash script bash itself accepts.

use std::process::Command;

fn completions(shell: &str) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["completions", shell])
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn every_shell_gets_a_script_with_every_subcommand_and_flag() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, script) = completions(shell);
        assert_eq!(code, Some(0), "{shell}");
        for word in [
            "serve",
            "lint",
            "apply",
            "review",
            "webhook-config",
            "completions",
            "namespaces",
            "log-format",
        ] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
}

#[test]
fn the_bash_script_parses_and_defines_its_function() {
    let (_, script) = completions("bash");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graft.bash");
    std::fs::write(&path, script).unwrap();
    let Ok(output) = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && declare -F _graft", path.display()))
        .output()
    else {
        println!("skipped: no bash on this machine");
        return;
    };
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "_graft");
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let (code, _) = completions("tcsh");
    assert_eq!(code, Some(2));
}
