//! What operators see of a running server: bounded metric labels, the open-connection
//! gauge, the apiserver's `?timeout=` honoured, and logs that name each review (the real
//! binary's JSON lines).

use std::path::Path;
use std::sync::mpsc;

use crate::support::policies::{policy_json, with_fields};
use crate::support::server::*;
use serde_json::{Value, json};

fn pod_fixture() -> Result<Value> {
    Ok(serde_json::from_slice(&fixture(
        "pod-create-multus-worker.json",
    )?)?)
}

/// A policy on pods at CREATE; `spec` fields are added to (or replace) the defaults.
fn policy(name: &str, spec: Value) -> String {
    let defaults = json!({
        "match": {"resources": ["pods"], "operations": ["CREATE"]},
        "mutations": [{"set": {"path": "$.metadata.labels.observed", "value": "yes"}}],
    });
    policy_json(name, with_fields(defaults, spec)).to_string()
}

fn policy_dir(policies: &[(&str, String)]) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (file, text) in policies {
        std::fs::write(dir.path().join(file), text)?;
    }
    Ok(dir)
}

fn post(uri: &str, body: &Value) -> Result<hyper::Request<http_body_util::Full<bytes::Bytes>>> {
    let mut request = mutate_request("POST", "application/json", serde_json::to_vec(body)?)?;
    *request.uri_mut() = uri.parse()?;
    Ok(request)
}

/// Polls /metrics until `wanted` is in it.
async fn wait_for_metric(addr: std::net::SocketAddr, wanted: &str) -> Result<String> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (_, metrics) = get(addr, "/metrics").await?;
        if metrics.contains(wanted) {
            return Ok(metrics);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("never saw {wanted} in\n{metrics}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn request_strings_never_become_label_values() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = policy_dir(&[("label.yaml", policy("label", json!({})))])?;
        let server = start(config(policies.path(), &secret)).await?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(server.running.addr, client).await?).await?;

        let pod = pod_fixture()?;
        let mut explode = pod.clone();
        explode["request"]["operation"] = "EXPLODE".into();
        let mut widgets = pod.clone();
        widgets["request"]["resource"]["resource"] = "widgets-x9f2".into();
        let mut status = pod.clone();
        status["request"]["subResource"] = "status-x9f2".into();
        for body in [&pod, &explode, &widgets, &status] {
            let (code, answer) = send1(&mut h1, post("/mutate", body)?).await?;
            assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
        }

        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        for line in [
            "graft_admission_requests_total{operation=\"CREATE\",resource=\"pods\",decision=\"allowed\"} 1",
            "graft_admission_requests_total{operation=\"other\",resource=\"pods\",decision=\"allowed\"} 1",
            "graft_admission_requests_total{operation=\"CREATE\",resource=\"other\",decision=\"allowed\"} 2",
        ] {
            assert!(metrics.contains(line), "missing {line} in\n{metrics}");
        }
        for raw in ["EXPLODE", "x9f2"] {
            assert!(!metrics.contains(raw), "{raw} became a label value:\n{metrics}");
        }
        drop(h1);
        server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn open_connections_are_counted() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = policy_dir(&[])?;
        let server = start(config(policies.path(), &secret)).await?;
        let (addr, metrics_addr) = (server.running.addr, server.running.metrics_addr);
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        wait_for_metric(metrics_addr, "graft_admission_connections 0\n").await?;

        let mut first = http1(connect(addr, client.clone()).await?).await?;
        let mut second = http1(connect(addr, client).await?).await?;
        let body = pod_fixture()?;
        // An answer on each proves both connections reached the server's accept loop.
        for sender in [&mut first, &mut second] {
            let (code, _) = send1(sender, post("/mutate", &body)?).await?;
            assert_eq!(code, 200);
        }
        wait_for_metric(metrics_addr, "graft_admission_connections 2\n").await?;
        drop(first);
        wait_for_metric(metrics_addr, "graft_admission_connections 1\n").await?;
        drop(second);
        wait_for_metric(metrics_addr, "graft_admission_connections 0\n").await?;
        server.shutdown().await
    })
    .await?
}

