//! Kubernetes Events never slow a review: with the events task stuck on an API that
//! accepts connections and never answers, and a queue of two, every review is still
//! answered with its patch and the Events that do not fit are dropped and counted.
//! Without `--events` no client exists and the counters stay at zero; `--events`
//! without a way to reach the API refuses to start and says what to do.
//! (tests/apiserver/main.rs records Events through a real kube-apiserver.)

use std::net::TcpListener;
use std::process::Command;

use crate::support::server::*;

const POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: label-pods}
spec:
  match: {resources: [pods]}
  mutations:
    - set: {path: "$.metadata.labels['graft.dev/seen']", value: "yes"}
"#;

const FIXTURE: &str = "pod-create-statefulset-web-3.json";

/// A Kubernetes API that accepts TCP connections and never says a word: every request
/// to it hangs until the client gives up.
struct SilentApi {
    listener: TcpListener,
    held: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl SilentApi {
    fn start() -> Result<SilentApi> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let accepting = listener.try_clone()?;
        let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let holding = held.clone();
        std::thread::spawn(move || {
            for stream in accepting.incoming().flatten() {
                if let Ok(mut held) = holding.lock() {
                    held.push(stream);
                }
            }
        });
        Ok(SilentApi { listener, held })
    }

    fn connections(&self) -> usize {
        self.held.lock().map(|held| held.len()).unwrap_or_default()
    }

    fn kubeconfig(&self, dir: &std::path::Path) -> Result<std::path::PathBuf> {
        let path = dir.join("kubeconfig");
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "silent", "cluster": {
                "server": format!("https://{}", self.listener.local_addr()?),
                "insecure-skip-tls-verify": true,
            }}],
            "users": [{"name": "silent", "user": {"token": "t"}}],
            "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}],
            "current-context": "silent",
        });
        std::fs::write(&path, serde_json::to_vec(&config)?)?;
        Ok(path)
    }
}

/// The value of `graft_events_total{result="RESULT"}`.
async fn events_total(server: &TestServer, result: &str) -> Result<f64> {
    let (_, text) = get(server.running.metrics_addr, "/metrics").await?;
    let prefix = format!("graft_events_total{{result=\"{result}\"}} ");
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .ok_or_else(|| format!("no {prefix} in\n{text}"))?;
    Ok(value.trim().parse()?)
}

#[tokio::test]
async fn reviews_never_wait_for_a_full_events_queue() -> Result {
    let api = SilentApi::start()?;
    let dir = tempfile::tempdir()?;
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    std::fs::write(dir.path().join("label.yaml"), POLICY)?;
    let mut config = config(dir.path(), &secret);
    let mut events = graft::server::config::EventsConfig::new(Some(api.kubeconfig(dir.path())?));
    events.queue = 2;
    config.events = Some(events);
    let server = start(config).await?;

    let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
    let mut h1 = http1(connect(server.running.addr, client).await?).await?;
    let body = fixture(FIXTURE)?;
    let reviews = 20;
    for _ in 0..reviews {
        let (status, answer) = send1(
            &mut h1,
            mutate_request("POST", "application/json", body.clone())?,
        )
        .await?;
        assert_eq!(status, 200);
        let answer: serde_json::Value = serde_json::from_slice(&answer)?;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"]["patch"].is_string(), "{answer}");
    }
    // The events task holds at most one notice (stuck writing it to the silent API)
    // and the queue two; every other one was dropped, none written.
    let dropped = events_total(&server, "dropped").await?;
    assert!(
        dropped >= f64::from(reviews - 3),
        "{dropped} of {reviews} dropped"
    );
    assert_eq!(events_total(&server, "sent").await?, 0.0);
    assert!(api.connections() <= 1, "one write at a time");
    server.shutdown().await
}

#[tokio::test]
async fn without_events_the_counters_exist_at_zero() -> Result {
    let dir = tempfile::tempdir()?;
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    std::fs::write(dir.path().join("label.yaml"), POLICY)?;
    let server = start(config(dir.path(), &secret)).await?;
    let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
    let mut h1 = http1(connect(server.running.addr, client).await?).await?;
    let (status, _) = send1(
        &mut h1,
        mutate_request("POST", "application/json", fixture(FIXTURE)?)?,
    )
    .await?;
    assert_eq!(status, 200);
    assert!(server.running.state.events().is_none());
    for result in ["sent", "aggregated", "dropped", "failed"] {
        assert_eq!(events_total(&server, result).await?, 0.0, "{result}");
    }
    server.shutdown().await
}

#[test]
fn events_without_a_cluster_refuse_to_start_and_say_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("label.yaml"), POLICY).expect("write policy");
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("serve")
        .arg("--policies")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .env("GRAFT_EVENTS", "true")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("GRAFT_KUBECONFIG")
        .output()
        .expect("run graft serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "--events",
        "not running in a Kubernetes pod",
        "--kubeconfig FILE",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
}
