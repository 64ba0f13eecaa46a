//! `kubectl kustomize`, rendered offline (no cluster is contacted) and parsed.

use std::path::Path;
use std::process::Command;

use serde::Deserialize as _;
use serde_json::Value;

/// `kubectl kustomize DIR`, parsed into one JSON value per object.
pub fn render(dir: &Path) -> Vec<Value> {
    let output = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
        Ok(output) => output,
        Err(error) => panic!(
            "cannot run `kubectl kustomize {}`: {error}. These tests need kubectl on PATH \
             (it renders kustomize offline; no cluster is contacted). Install kubectl.",
            dir.display()
        ),
    };
    assert!(
        output.status.success(),
        "`kubectl kustomize {}` failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("kubectl prints UTF-8");
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("kubectl prints valid YAML"))
        .filter(|value| !value.is_null())
        .collect()
}

/// The rendered object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered output"))
}

/// The control plane address the network-policy overlays of the tests admit.
pub const CONTROL_PLANE_CIDR: &str = "10.0.0.10/32";

/// A kustomization on `base` (relative to its directory) with the network-policy
/// component, its placeholder replaced as deploy/components/network-policy's comment shows.
pub fn network_policy_overlay(base: &str) -> String {
    format!(
        "resources: [{base}]\n\
         components: [../deploy/components/network-policy]\n\
         patches:\n  \
           - target: {{group: networking.k8s.io, kind: NetworkPolicy, name: graft}}\n    \
             patch: |-\n      \
               - op: replace\n        \
                 path: /spec/ingress/0/from\n        \
                 value:\n          \
                   - ipBlock: {{cidr: {CONTROL_PLANE_CIDR}}}\n"
    )
}