/// A policy whose CEL runs until the evaluation's cost budget stops it (see
/// tests/offline/policy_limits.rs), and a pod that makes it do so.
fn slow_policy_and_pod() -> Result<(String, Value)> {
    let slow = policy(
        "slow",
        json!({
            "failurePolicy": "Ignore",
            "mutations": [{"set": {
                "path": "$.metadata.annotations.n",
                "value": "{{ string(object.spec.items.filter(a, object.spec.items.exists(b, a + b < 0)).size()) }}",
            }}],
        }),
    );
    let mut pod = pod_fixture()?;
    pod["request"]["object"]["spec"]["items"] = json!((0..5000).collect::<Vec<_>>());
    Ok((slow, pod))
}

#[tokio::test]
async fn the_apiserver_timeout_bounds_a_review() -> Result {
    tokio::time::timeout(DEADLINE * 2, async {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let (slow, pod) = slow_policy_and_pod()?;
        let policies = policy_dir(&[("slow.yaml", slow)])?;
        let server = start(config(policies.path(), &secret)).await?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(server.running.addr, client).await?).await?;

        // Without a timeout the server-wide limit (30 s) applies and the review is
        // answered: the budget stops the policy, which is skipped.
        let (code, answer) = send1(&mut h1, post("/mutate", &pod)?).await?;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
        let answer: Value = serde_json::from_slice(&answer)?;
        assert_eq!(answer["response"]["allowed"], true);
        let warnings = answer["response"]["warnings"].to_string();
        assert!(warnings.contains("policy slow skipped"), "{warnings}");

        // The apiserver gives up after 10 ms: graft answers the timeout by then (9 ms),
        // whatever the policy is still doing.
        let (code, answer) = send1(&mut h1, post("/mutate?timeout=10ms", &pod)?).await?;
        let text = String::from_utf8_lossy(&answer);
        assert_eq!(code, 408, "{text}");
        assert!(text.contains("within 9 ms"), "{text}");
        assert!(text.contains("?timeout="), "{text}");

        // The connection and the server are fine afterwards.
        let (code, _) = send1(&mut h1, post("/mutate?timeout=10s", &pod_fixture()?)?).await?;
        assert_eq!(code, 200);
        let metrics = wait_for_metric(
            server.running.metrics_addr,
            "graft_admission_errors_total{reason=\"timeout\"} 1\n",
        )
        .await?;
        // The timed-out review counts as a timeout, not as answered (its evaluation may
        // still be running; when it ends, its result is dropped uncounted).
        assert!(
            metrics.contains(
                "graft_admission_requests_total{operation=\"CREATE\",resource=\"pods\",decision=\"allowed\"} 2\n"
            ),
            "{metrics}"
        );
        drop(h1);
        server.shutdown().await
    })
    .await?
}

