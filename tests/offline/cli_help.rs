//! The command line explains itself: every argument of every subcommand has help text,
//! every `graft serve` setting has its environment variable (named after its flag, and
//! shown by `--help`), and the commands that evaluate objects read standard input the
//! same way.

use clap::CommandFactory as _;
use graft::cli::Cli;

/// Every argument of `command` and its subcommands, as `graft SUB --flag` (or `<NAME>`
/// for a positional), with the argument.
fn arguments(command: &clap::Command, path: &str) -> Vec<(String, clap::Arg)> {
    let mut found = Vec::new();
    for argument in command.get_arguments() {
        let name = match argument.get_long() {
            Some(long) => format!("--{long}"),
            None => format!("<{}>", argument.get_id()),
        };
        found.push((format!("{path} {name}"), argument.clone()));
    }
    for sub in command.get_subcommands() {
        found.extend(arguments(sub, &format!("{path} {}", sub.get_name())));
    }
    found
}

fn has_text(text: Option<&clap::builder::StyledStr>) -> bool {
    text.is_some_and(|text| !text.to_string().trim().is_empty())
}

#[test]
fn every_argument_has_help_text() {
    let command = Cli::command();
    let missing: Vec<String> = arguments(&command, "graft")
        .into_iter()
        .filter(|(_, argument)| !has_text(argument.get_help()))
        .map(|(name, _)| name)
        .collect();
    assert!(missing.is_empty(), "arguments without help: {missing:?}");
}

#[test]
fn every_subcommand_has_help_text() {
    let command = Cli::command();
    let missing: Vec<&str> = command
        .get_subcommands()
        .filter(|sub| !has_text(sub.get_about()))
        .map(clap::Command::get_name)
        .collect();
    assert!(missing.is_empty(), "subcommands without help: {missing:?}");
}

/// `--max-body-bytes` -> `GRAFT_MAX_BODY_BYTES`.
fn env_name(long: &str) -> String {
    format!("GRAFT_{}", long.replace('-', "_").to_uppercase())
}

/// The flags of `graft serve` that are actions, not settings of a running server: no
/// Deployment sets them, so they have no environment variable.
const SERVE_ACTIONS: [&str; 2] = ["help", "lint"];

#[test]
fn every_serve_setting_has_its_environment_variable() {
    let command = Cli::command();
    let serve = command
        .find_subcommand("serve")
        .expect("graft serve exists");
    let mut checked = 0;
    for argument in serve.get_arguments() {
        let long = argument.get_long().expect("serve takes flags only");
        if SERVE_ACTIONS.contains(&long) {
            assert_eq!(argument.get_env(), None, "--{long}");
            continue;
        }
        let env = argument.get_env().and_then(|env| env.to_str());
        assert_eq!(env, Some(env_name(long).as_str()), "--{long}");
        checked += 1;
    }
    assert!(checked > 10, "only {checked} serve settings found");
}

/// Environment variables configure the server, which a Deployment runs; an offline
/// command takes its flags from whoever types or scripts it, and a `GRAFT_POLICIES`
/// exported for `graft serve` must not change what `graft apply` reads.
#[test]
fn only_serve_reads_the_environment() {
    let command = Cli::command();
    let reading: Vec<String> = arguments(&command, "graft")
        .into_iter()
        .filter(|(name, argument)| {
            !name.starts_with("graft serve ") && argument.get_env().is_some()
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        reading.is_empty(),
        "offline flags read the environment: {reading:?}"
    );
}

#[test]
fn serve_help_shows_every_environment_variable() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["serve", "--help"])
        .env_remove("GRAFT_NAMESPACES")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8(output.stdout).unwrap();
    for env in ["GRAFT_NAMESPACES", "GRAFT_PARAMS", "GRAFT_POLICIES"] {
        assert!(help.contains(&format!("[env: {env}=")), "{env}: {help}");
    }
}

/// A subcommand's help is its own description whole: the one-line summary `graft --help`
/// lists, then the details (what `apply` does at DELETE, `lint`'s exit codes).
#[test]
fn subcommands_show_their_whole_description() {
    let cli = Cli::command();
    for (name, detail) in [
        ("apply", "At DELETE the request carries"),
        ("lint", "Exit codes:"),
        ("explain", "The evaluation is the server's"),
        ("review", "uid echoed"),
    ] {
        let sub = cli
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("graft {name}"));
        assert!(has_text(sub.get_about()), "graft {name} has a summary");
        let long = sub
            .get_long_about()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(long.contains(detail), "graft {name} --help: {long}");
    }
}
