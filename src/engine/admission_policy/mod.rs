//! Running Kubernetes' MutatingAdmissionPolicy: matching (`matching.rs`), parameters
//! (`params.rs`), the `request` its expressions see (`request.rs`), one mutation applied
//! to the object (`mutate.rs`), and the passes over the invocations (`dispatch.rs`).

pub mod dispatch;
pub mod matching;
pub mod mutate;
pub mod params;
pub mod request;
