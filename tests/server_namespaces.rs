//! Where `graft serve` gets namespace data, without a cluster: a policy set that needs it
//! and has no Kubernetes configuration refuses to start with a message that says what to
//! do, and a hot reload to such a set is refused; `--namespaces FILE` serves fixed
//! Namespace objects; a set that does not need it starts anywhere, and the namespace
//! cache's metrics are exported either way.
//! (tests/e2e_apiserver.rs covers the cache against a real kube-apiserver.)

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `graft serve` on the example policies (the sidecar example reads namespace labels).
fn serve(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("serve")
        .arg("--policies")
        .arg(repo().join("policies"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("GRAFT_KUBECONFIG")
        .output()
        .expect("run graft serve")
}

#[test]
fn a_set_that_needs_namespaces_and_no_cluster_refuses_to_start() {
    let output = serve(&[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "the policy set needs namespace data",
        "not running in a Kubernetes pod",
        "--kubeconfig FILE",
        "GRAFT_KUBECONFIG",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
}

#[test]
fn an_unusable_kubeconfig_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").expect("write");
    let output = serve(&["--kubeconfig", &kubeconfig.display().to_string()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&kubeconfig.display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains("current context"), "{stderr}");
}

#[test]
fn an_invalid_namespaces_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("namespaces.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n").expect("write");
    let output = serve(&["--namespaces", &file.display().to_string()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "the namespaces file {} is invalid",
            file.display()
        )),
        "{stderr}"
    );
}

/// A policy that injects only in namespaces labelled `sidecar-injection: enabled`:
/// served from a file, `default` is labelled and `plain` is not.
#[tokio::test]
async fn a_namespaces_file_is_served() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test apiserver CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let mut config = config(&repo().join("tests/fixtures/namespace-policies"), &secret);
        config.namespaces = graft::server::config::NamespaceConfig::File(
            repo().join("tests/policies/objects/namespaces.yaml"),
        );
        let server = start(config).await?;
        assert_eq!(get(server.running.metrics_addr, "/readyz").await?.0, 200);
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        for (namespace, injected) in [("default", true), ("plain", false)] {
            let review = review_of_injected_pod(namespace)?;
            let mut h1 = http1(connect(server.running.addr, client.clone()).await?).await?;
            let (status, body) =
                send1(&mut h1, mutate_request("POST", "application/json", review)?).await?;
            assert_eq!(status, 200);
            let answer: serde_json::Value = serde_json::from_slice(&body)?;
            assert_eq!(
                answer["response"]["patch"].is_string(),
                injected,
                "{namespace}: {answer}"
            );
        }
        // The cache never started, and its metrics are there all the same.
        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        for needle in [
            "graft_namespace_cache_last_sync_timestamp_seconds 0",
            "graft_namespace_cache_watch_restarts_total 0",
        ] {
            assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
        }
        server.shutdown().await
    })
    .await?
}

/// A set that needs no namespace data starts without any Kubernetes configuration.
#[test]
fn a_set_without_namespace_policies_needs_no_cluster() {
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("serve")
        .arg("--policies")
        .arg(repo().join("policies/multus-networks.yaml"))
        .arg("--lint")
        .output()
        .expect("run graft serve --lint");
    assert!(output.status.success());
    let loaded = graft::policy::load(&[repo().join("policies/multus-networks.yaml")])
        .expect("the Multus example loads");
    assert!(!loaded.set.needs_namespaces());
    let loaded = graft::policy::load(&[repo().join("policies")]).expect("the examples load");
    assert!(
        loaded.set.needs_namespaces(),
        "the sidecar example reads namespace labels"
    );
}

fn review_of_injected_pod(namespace: &str) -> Result<Vec<u8>> {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": namespace,
            "annotations": {"sidecar-injector-webhook.morven.me/inject": "yes"},
        },
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    });
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d4b6b8e-8f7e-4f63-9d43-3c1e9b7f2a10",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    });
    Ok(serde_json::to_vec(&review)?)
}

/// A hot reload to a set that needs namespace data, with no way to get it, is refused
/// like an invalid set: the running set keeps serving and the failure is counted.
#[tokio::test]
async fn a_reload_that_needs_namespaces_without_a_cluster_keeps_the_running_set() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test apiserver CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = tempfile::tempdir()?;
        let copy = |name: &str| {
            std::fs::copy(
                repo().join("policies").join(name),
                policies.path().join(name),
            )
        };
        copy("multus-networks.yaml")?;
        let server = start(config(policies.path(), &secret)).await?;
        let state = server.running.state.clone();
        let running = state.policies.load().revision().to_string();
        let mut reloads = state.policy_reloads.subscribe();

        copy("sidecar-injection.yaml")?;
        reloads.wait_for(|status| status.failures >= 1).await?;
        assert_eq!(state.policies.load().revision(), running);
        assert_eq!(state.policies.load().len(), 1);
        assert!(state.namespace_cache.load().is_none());
        assert_eq!(get(server.running.metrics_addr, "/readyz").await?.0, 200);
        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        assert!(
            metrics.contains("graft_policy_reloads_total{result=\"error\"} 1"),
            "{metrics}"
        );
        server.shutdown().await
    })
    .await?
}
