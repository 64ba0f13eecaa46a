//! Running Kubernetes' MutatingAdmissionPolicy: matching (`matching.rs`), parameters (`params.rs`).

pub mod matching;
pub mod params;
