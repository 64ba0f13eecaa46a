//! Kubernetes' MutatingAdmissionPolicy, graft's second policy dialect: the documents
//! (`model.rs`), the apiserver's defaults and validation with its words
//! (`validate.rs`, `field_errors.rs`), and their compiled form.

pub mod compile;
pub mod compiled;
pub mod field_errors;
pub mod load;
pub mod model;
pub mod validate;
