//! Dependency hygiene: no unmaintained crate in the build, a stated minimum Rust version
//! that the code and every dependency really build with, and the global allocator chosen
//! by the programs rather than imposed by the library.

use crate::support::{read, repo};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A `major.minor` version, from `1.88` or `1.88.0`.
fn version(text: &str) -> (u64, u64) {
    let mut parts = text.trim_matches('"').split('.');
    let mut next = || {
        parts
            .next()
            .and_then(|part| part.parse().ok())
            .unwrap_or_else(|| panic!("not a version: {text:?}"))
    };
    (next(), next())
}

fn stated_rust_version() -> (u64, u64) {
    let manifest = read("Cargo.toml");
    let line = manifest
        .lines()
        .find(|line| line.starts_with("rust-version"))
        .expect("Cargo.toml states rust-version");
    version(
        line.split('=')
            .nth(1)
            .expect("rust-version = \"X.Y\"")
            .trim(),
    )
}

/// Crates with a RUSTSEC "unmaintained" advisory that graft once used.
const UNMAINTAINED: &[(&str, &str)] = &[("rustls-pemfile", "RUSTSEC-2025-0134")];

#[test]
fn no_unmaintained_crate_is_locked() {
    let lock = read("Cargo.lock");
    for (name, advisory) in UNMAINTAINED {
        assert!(
            !lock.contains(&format!("name = \"{name}\"")),
            "{name} is unmaintained ({advisory}); Cargo.lock still has it"
        );
    }
}

#[test]
fn the_stated_minimum_rust_covers_the_language_and_every_dependency() {
    let stated = stated_rust_version();
    // The code uses `if let ... && ...` chains, stable since Rust 1.88.
    assert!(
        stated >= (1, 88),
        "let chains need Rust 1.88; rust-version says {stated:?}"
    );
    // The packages built on this host: dependencies of other platforms (wasm's, say)
    // are not downloaded, and offline metadata could not describe them.
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(repo())
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let resolved: Vec<&str> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve.nodes")
        .iter()
        .filter_map(|node| node["id"].as_str())
        .collect();
    let packages = metadata["packages"].as_array().expect("packages");
    for package in packages {
        let (Some(id), Some(required)) = (package["id"].as_str(), package["rust_version"].as_str())
        else {
            continue;
        };
        if !resolved.contains(&id) {
            continue;
        }
        assert!(
            version(required) <= stated,
            "{} {} needs Rust {required}, above rust-version {stated:?}",
            package["name"],
            package["version"]
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_programs_choose_the_global_allocator() {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    let library: Vec<_> = files
        .iter()
        .filter(|path| !path.ends_with("src/main.rs"))
        .filter(|path| {
            std::fs::read_to_string(path)
                .expect("read source")
                .contains("#[global_allocator]")
        })
        .collect();
    assert!(
        library.is_empty(),
        "the library sets the global allocator in {library:?}: a program that links graft must be able to choose its own"
    );
    assert!(read("src/main.rs").contains("#[global_allocator]"));
    for bench in ["benches/engine.rs", "benches/reload.rs"] {
        assert!(
            read(bench).contains("#[global_allocator]"),
            "{bench} measures with the allocator graft serve runs"
        );
    }
}
