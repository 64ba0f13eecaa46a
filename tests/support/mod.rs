//! What the integration test crates share. Each crate (`tests/offline`, `tests/server`,
//! `tests/leaks`, `tests/apiserver`) includes this tree with
//! `#[path = "../support/mod.rs"] mod support;` and uses the part it needs:
//!
//! - this module: the repository's root, its files and the captured reviews;
//! - [`cli`]: the real `graft` binary, run as the offline tests run it;
//! - [`fs`]: copies of the repository's directories;
//! - [`kustomize`]: `kubectl kustomize`, rendered offline and parsed;
//! - [`policies`]: policy documents, policy sets and engine runs built from them;
//! - [`proptest_cases`]: the case counts of the property tests;
//! - [`server`]: a test PKI, TLS clients and an in-process or child `graft serve`;
//! - [`reload`]: policy directories changed as kubelet and editors change them, under load.
//!
//! A crate uses only some of it, hence the one `allow(dead_code)` here.
#![allow(dead_code)]

use std::path::PathBuf;

pub mod cli;
pub mod fs;
pub mod kustomize;
pub mod policies;
pub mod proptest_cases;
pub mod reload;
pub mod server;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T = ()> = std::result::Result<T, Error>;

/// The root of the repository (the package), where the tests find its files.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A text file of the repository, by its path from the root.
pub fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An AdmissionReview captured from a kube-apiserver, from `tests/fixtures/`.
pub fn fixture(name: &str) -> Result<Vec<u8>> {
    Ok(std::fs::read(repo().join("tests/fixtures").join(name))?)
}
