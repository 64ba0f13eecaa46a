//! Running Kubernetes' MutatingAdmissionPolicy: matching (`matching.rs`).

pub mod matching;
