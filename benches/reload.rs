//! Time to load and swap in a policy set of 10, 100 and 1,000 policies: read every file,
//! parse, validate, compile (JSONPath, regexes, CEL), build the index, and install it
//! with arc-swap, exactly as the reloader does off the request path.
//!
//! `cargo bench --bench reload` (kept short: small samples, short measurement times).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// The allocator `graft serve` runs with (see `src/main.rs`), so the measurement is of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Policies per file: ConfigMaps usually hold a few files of several documents each.
const PER_FILE: usize = 10;

/// The i-th policy: a rotating mix of the shapes in `policies/` (set with a CEL template
/// and field tests, merge of containers, variables and `when`, regex match and exclude).
fn policy(i: usize) -> String {
    let head = format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: policy-{i}\nspec:\n"
    );
    let body = match i % 4 {
        0 => format!(
            r#"  params:
    networks: [net{i}a, net{i}b]
  match:
    resources: [pods]
    operations: [CREATE]
    namespaces: [team-{i}]
    labels:
      app: app-{i}
    fields:
      - path: $.spec.nodeSelector['pool']
        in: [gpu-{i}, cpu-{i}]
  mutations:
    - set:
        path: $.metadata.annotations['example.com/networks-{i}']
        value: "{{{{ params.networks.map(n, request.namespace + '/' + n).join(',') }}}}"
"#
        ),
        1 => format!(
            r#"  match:
    resources: [pods]
    operations: [CREATE]
    fields:
      - path: $.metadata.annotations['inject-{i}']
        regex: '(?i)^(y|yes|true|on)$'
  exclude:
    namespaces: [kube-system, kube-public]
  mutations:
    - merge:
        value:
          metadata:
            annotations:
              injected-{i}: "true"
          spec:
            containers:
              - name: sidecar-{i}
                image: nginx:1.27
                ports:
                  - containerPort: 80
"#
        ),
        2 => format!(
            r#"  params:
    ratio: 1.{r}
  match:
    resources: [nodes/status]
    operations: [UPDATE]
    labels:
      overcommit-{i}: "true"
  variables:
    - name: ratio
      expression: double(params.ratio)
  mutations:
    - set:
        path: $.status.allocatable.cpu
        value: "{{{{ scaleQuantity(object.status.capacity.cpu, variables.ratio, 'm') }}}}"
      when: variables.ratio > 1.0 && has(object.status.capacity.cpu)
"#,
            r = i % 9 + 1
        ),
        _ => format!(
            r#"  match:
    resources: [deployments]
    operations: [CREATE, UPDATE]
    labels:
      tier: tier-{i}
  mutations:
    - set:
        path: $.metadata.labels['owner-{i}']
        value: platform
    - merge:
        path: $.spec.template.metadata.labels
        value:
          policy-{i}: applied
"#
        ),
    };
    head + &body
}

/// Writes `count` policies into `dir`, `PER_FILE` documents per file.
fn generate(dir: &Path, count: usize) {
    for file in 0..count.div_ceil(PER_FILE) {
        let documents: Vec<String> = (file * PER_FILE..((file + 1) * PER_FILE).min(count))
            .map(policy)
            .collect();
        std::fs::write(
            dir.join(format!("policies-{file:04}.yaml")),
            documents.join("---\n"),
        )
        .expect("write a generated policy file");
    }
}

fn load_and_swap(c: &mut Criterion) {
    let mut group = c.benchmark_group("load_and_swap");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for count in [10, 100, 1_000] {
        let dir = tempfile::tempdir().expect("temp dir");
        generate(dir.path(), count);
        let paths: Vec<PathBuf> = vec![dir.path().to_path_buf()];
        // Fails the bench loudly if the generated policies are not a valid set.
        let loaded = graft::policy::load(&paths).expect("the generated set is valid");
        assert_eq!(loaded.set.len(), count);
        let state = graft::server::State::new(Arc::new(graft::metrics::Metrics::new()));
        group.bench_with_input(BenchmarkId::from_parameter(count), &paths, |b, paths| {
            b.iter(|| {
                let loaded = graft::policy::load(paths).expect("valid");
                state.activate(loaded.set);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, load_and_swap);
criterion_main!(benches);