/// The JSON log lines of a `graft serve` child, one per channel message.
struct Logs {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Logs {
    fn next_where(&self, wanted: impl Fn(&Value) -> bool) -> Result<Value> {
        next_log_where(&self.lines, wanted)
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_with_json_logs(policies: &Path, secret: &SecretDir) -> Result<Logs> {
    let mut child = serve_command(policies, secret).spawn()?;
    let lines = log_lines(&mut child)?;
    Ok(Logs { child, lines })
}

#[tokio::test]
async fn every_line_about_a_review_names_it_and_failures_say_why() -> Result {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    // `skipper` fails on every pod and is skipped; `denier` fails only in namespace
    // deny-me, where it denies.
    let skipper = policy(
        "skipper",
        json!({
            "failurePolicy": "Ignore",
            "validations": [{"expression": "false", "message": "skipper never passes"}],
        }),
    );
    let denier = policy(
        "denier",
        json!({
            "failurePolicy": "Fail",
            "match": {"resources": ["pods"], "operations": ["CREATE"], "namespaces": ["deny-me"]},
            "validations": [{"expression": "false", "message": "denier never passes"}],
        }),
    );
    let policies = policy_dir(&[("skipper.yaml", skipper), ("denier.yaml", denier)])?;
    let logs = serve_with_json_logs(policies.path(), &secret)?;
    let serving = logs.next_where(|line| line["message"] == "graft serving")?;
    let addr: std::net::SocketAddr = serving["addr"].as_str().ok_or("no addr")?.parse()?;
    let revision = graft::policy::load(&[policies.path().to_path_buf()])?
        .set
        .revision()
        .to_string();

    let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
    let mut h1 = tokio::time::timeout(DEADLINE, async {
        http1(connect(addr, client).await?).await
    })
    .await??;
    let mut skipped = pod_fixture()?;
    skipped["request"]["uid"] = "uid-skipped".into();
    let mut denied = pod_fixture()?;
    denied["request"]["uid"] = "uid-denied".into();
    denied["request"]["namespace"] = "deny-me".into();
    denied["request"]["object"]["metadata"]["namespace"] = "deny-me".into();
    // Pods of a Deployment have no name yet at CREATE, only a generateName.
    let mut generated = pod_fixture()?;
    generated["request"]["uid"] = "uid-generated".into();
    generated["request"]["name"] = "".into();
    let metadata = &mut generated["request"]["object"]["metadata"];
    metadata.as_object_mut().ok_or("metadata")?.remove("name");
    metadata["generateName"] = "worker-".into();
    for body in [&skipped, &denied, &generated] {
        let (code, _) =
            tokio::time::timeout(DEADLINE, send1(&mut h1, post("/mutate", body)?)).await??;
        assert_eq!(code, 200);
    }

    let in_review = |line: &Value, uid: &str| line["span"]["uid"] == uid;
    let check_span = |line: &Value, uid: &str, object: &str| {
        let span = &line["span"];
        assert_eq!(span["name"], "review", "{line}");
        assert_eq!(span["uid"], uid, "{line}");
        assert_eq!(span["kind"], "Pod", "{line}");
        assert_eq!(span["object"], object, "{line}");
        assert_eq!(span["revision"], revision.as_str(), "{line}");
    };

    let skip = logs.next_where(|line| in_review(line, "uid-skipped") && line["level"] == "WARN")?;
    check_span(&skip, "uid-skipped", "dynamo-system/worker-0");
    assert_eq!(skip["policy"], "skipper", "{skip}");
    assert_eq!(skip["field"], "spec.validations[0]", "{skip}");
    assert_eq!(skip["reason"], "skipper never passes", "{skip}");
    let answered = logs.next_where(|line| in_review(line, "uid-skipped"))?;
    check_span(&answered, "uid-skipped", "dynamo-system/worker-0");
    assert_eq!(answered["message"], "admission review", "{answered}");
    assert_eq!(answered["decision"], "allowed", "{answered}");

    let deny = logs.next_where(|line| {
        in_review(line, "uid-denied") && line["level"] == "WARN" && line["policy"] == "denier"
    })?;
    check_span(&deny, "uid-denied", "deny-me/worker-0");
    assert_eq!(deny["field"], "spec.validations[0]", "{deny}");
    assert_eq!(deny["reason"], "denier never passes", "{deny}");
    assert!(
        deny["message"]
            .as_str()
            .is_some_and(|m| m.contains("denied")),
        "{deny}"
    );
    let answered = logs.next_where(|line| {
        in_review(line, "uid-denied") && line["message"] == "admission review"
    })?;
    assert_eq!(answered["decision"], "denied", "{answered}");

    let answered = logs.next_where(|line| {
        in_review(line, "uid-generated") && line["message"] == "admission review"
    })?;
    check_span(&answered, "uid-generated", "dynamo-system/worker-*");
    Ok(())
}

/// Log output captured in memory.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A panic cannot be provoked through the server, so this holds the mechanism `route`
/// relies on: evaluation runs in `isolated` under the review's span (fields recorded on
/// the evaluating thread), and the panic is logged inside that span. No other test in
/// this file logs at that call site, so the thread-local subscriber sees it.
#[tokio::test]
async fn a_panic_is_logged_in_the_review_span() {
    use tracing::Instrument;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .fmt_fields(graft::logging::json::JsonMembers)
        .event_format(graft::logging::json::JsonLines)
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let span = tracing::error_span!("review", uid = tracing::field::Empty);
    let evaluating = span.clone();
    let result: std::result::Result<u8, ()> = graft::server::routes::isolated(move || {
        evaluating.record("uid", "uid-1");
        panic!("engine bug")
    })
    .instrument(span)
    .await;
    assert_eq!(result, Err(()));
    let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let line: Value = text
        .lines()
        .find(|line| line.contains("evaluation panicked"))
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no panic line in {text}"));
    assert_eq!(line["span"]["uid"], "uid-1", "{line}");
}
