//! `graft serve` running a MutatingAdmissionPolicy whose binding reads a parameter object
//! from `--params FILE`: over real TLS, the parameter's value lands in the patch, and a
//! request whose namespace has no parameter object is denied as the binding's
//! `parameterNotFoundAction: Deny` says, in the apiserver's words; the metrics name the
//! dialect.

use base64::Engine;
use serde_json::{Value, json};

use crate::support::policies::pod_review_body;
use crate::support::server::*;

/// The policy and its binding: the team label from the ConfigMap `team-defaults` in the
/// request's namespace, denied where there is none.
fn policy() -> String {
    crate::support::read("tests/fixtures/map-team-label.yaml")
}

const PARAMS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: team-defaults, namespace: ns}
data: {team: gpu-infra}
"#;

fn pod_in(namespace: &str) -> Vec<u8> {
    let mut review: Value =
        serde_json::from_slice(&pod_review_body("CREATE", json!({}))).unwrap_or_default();
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"] = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    });
    review.to_string().into_bytes()
}

#[tokio::test]
async fn a_binding_reads_its_parameter_object_from_the_params_file() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test apiserver CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = tempfile::tempdir()?;
        std::fs::write(policies.path().join("team-label.yaml"), policy())?;
        let params = tempfile::NamedTempFile::new()?;
        std::fs::write(params.path(), PARAMS)?;
        // A MutatingAdmissionPolicy sees the request's namespace (`namespaceObject`).
        let namespaces = tempfile::NamedTempFile::new()?;
        std::fs::write(
            namespaces.path(),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: elsewhere}\n",
        )?;
        let mut config = config(policies.path(), &secret);
        config.params = Some(params.path().to_path_buf());
        config.namespaces =
            graft::server::config::NamespaceConfig::File(namespaces.path().to_path_buf());
        let server = start(config).await?;

        let tls = connect(
            server.running.addr,
            client_config(&pki.ca_pem(), None, &[b"http/1.1"])?,
        )
        .await?;
        let mut h1 = http1(tls).await?;

        let (status, body) = send1(
            &mut h1,
            mutate_request("POST", "application/json", pod_in("ns"))?,
        )
        .await?;
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&body)?;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(answer["response"]["patch"].as_str().ok_or("no patch")?)?;
        let patch: Value = serde_json::from_slice(&patch)?;
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"team": "gpu-infra"}}])
        );

        let (status, body) = send1(
            &mut h1,
            mutate_request("POST", "application/json", pod_in("elsewhere"))?,
        )
        .await?;
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&body)?;
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        assert_eq!(
            answer["response"]["status"]["message"],
            "policy 'team-label' with binding 'team-label-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
        );
        // Metrics name the dialect; a MAP's runs are counted per binding and parameter.
        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        for line in [
            "graft_policy_evaluations_total{policy=\"team-label\",dialect=\"MutatingAdmissionPolicy\",result=\"applied\"} 1",
            "graft_policy_evaluations_total{policy=\"team-label\",dialect=\"MutatingAdmissionPolicy\",result=\"failed\"} 1",
        ] {
            assert!(metrics.lines().any(|l| l == line), "no {line} in\n{metrics}");
        }
        server.shutdown().await
    })
    .await?
}

/// A parameter file graft cannot use stops the server at start-up, naming the file.
#[tokio::test]
async fn an_invalid_params_file_stops_the_server() -> Result {
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    std::fs::write(policies.path().join("team-label.yaml"), policy())?;
    let params = tempfile::NamedTempFile::new()?;
    std::fs::write(
        params.path(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
    )?;
    let mut config = config(policies.path(), &secret);
    config.params = Some(params.path().to_path_buf());
    let error = match start(config).await {
        Ok(_) => return Err("the server started on an invalid params file".into()),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains(&params.path().display().to_string())
            && error.contains("metadata.name is missing"),
        "{error}"
    );
    Ok(())
}
