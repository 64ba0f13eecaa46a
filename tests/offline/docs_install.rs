//! Every `cargo install` of graft the docs show builds with `--locked`: the versions in
//! Cargo.lock, which the tests ran with, not whatever newer ones the registry has today.

use crate::support::repo;

/// The documents that tell a reader how to build graft.
fn documents() -> Vec<std::path::PathBuf> {
    let mut documents: Vec<_> = [
        "README.md",
        "ARCHITECTURE.md",
        "Dockerfile",
        "src/cli/init/README.md",
    ]
    .iter()
    .map(|name| repo().join(name))
    .collect();
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            documents.push(path);
        }
    }
    documents
}

#[test]
fn cargo_install_of_graft_is_locked() {
    let mut seen = 0;
    let mut unlocked = Vec::new();
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        for (number, line) in text.lines().enumerate() {
            // graft itself: from this checkout or from its repository, not another tool.
            let Some(at) = line.find("cargo install") else {
                continue;
            };
            let command = &line[at..];
            let command = command.split('`').next().unwrap_or(command);
            if !(command.contains("--path") || command.contains("--git")) {
                continue;
            }
            seen += 1;
            if !command.split_whitespace().any(|word| word == "--locked") {
                unlocked.push(format!("{}:{}: {command}", path.display(), number + 1));
            }
        }
    }
    assert!(seen > 0, "no document says how to install graft");
    assert!(
        unlocked.is_empty(),
        "cargo install without --locked: {unlocked:#?}"
    );
}
