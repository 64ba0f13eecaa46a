//! Policy sets for the benchmarks: the four policies that match the realistic pod
//! (`benches/fixtures/pod-create-realistic.json`) plus generated, realistic policies that
//! do not match it (other namespaces, other labels, other resources).
//!
//! Shared by `benches/engine.rs` and `examples/gen_policies.rs` (used by `bench/load.sh`),
//! so the micro benchmarks and the load test measure the same sets.

// Each including target uses a different part of this module.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::Path;

/// The realistic pod's AdmissionReview, as the apiserver sends it (compact JSON, ~6 KB).
pub const REALISTIC_REVIEW: &str = include_str!("../fixtures/pod-create-realistic.json");

/// The example policies whose shapes the matching policies take, verbatim.
const MULTUS: &str = include_str!("../../policies/multus-networks.yaml");
/// The Multus example as a MutatingAdmissionPolicy and its binding.
const MULTUS_MAP: &str = include_str!("../../policies/map/multus-networks.yaml");
const SIDECAR: &str = include_str!("../../policies/sidecar-injection.yaml");
const STATEFULSET: &str = include_str!("../../policies/statefulset-node-selector.yaml");

/// The node-overcommit example's shape (variables, a `when` guard, a computed value),
/// retargeted at the pod, since the example itself matches `nodes/status`.
const GPU_ANNOTATION: &str = r#"apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata:
  name: gpu-count-annotation
spec:
  failurePolicy: Ignore
  params:
    resource: nvidia.com/gpu
  match:
    resources: [pods]
    operations: [CREATE]
    labels:
      nvidia.com/dynamo-component-type: worker
  variables:
    - name: gpus
      expression: >-
        int(object.spec.containers[0].resources.?limits[params.resource].orValue('0'))
  mutations:
    - set:
        path: $.metadata.annotations['graft.dev/gpus']
        value: "{{ string(variables.gpus) }}"
      when: variables.gpus > 0
"#;

/// The realistic pod's namespace, `dynamo-system`, labelled for sidecar injection (the
/// sidecar example's `namespaceSelector`) and with its name label (the Multus
/// MutatingAdmissionPolicy's binding selects it), as the server's namespace cache would
/// hold it.
pub fn namespaces() -> graft::namespaces::NamespaceMap {
    graft::namespaces::NamespaceMap::new(
        [graft::namespaces::Namespace {
            name: "dynamo-system".to_string(),
            labels: [
                ("sidecar-injection".to_string(), "enabled".to_string()),
                // Every namespace carries its name as this label (the apiserver sets it).
                (
                    "kubernetes.io/metadata.name".to_string(),
                    "dynamo-system".to_string(),
                ),
            ]
            .into(),
            annotations: Default::default(),
        }],
        "the benchmark's namespaces",
    )
}

/// The policies that match the realistic pod, in the order they are added to a set.
pub fn matching() -> [&'static str; 4] {
    [MULTUS, SIDECAR, STATEFULSET, GPU_ANNOTATION]
}

