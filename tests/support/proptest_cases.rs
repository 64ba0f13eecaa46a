//! The case counts of the property tests.

use proptest::prelude::ProptestConfig;

/// `cases` per property: modest, so that the property tests stay fast in debug builds;
/// `PROPTEST_CASES` (proptest's own variable) replaces it for a deeper run.
pub fn config(cases: u32) -> ProptestConfig {
    let deeper = std::env::var("PROPTEST_CASES").ok();
    ProptestConfig {
        cases: deeper.and_then(|n| n.parse().ok()).unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
