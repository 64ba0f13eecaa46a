//! Where `graft serve` gets namespace data, without a cluster: outside a pod with no
//! Kubernetes configuration a set that needs it still serves (a local `graft serve` on the
//! examples works), and its namespace-aware policies fail with a message that says what to
//! do, at startup and after a hot reload alike; an unusable kubeconfig or namespaces file
//! stops the server; `--namespaces FILE` serves fixed Namespace objects; the namespace
//! cache's metrics are exported either way.
//! (tests/apiserver/main.rs covers the cache against a real kube-apiserver.)

use crate::support::Error;
use std::process::Command;

use crate::support::repo;
use crate::support::server::*;

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

/// Outside a pod, with neither `--kubeconfig` nor `--namespaces`: the server starts and
/// says in its log what it lacks; a namespace-aware policy (failurePolicy Fail) denies with
/// a message naming both flags, and one that needs no namespace data is unaffected.
#[tokio::test]
async fn outside_a_cluster_without_namespace_data_the_server_serves_and_says_what_to_pass() -> Result
{
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    for (from, name) in [
        (
            "tests/fixtures/namespace-policies",
            "namespace-sidecar.yaml",
        ),
        ("tests/fixtures/policies", "node-pods.yaml"),
    ] {
        std::fs::copy(repo().join(from).join(name), policies.path().join(name))?;
    }
    let mut child = serve_command(policies.path(), &secret)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("GRAFT_KUBECONFIG")
        .spawn()?;
    let outcome = async {
        let lines = log_lines(&mut child)?;
        let warning = next_log_where(&lines, |line| line["level"] == "WARN")?;
        let message = warning["message"].as_str().unwrap_or_default();
        for needle in ["outside a Kubernetes pod", "--kubeconfig", "--namespaces"] {
            assert!(message.contains(needle), "missing {needle:?} in {warning}");
        }
        let serving = next_log_where(&lines, |line| line["message"] == "graft serving")?;
        let addr: std::net::SocketAddr = serving["addr"].as_str().ok_or("no addr")?.parse()?;
        let metrics: std::net::SocketAddr = serving["metrics_addr"]
            .as_str()
            .ok_or("no metrics_addr")?
            .parse()?;
        assert_eq!(get(metrics, "/readyz").await?.0, 200);
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(addr, client).await?).await?;
        let denial = denial_of_injected_pod(&mut h1).await?;
        for needle in [
            "policy namespace-sidecar",
            "outside a Kubernetes pod",
            "--kubeconfig FILE",
            "--namespaces FILE",
        ] {
            assert!(denial.contains(needle), "missing {needle:?} in {denial}");
        }
        // A request no namespace-aware policy is a candidate for is answered as usual.
        let node = std::fs::read(repo().join("tests/fixtures/node-status-update.json"))?;
        let (status, body) =
            send1(&mut h1, mutate_request("POST", "application/json", node)?).await?;
        assert_eq!(status, 200);
        let answer: serde_json::Value = serde_json::from_slice(&body)?;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"]["patch"].is_string(), "{answer}");
        Ok::<_, Error>(())
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    outcome
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

/// Sends a pod in `default` to the server and returns the message of its denial
/// (failing when it is admitted).
async fn denial_of_injected_pod(h1: &mut Http1) -> Result<String> {
    let review = review_of_injected_pod("default")?;
    let (status, body) = send1(h1, mutate_request("POST", "application/json", review)?).await?;
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    Ok(answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string())
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

/// A hot reload to a set that needs namespace data, outside a cluster with no way to get
/// it, installs the set as startup would: its namespace-aware policy fails with the hint,
/// nothing else changes, and the server stays ready.
#[tokio::test]
async fn a_reload_that_needs_namespaces_outside_a_cluster_serves_with_the_hint() -> Result {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        println!(
            "skipped: this test runs inside a Kubernetes pod, where graft uses its ServiceAccount"
        );
        return Ok(());
    }
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test apiserver CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = tempfile::tempdir()?;
        let copy = |from: &str, name: &str| {
            std::fs::copy(repo().join(from).join(name), policies.path().join(name))
        };
        copy("tests/fixtures/policies", "label-namespace.yaml")?;
        let server = start(config(policies.path(), &secret)).await?;
        let state = server.running.state.clone();
        let mut reloads = state.policy_reloads();
        let first = state.policies().revision().to_string();

        copy(
            "tests/fixtures/namespace-policies",
            "namespace-sidecar.yaml",
        )?;
        reloads.wait_for(|status| status.revision != first).await?;
        assert_eq!(state.policies().len(), 2);
        assert_eq!(reloads.borrow().failures, 0);
        assert!(!state.cluster_data().is_watching());
        assert_eq!(get(server.running.metrics_addr, "/readyz").await?.0, 200);
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(server.running.addr, client).await?).await?;
        let denial = denial_of_injected_pod(&mut h1).await?;
        assert!(denial.contains("--namespaces FILE"), "{denial}");
        server.shutdown().await
    })
    .await?
}
