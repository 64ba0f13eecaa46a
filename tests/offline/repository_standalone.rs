//! The repository stands alone: no test, script, bench or document reads a path outside it,
//! so `git clone` to any directory and `cargo test` there pass.
//!
//! The one exception is `.ci/run`, which asks the envtest script beside a checkout for the
//! kube-apiserver binaries (and the tests that need them skip without it).

use crate::support::repo;
use std::path::{Path, PathBuf};

/// Build output and version control, not the repository's content. `.git` is a file,
/// not a directory, in a linked worktree or a submodule.
const SKIPPED: &[&str] = &["target", ".git", "artifacts", "corpus"];

/// `(file, needle)` pairs that are allowed: the file may mention the path on purpose.
const ALLOWED: &[(&str, &str)] = &[(".ci/run", "../shared/envtest/setup.sh")];

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if SKIPPED.contains(&name.to_string_lossy().as_ref()) {
            continue;
        }
        if kind.is_dir() {
            text_files(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

/// Paths that point outside any checkout: home and workspace roots of development
/// machines, the folder beside the repository, and this checkout's parent directory.
fn outside_needles(repository: &Path) -> Vec<String> {
    // Built from their parts, so this file does not itself hold the paths it looks for.
    let mut needles: Vec<String> = ["home", "root", "Users", "work"]
        .iter()
        .map(|dir| format!("/{dir}/"))
        .collect();
    needles.push(format!("../{}", "shared"));
    // The parent directory, unless it is the system's temporary directory (a checkout in
    // /tmp): scripts rightly make their scratch directories there.
    let temp = std::env::temp_dir();
    let temp = temp.canonicalize().unwrap_or(temp);
    if let Some(parent) = repository
        .parent()
        .filter(|p| p.as_os_str().len() > 1)
        .filter(|p| p.canonicalize().map_or(true, |p| p != temp))
    {
        needles.push(format!("{}/", parent.display()));
    }
    needles
}

fn offending_lines(repository: &Path) -> Vec<String> {
    let needles = outside_needles(repository);
    let this_file = Path::new(file!());
    let mut files = Vec::new();
    text_files(repository, &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(repository).unwrap_or(&file);
        // This file names the needles it looks for.
        if relative == this_file {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not text
        };
        for (number, line) in text.lines().enumerate() {
            for needle in &needles {
                if !line.contains(needle.as_str()) {
                    continue;
                }
                let allowed = ALLOWED.iter().any(|(path, allowed)| {
                    relative == Path::new(path) && allowed.contains(needle.trim_end_matches('/'))
                });
                if !allowed {
                    found.push(format!(
                        "{}:{}: {needle:?} in {line:?}",
                        relative.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn nothing_in_the_repository_reads_a_path_outside_it() {
    let found = offending_lines(&repo());
    assert!(
        found.is_empty(),
        "paths outside the repository:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_path_outside_the_repository() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repository = dir.path().join("checkout");
    for tree in ["tests/offline", "tests/support"] {
        std::fs::create_dir_all(repository.join(tree)).expect("dirs");
    }
    std::fs::write(
        repository.join("tests/support/mod.rs"),
        format!(
            "fn fixture() {{ std::fs::read(\"/{}/shared/fixtures/a.json\"); }}\n",
            "work"
        ),
    )
    .expect("write");
    std::fs::write(
        repository.join("tests/offline/sibling.rs"),
        format!("const P: &str = \"{}/other/x\";\n", dir.path().display()),
    )
    .expect("write");
    std::fs::write(repository.join("README.md"), "cargo test\n").expect("write");
    let mut found = offending_lines(&repository);
    found.sort();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("tests/offline/sibling.rs:1: "),
        "{found:#?}"
    );
    assert!(
        found[1].starts_with(&format!("tests/support/mod.rs:1: \"/{}/\"", "work")),
        "{found:#?}"
    );
}
