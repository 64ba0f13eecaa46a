//! Running Kubernetes' MutatingAdmissionPolicy: matching (`matching.rs`), parameters
//! (`params.rs`), the `request` its expressions see (`request.rs`), and one mutation
//! applied to the object (`mutate.rs`).

pub mod matching;
pub mod mutate;
pub mod params;
pub mod request;
