//! The integration tests that need no server: the engine and the policy language through
//! the library's public entry points, the offline commands through the real binary, the
//! property tests, and the checks of the docs, the deploy manifests and the repository.
//!
//! Each module was a test binary of its own; `cargo test --test offline cli_lint::` still runs
//! one of them alone.

#[path = "../support/mod.rs"]
mod support;

mod cli_admission_policy;
mod cli_certs;
mod cli_completions;
mod cli_errors;
mod cli_help;
mod cli_init;
mod cli_inputs;
mod cli_lint;
mod cli_namespaces;
mod cli_offline;
mod cli_output_errors;
mod cli_test_suites;
mod cli_test_update;
mod cli_yaml_out;
mod dependency_hygiene;
mod deploy_dockerfile;
mod deploy_docs;
mod deploy_render;
mod deploy_webhook;
mod docs_commands;
mod docs_install;
mod engine;
mod explain;
mod handwritten_baseline;
mod kubernetes_types;
mod lean_review;
mod module_dependencies;
mod mutation_kinds;
mod namespace_policies;
mod pod_controllers;
mod policy_limits;
mod properties;
mod regressions;
mod repository_standalone;
mod schema_committed;
mod tree_properties;
mod webhook_config_url;
