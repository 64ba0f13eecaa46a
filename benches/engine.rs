//! Engine benchmarks (issue #6): one review of a realistic pod against 1 / 10 / 100 / 1,000
//! loaded policies (4 of them matching), loading and compiling 10 / 100 / 1,000 policies,
//! and the patch computation alone.
//!
//! `cargo bench --bench engine`; measurement times are short so the whole run takes a
//! couple of minutes.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use graft::policy::PolicySet;

#[path = "support/policies.rs"]
mod policies;

/// The allocator `graft serve` runs with (see `src/main.rs`), so the measurement is of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn load_set(dir: &Path, total: usize) -> PolicySet {
    policies::write_set(dir, total).expect("write the generated policies");
    graft::policy::load_path(dir)
        .expect("the generated policies are valid")
        .set
}

fn review(c: &mut Criterion) {
    let body = policies::REALISTIC_REVIEW.as_bytes();
    let mut group = c.benchmark_group("review");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    let namespaces = policies::namespaces();
    for total in [1, 10, 100, 1000] {
        let dir = tempfile::tempdir().expect("temp dir");
        let set = load_set(dir.path(), total);
        // The benchmark is only meaningful if the matching policies really apply.
        let reviewed = graft::admission::oracle::review(
            body,
            &set,
            graft::admission::ClusterSource::namespaces(&namespaces),
        )
        .expect("the fixture is valid");
        assert_eq!(
            reviewed.evaluation.applied().count(),
            total.min(4),
            "{total} policies: {:?}",
            reviewed.evaluation.policies
        );
        // What the server does per request: parse (what the policies can see), evaluate,
        // respond, serialise.
        group.bench_with_input(BenchmarkId::from_parameter(total), &set, |b, set| {
            b.iter(|| {
                let reviewed = graft::admission::review(
                    black_box(body),
                    set,
                    graft::admission::ClusterSource::namespaces(&namespaces),
                )
                .expect("valid");
                black_box(reviewed.to_json().expect("the response serialises"))
            })
        });
    }
    group.finish();
}

fn load_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_compile");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    for total in [10, 100, 1000] {
        let dir = tempfile::tempdir().expect("temp dir");
        policies::write_set(dir.path(), total).expect("write the generated policies");
        group.throughput(Throughput::Elements(total as u64));
        group.bench_with_input(BenchmarkId::from_parameter(total), dir.path(), |b, path| {
            b.iter(|| {
                let loaded = graft::policy::load_path(path).expect("valid");
                black_box(loaded.set.len())
            })
        });
    }
    group.finish();
}

fn patch(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let set = load_set(dir.path(), 4);
    let reviewed = graft::admission::oracle::review(
        policies::REALISTIC_REVIEW.as_bytes(),
        &set,
        graft::admission::ClusterSource::namespaces(&policies::namespaces()),
    )
    .expect("valid");
    let before = reviewed
        .review
        .request
        .object
        .as_ref()
        .map(graft::tree::Tree::to_value)
        .expect("an object");
    let after = reviewed.evaluation.mutated().expect("a mutated object");
    let mut group = c.benchmark_group("patch");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("diff", |b| {
        b.iter(|| black_box(json_patch::diff(black_box(&before), black_box(&after))))
    });
    group.finish();
}

criterion_group!(benches, review, load_compile, patch);
criterion_main!(benches);
