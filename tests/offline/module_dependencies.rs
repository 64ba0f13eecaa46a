//! ARCHITECTURE.md's "Dependencies point one way": the core modules of `src/` refer to
//! each other (`crate::NAME`, outside comments) without a cycle, and only downwards.

use crate::support::repo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The core modules, each with the modules it may refer to.
const ALLOWED: &[(&str, &[&str])] = &[
    ("tree", &[]),
    ("jsonpath", &["tree"]),
    ("k8s", &["jsonpath", "tree"]),
    ("manifests", &[]),
    ("expr", &["k8s", "tree"]),
    ("namespaces", &["k8s", "tree"]),
    ("params", &["k8s", "tree"]),
    ("policy", &["expr", "jsonpath", "k8s", "manifests", "tree"]),
    (
        "engine",
        &[
            "expr",
            "jsonpath",
            "k8s",
            "namespaces",
            "params",
            "policy",
            "tree",
        ],
    ),
    (
        "admission",
        &["engine", "k8s", "namespaces", "params", "policy", "tree"],
    ),
    ("logging", &[]),
];

fn sources(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read src") {
            sources(&entry.expect("entry").path(), out);
        }
    } else if path.is_file() && path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The top-level modules `module` refers to, outside comments.
fn references(module: &str) -> BTreeSet<String> {
    let src = repo().join("src");
    let mut files = Vec::new();
    sources(&src.join(module), &mut files);
    sources(&src.join(format!("{module}.rs")), &mut files);
    assert!(!files.is_empty(), "no sources for {module}");
    let mut found = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                let name: String = code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != module && !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn core_modules_refer_only_downwards() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    for (module, may) in &allowed {
        for reference in references(module) {
            assert!(
                may.contains(&reference.as_str()),
                "src/{module} refers to crate::{reference}, which it may not: the allowed \
                 references are {may:?} (see ARCHITECTURE.md, \"Dependencies point one way\")"
            );
        }
    }
}

#[test]
fn the_allowed_references_have_no_cycle() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    // Each module may refer only to modules listed before it.
    for (index, (module, may)) in ALLOWED.iter().enumerate() {
        for target in *may {
            let position = ALLOWED.iter().position(|(name, _)| name == target);
            assert!(
                position.is_some_and(|p| p < index),
                "{module} -> {target} is not downwards"
            );
        }
    }
    assert_eq!(allowed.len(), ALLOWED.len());
}