/// One generated policy that does not match the realistic pod. The shapes rotate so a
/// set holds what a real cluster's does: most policies target other namespaces or other
/// resources; some target pods by labels the pod does not carry.
pub fn non_matching(i: usize) -> String {
    let mut yaml = format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: generated-{i:04}\nspec:\n"
    );
    // Writing to a String cannot fail.
    let _ = match i % 5 {
        // Pods of another team's namespace.
        0 => write!(
            yaml,
            r#"  match:
    resources: [pods]
    operations: [CREATE]
    namespaces: [team-{i}]
    labels:
      app.kubernetes.io/part-of: team-{i}
  mutations:
    - set:
        path: $.metadata.annotations['team-{i}.example.com/owner']
        value: team-{i}
"#
        ),
        // Pods of an application the realistic pod is not.
        1 => write!(
            yaml,
            r#"  failurePolicy: Ignore
  match:
    resources: [pods]
    operations: [CREATE, UPDATE]
    labelSelector:
      matchExpressions:
        - key: app.kubernetes.io/name
          operator: In
          values: [svc-{i}, svc-{i}-canary]
    fields:
      - path: $.spec.containers[*].image
        regex: '^registry.example.com/svc-{i}:'
  exclude:
    namespaces: [kube-system]
  mutations:
    - merge:
        value:
          spec:
            containers:
              - name: svc-{i}-proxy
                image: registry.example.com/proxy:1.4.2
"#
        ),
        // Deployments: never candidates for a pod.
        2 => write!(
            yaml,
            r#"  match:
    resources: [apps/v1/deployments]
    operations: [CREATE, UPDATE]
    namespaces: [team-{i}, team-{i}-staging]
  mutations:
    - set:
        path: $.spec.template.metadata.labels['team-{i}.example.com/managed']
        value: "true"
"#
        ),
        // StatefulSets with a CEL condition.
        3 => write!(
            yaml,
            r#"  failurePolicy: Ignore
  match:
    resources: [apps/v1/statefulsets]
    operations: [CREATE]
    cel: object.spec.replicas > {r}
  mutations:
    - set:
        path: $.metadata.annotations['graft.dev/large-set-{i}']
        value: "{{{{ string(object.spec.replicas) }}}}"
"#,
            r = i % 7 + 2
        ),
        // Services and ConfigMaps by annotation.
        _ => write!(
            yaml,
            r#"  match:
    resources: [services, configmaps]
    operations: [CREATE, UPDATE]
    annotations:
      example.com/tier-{i}: gold
  mutations:
    - remove:
        path: $.metadata.annotations['example.com/legacy-{i}']
"#
        ),
    };
    yaml
}

/// Which of the policies that match the realistic pod a set holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matching {
    /// All four ([`matching`]): the pod gets six patch operations.
    All,
    /// Only the Multus policy: the hand-written webhook's work
    /// (`examples/handwritten_webhook.rs`), one patch operation.
    Multus,
    /// Only the Multus example written as a MutatingAdmissionPolicy: the same patch
    /// operation, through the second dialect.
    MultusAdmissionPolicy,
}

impl Matching {
    /// The command-line argument for it: none for [`Matching::All`], `multus`,
    /// `multus-map`.
    pub fn from_argument(argument: Option<&str>) -> Result<Matching, String> {
        match argument {
            None => Ok(Matching::All),
            Some("multus") => Ok(Matching::Multus),
            Some("multus-map") => Ok(Matching::MultusAdmissionPolicy),
            Some(other) => Err(format!("`multus`, `multus-map` or nothing, not {other:?}")),
        }
    }
}

/// The YAML of a set of `total` policies: up to four matching ones first, the rest generated.
pub fn set_yaml(total: usize) -> String {
    set_yaml_matching(total, Matching::All)
}

/// The YAML of a set of `total` policies: the `matching` ones first, the rest generated.
pub fn set_yaml_matching(total: usize, matching: Matching) -> String {
    let mut documents: Vec<String> = match matching {
        Matching::All => self::matching()
            .iter()
            .take(total)
            .map(|text| text.to_string())
            .collect(),
        Matching::Multus => self::matching()
            .iter()
            .take(1.min(total))
            .map(|text| text.to_string())
            .collect(),
        Matching::MultusAdmissionPolicy => vec![MULTUS_MAP.to_string()],
    };
    for i in 0..total.saturating_sub(documents.len()) {
        documents.push(non_matching(i));
    }
    documents.join("\n---\n")
}

/// Writes a set of `total` policies into `dir`, one file per 100 policies, as a
/// ConfigMap with many keys would be mounted.
pub fn write_set(dir: &Path, total: usize) -> std::io::Result<()> {
    write_set_matching(dir, total, Matching::All)
}

/// [`write_set`] with only the `matching` policies that match the realistic pod.
pub fn write_set_matching(dir: &Path, total: usize, matching: Matching) -> std::io::Result<()> {
    let documents: Vec<String> = set_yaml_matching(total, matching)
        .split("\n---\n")
        .map(str::to_string)
        .collect();
    for (n, chunk) in documents.chunks(100).enumerate() {
        std::fs::write(
            dir.join(format!("policies-{n:02}.yaml")),
            chunk.join("\n---\n"),
        )?;
    }
    Ok(())
}
