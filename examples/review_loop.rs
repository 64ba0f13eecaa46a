//! Runs N reviews of the realistic pod against a generated policy set: the driver for
//! profiling with callgrind (instruction counts are stable on a shared machine).
//!
//! `cargo build --profile profiling --example review_loop`, then
//! `valgrind --tool=callgrind target/profiling/examples/review_loop 100 2000`
//! (policies, reviews). `review_loop handwritten 2000` runs the hand-written webhook's
//! review (`support/handwritten_review.rs`) instead: the baseline in instructions.
//! `review_loop 100 2000 multus` has only the Multus policy of the set match the pod: the
//! hand-written webhook's work; `multus-map` the same with the Multus example written as
//! a MutatingAdmissionPolicy (`policies/map/multus-networks.yaml`).
#![forbid(unsafe_code)]

use std::hint::black_box;

#[path = "support/handwritten_review.rs"]
mod handwritten_review;
#[path = "../benches/support/policies.rs"]
mod policies;

/// The allocator `graft serve` runs with (see `src/main.rs`), so the measurement is of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    let reviews: usize = args.next().as_deref().unwrap_or("1000").parse()?;
    let body = policies::REALISTIC_REVIEW.as_bytes();
    if first.as_deref() == Some("handwritten") {
        let mut bytes = 0;
        for _ in 0..reviews {
            bytes += black_box(handwritten_review::review(black_box(body))?).len();
        }
        println!("hand-written, {reviews} reviews, {bytes} response bytes");
        return Ok(());
    }
    let total: usize = first.as_deref().unwrap_or("100").parse()?;
    let matching = policies::Matching::from_argument(args.next().as_deref())
        .map_err(|error| anyhow::anyhow!("the third argument: {error}"))?;
    let dir = tempfile::tempdir()?;
    policies::write_set_matching(dir.path(), total, matching)?;
    let set = graft::policy::load_path(dir.path())
        .map_err(|findings| anyhow::anyhow!("{findings:?}"))?
        .set;
    let namespaces = policies::namespaces();
    let mut bytes = 0;
    for _ in 0..reviews {
        let reviewed = graft::admission::review(
            black_box(body),
            &set,
            graft::admission::ClusterSource::namespaces(&namespaces),
        )?;
        bytes += black_box(reviewed.to_json().expect("the response serialises")).len();
    }
    println!("{total} policies, {reviews} reviews, {bytes} response bytes");
    Ok(())
}
