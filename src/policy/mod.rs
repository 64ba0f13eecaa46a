//! Policies: the YAML model, loading from files, validation and compilation into a `PolicySet`.

pub mod findings;
pub mod model;

use std::path::{Path, PathBuf};

pub use findings::{Finding, Findings, Severity};

/// An immutable, compiled snapshot of every policy, indexed for selection.
#[derive(Debug, Default)]
pub struct PolicySet {
    revision: String,
}

impl PolicySet {
    pub fn empty() -> PolicySet {
        PolicySet {
            revision: "empty".to_string(),
        }
    }

    /// A content hash of the sources, identical for identical policy sets.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A loaded set and its non-fatal findings (warnings).
#[derive(Debug)]
pub struct Loaded {
    pub set: PolicySet,
    pub warnings: Vec<Finding>,
}

/// Loads every policy from the given files and directories, all or nothing.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, Findings> {
    let _ = paths;
    Ok(Loaded {
        set: PolicySet::empty(),
        warnings: Vec::new(),
    })
}

/// Convenience for one path.
pub fn load_path(path: &Path) -> Result<Loaded, Findings> {
    load(&[path.to_path_buf()])
}
