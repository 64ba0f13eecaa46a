//! Notices to chat and HTTP sinks (`--notices`), against receivers on 127.0.0.1: a
//! DingTalk robot whose signature is checked with an independent HMAC-SHA256, text and
//! markdown bodies, repeats grouped, a webhook's signature header across a rotated
//! secret, the file hot-reloaded (and a broken edit ignored), a sink answering errors,
//! and a sink that never answers while every review is still answered.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use sha2::Digest as _;
use tokio::sync::mpsc;

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

/// One request a receiver got.
#[derive(Debug)]
struct Received {
    path_and_query: String,
    headers: HashMap<String, String>,
    body: serde_json::Value,
}

/// How a receiver answers.
#[derive(Clone, Copy)]
enum Answer {
    /// DingTalk's success answer.
    Ok,
    /// A 500.
    Error,
    /// Nothing, ever.
    Never,
}

/// An HTTP/1 receiver on 127.0.0.1 that reports every request on a channel.
async fn receiver(answer: Answer) -> Result<(String, mpsc::UnboundedReceiver<Received>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!(
        "http://{}/robot/send?access_token=t0k",
        listener.local_addr()?
    );
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        let tx = tx.clone();
                        async move {
                            use http_body_util::BodyExt as _;
                            let path_and_query = request
                                .uri()
                                .path_and_query()
                                .map(|p| p.to_string())
                                .unwrap_or_default();
                            let headers = request
                                .headers()
                                .iter()
                                .map(|(k, v)| {
                                    (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                                })
                                .collect();
                            let bytes = request.into_body().collect().await?.to_bytes();
                            let body = serde_json::from_slice(&bytes).unwrap_or_default();
                            let _ = tx.send(Received {
                                path_and_query,
                                headers,
                                body,
                            });
                            let (status, text) = match answer {
                                Answer::Ok => (200, r#"{"errcode":0,"errmsg":"ok"}"#),
                                Answer::Error => (500, "boom"),
                                Answer::Never => std::future::pending().await,
                            };
                            Ok::<_, hyper::Error>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(http_body_util::Full::new(bytes::Bytes::from(text)))
                                    .unwrap_or_default(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok((url, rx))
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Result<Received> {
    Ok(tokio::time::timeout(DEADLINE, rx.recv())
        .await?
        .ok_or("receiver gone")?)
}

/// HMAC-SHA256 written out from RFC 2104 over sha2, independent of graft's (ring's).
fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&sha2::Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = sha2::Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(data)
        .finalize();
    sha2::Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

/// Checks DingTalk's `timestamp` and `sign` query parameters against `secret`.
fn check_dingtalk_signature(path_and_query: &str, secret: &str) -> Result {
    let query = path_and_query.split_once('?').ok_or("no query")?.1;
    let params: HashMap<String, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                percent_encoding::percent_decode_str(v)
                    .decode_utf8_lossy()
                    .into_owned(),
            )
        })
        .collect();
    assert_eq!(params.get("access_token").map(String::as_str), Some("t0k"));
    let timestamp = params.get("timestamp").ok_or("no timestamp")?;
    let expected = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(
        secret.as_bytes(),
        format!("{timestamp}\n{secret}").as_bytes(),
    ));
    assert_eq!(params.get("sign"), Some(&expected), "{path_and_query}");
    Ok(())
}

/// The value of `graft_notices_total{sink="SINK",result="RESULT"}`, if it exists.
async fn notices_total(server: &TestServer, sink: &str, result: &str) -> Result<Option<f64>> {
    let (_, text) = get(server.running.metrics_addr, "/metrics").await?;
    let prefix = format!("graft_notices_total{{sink=\"{sink}\",result=\"{result}\"}} ");
    Ok(text
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok()))
}

/// Polls the metric until `pred` holds, for at most DEADLINE.
async fn until_total(
    server: &TestServer,
    sink: &str,
    result: &str,
    pred: impl Fn(f64) -> bool,
) -> Result<f64> {
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = notices_total(server, sink, result).await?
            && pred(value)
        {
            return Ok(value);
        }
        if started.elapsed() > DEADLINE {
            return Err(format!("{sink}/{result} never reached the expected value").into());
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

struct Setup {
    dir: tempfile::TempDir,
    pki: Pki,
    _secret: SecretDir,
    server: TestServer,
}

impl Setup {
    async fn start(notices: &str) -> Result<Setup> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("policies"))?;
        std::fs::create_dir(dir.path().join("notices"))?;
        std::fs::write(dir.path().join("policies/label.yaml"), POLICY)?;
        std::fs::write(dir.path().join("notices/notices.yaml"), notices)?;
        let pki = Pki::new("test apiserver CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let mut config = config(&dir.path().join("policies"), &secret);
        config.notices = Some(dir.path().join("notices/notices.yaml"));
        let server = start(config).await?;
        Ok(Setup {
            dir,
            pki,
            _secret: secret,
            server,
        })
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    async fn review(&self, times: usize) -> Result {
        let client = client_config(&self.pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(self.server.running.addr, client).await?).await?;
        let body = fixture(FIXTURE)?;
        for _ in 0..times {
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
        Ok(())
    }
}

fn write(path: &Path, text: &str) -> Result {
    // Written aside and renamed, as kubelet swaps a mounted volume.
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, text)?;
    std::fs::rename(aside, path)?;
    Ok(())
}

#[tokio::test]
async fn dingtalk_markdown_is_signed_and_repeats_are_grouped() -> Result {
    let (url, mut rx) = receiver(Answer::Ok).await?;
    let dir = tempfile::tempdir()?;
    let url_file = dir.path().join("url");
    let secret_file = dir.path().join("secret");
    std::fs::write(&url_file, format!("{url}\n"))?;
    std::fs::write(&secret_file, "SECabc123\n")?;
    let setup = Setup::start(&format!(
        "sinks:\n- name: team\n  type: dingtalk\n  format: markdown\n  urlFile: {}\n  secretFile: {}\n  template: '**{{outcome}}** {{kind}} {{namespace}}/{{name}} {{operation}} by {{policies}}: {{patch}}'\n",
        url_file.display(),
        secret_file.display()
    ))
    .await?;
    setup.review(3).await?;
    let got = next(&mut rx).await?;
    check_dingtalk_signature(&got.path_and_query, "SECabc123")?;
    assert_eq!(got.body["msgtype"], "markdown", "{}", got.body);
    let text = got.body["markdown"]["text"].as_str().ok_or("no text")?;
    assert!(text.starts_with("**mutated** Pod "), "{text}");
    assert!(
        text.contains("by label-pods: add /metadata/labels"),
        "{text}"
    );
    // Nothing of the object but its kind, namespace and name.
    assert!(!text.contains("yes") && !text.contains("nginx"), "{text}");
    assert_eq!(
        got.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    // The two repeats are grouped, not sent.
    until_total(&setup.server, "team", "grouped", |v| v == 2.0).await?;
    assert_eq!(
        notices_total(&setup.server, "team", "sent").await?,
        Some(1.0)
    );
    assert!(rx.try_recv().is_err(), "a repeat was sent");
    setup.server.shutdown().await
}

#[tokio::test]
async fn webhook_signature_follows_a_rotated_secret_and_the_file_reloads() -> Result {
    let (url, mut rx) = receiver(Answer::Ok).await?;
    let dir = tempfile::tempdir()?;
    let url_file = dir.path().join("url");
    let secret_file = dir.path().join("secret");
    std::fs::write(&url_file, &url)?;
    std::fs::write(&secret_file, "first")?;
    let setup = Setup::start(&format!(
        "sinks:\n- {{name: hook, type: webhook, urlFile: {}, secretFile: {}, groupSeconds: 0}}\n",
        url_file.display(),
        secret_file.display()
    ))
    .await?;
    let signature = |got: &Received, secret: &str| -> Result {
        let bytes = serde_json::to_vec(&got.body)?;
        let hex: String = hmac_sha256(secret.as_bytes(), &bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            got.headers.get("x-graft-signature"),
            Some(&format!("sha256={hex}"))
        );
        Ok(())
    };
    setup.review(1).await?;
    let got = next(&mut rx).await?;
    signature(&got, "first")?;
    assert_eq!(got.body["outcome"], "mutated");
    assert_eq!(got.body["kind"], "Pod");
    assert_eq!(got.body["policies"], serde_json::json!(["label-pods"]));

    // A rotated Secret: the next message is signed with the new one.
    write(&secret_file, "second")?;
    setup.review(1).await?;
    signature(&next(&mut rx).await?, "second")?;

    // A new file: a DingTalk text sink replaces the webhook.
    write(
        &setup.path("notices/notices.yaml"),
        &format!(
            "sinks:\n- {{name: chat, type: dingtalk, urlFile: {}, template: '{{name}} {{outcome}}'}}\n",
            url_file.display()
        ),
    )?;
    let mut reloads = setup
        .server
        .running
        .state
        .notices()
        .ok_or("no notices")?
        .reloads();
    tokio::time::timeout(DEADLINE, reloads.wait_for(|counts| counts.successes == 1)).await??;
    // A broken edit keeps the running sinks.
    write(
        &setup.path("notices/notices.yaml"),
        "sinks: [{name: chat, type: nope}]\n",
    )?;
    tokio::time::timeout(DEADLINE, reloads.wait_for(|counts| counts.failures == 1)).await??;
    setup.review(1).await?;
    let got = next(&mut rx).await?;
    assert_eq!(got.body["msgtype"], "text", "{}", got.body);
    assert_eq!(got.body["text"]["content"], "web-3 mutated");
    assert_eq!(
        setup.server.running.state.notices().map(|n| n.sink_names()),
        Some(vec!["chat".to_string()])
    );
    setup.server.shutdown().await
}

#[tokio::test]
async fn a_failing_sink_is_counted_and_a_silent_one_never_delays_a_review() -> Result {
    let (error_url, mut errors) = receiver(Answer::Error).await?;
    let (silent_url, _silent) = receiver(Answer::Never).await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("error-url"), &error_url)?;
    std::fs::write(dir.path().join("silent-url"), &silent_url)?;
    let setup = Setup::start(&format!(
        "sinks:\n\
         - {{name: broken, type: webhook, urlFile: {}, groupSeconds: 0}}\n\
         - {{name: silent, type: webhook, urlFile: {}, queue: 2, timeoutSeconds: 600}}\n",
        dir.path().join("error-url").display(),
        dir.path().join("silent-url").display()
    ))
    .await?;
    let reviews = 20;
    let started = std::time::Instant::now();
    setup.review(reviews).await?;
    assert!(started.elapsed() < DEADLINE);
    next(&mut errors).await?;
    until_total(&setup.server, "broken", "failed", |v| v >= 1.0).await?;
    // The silent sink holds one notice and its queue two; the rest were dropped.
    let dropped = until_total(&setup.server, "silent", "dropped", |v| v >= 1.0).await?;
    assert!(
        dropped >= (reviews - 3) as f64,
        "{dropped} of {reviews} dropped"
    );
    assert_eq!(
        notices_total(&setup.server, "silent", "sent").await?,
        Some(0.0)
    );
    setup.server.shutdown().await
}

#[tokio::test]
async fn notices_test_sends_one_signed_sample_and_names_the_sinks_it_knows() -> Result {
    let (url, mut rx) = receiver(Answer::Ok).await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("url"), &url)?;
    std::fs::write(dir.path().join("secret"), "SECsample")?;
    let notices = dir.path().join("notices.yaml");
    std::fs::write(
        &notices,
        format!(
            "sinks:\n- {{name: team, type: dingtalk, urlFile: {}, secretFile: {}}}\n",
            dir.path().join("url").display(),
            dir.path().join("secret").display()
        ),
    )?;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["notices", "test", "--sink", "team", "--notices"])
        .arg(&notices)
        .output()
        .await?;
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout)?,
        "sent a sample notice to team\n"
    );
    let got = next(&mut rx).await?;
    check_dingtalk_signature(&got.path_and_query, "SECsample")?;
    assert_eq!(got.body["msgtype"], "text");
    let text = got.body["text"]["content"].as_str().ok_or("no content")?;
    assert!(text.contains("Pod default/web-3"), "{text}");

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["notices", "test", "--sink", "other", "--notices"])
        .arg(&notices)
        .output()
        .await?;
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr)?;
    assert!(
        stderr.contains("no sink \"other\"") && stderr.contains("sinks: team"),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn feishu_is_signed_in_its_body_and_slack_gets_text() -> Result {
    let (feishu_url, mut feishu) = receiver(Answer::Ok).await?;
    let (slack_url, mut slack) = receiver(Answer::Ok).await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("feishu-url"), &feishu_url)?;
    std::fs::write(dir.path().join("feishu-secret"), "lark-secret")?;
    std::fs::write(dir.path().join("slack-url"), &slack_url)?;
    let setup = Setup::start(&format!(
        "sinks:\n\
         - {{name: lark, type: feishu, urlFile: {}, secretFile: {}, template: '{{kind}} {{name}} {{outcome}}'}}\n\
         - {{name: slack, type: slack, urlFile: {}, outcomes: [mutated], policies: [label-pods]}}\n",
        dir.path().join("feishu-url").display(),
        dir.path().join("feishu-secret").display(),
        dir.path().join("slack-url").display()
    ))
    .await?;
    setup.review(1).await?;
    let got = next(&mut feishu).await?;
    assert_eq!(got.body["msg_type"], "text", "{}", got.body);
    assert_eq!(got.body["content"]["text"], "Pod web-3 mutated");
    let timestamp = got.body["timestamp"].as_str().ok_or("no timestamp")?;
    let expected = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(
        format!("{timestamp}\nlark-secret").as_bytes(),
        b"",
    ));
    assert_eq!(got.body["sign"], expected.as_str());
    let got = next(&mut slack).await?;
    let text = got.body["text"].as_str().ok_or("no text")?;
    assert!(text.starts_with("graft mutated Pod "), "{text}");
    setup.server.shutdown().await
}

#[test]
fn an_invalid_notices_file_refuses_to_start_and_says_why() -> Result {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("label.yaml"), POLICY)?;
    let notices = dir.path().join("notices").join("notices.yaml");
    std::fs::create_dir(dir.path().join("notices"))?;
    std::fs::write(
        &notices,
        "sinks:\n- {name: team, type: webhook, urlFile: u, template: '{metadata.labels}'}\n",
    )?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("serve")
        .arg("--policies")
        .arg(dir.path().join("label.yaml"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .env("GRAFT_NOTICES", &notices)
        .output()?;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "invalid notices file",
        "unknown placeholder {metadata.labels}",
        "object fields are never sent",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    Ok(())
}

#[tokio::test]
async fn a_policy_skipped_under_ignore_reaches_the_sinks_that_want_failures() -> Result {
    let (url, mut rx) = receiver(Answer::Ok).await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("url"), &url)?;
    let setup = Setup::start(&format!(
        "sinks:\n- {{name: failures, type: webhook, urlFile: {}, outcomes: [failed]}}\n",
        dir.path().join("url").display()
    ))
    .await?;
    // A second policy, skipped on this pod, reloaded in beside the first.
    let mut reloads = setup.server.running.state.policy_reloads();
    let before = reloads.borrow().successes;
    std::fs::write(
        setup.path("policies/skipped.yaml"),
        r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: always-skipped}
spec:
  failurePolicy: Ignore
  match: {resources: [pods]}
  validations:
    - expression: "object.metadata.name == 'nobody'"
      message: only nobody passes
  mutations:
    - set: {path: "$.metadata.labels['graft.dev/never']", value: "no"}
"#,
    )?;
    tokio::time::timeout(
        DEADLINE,
        reloads.wait_for(|status| status.successes > before),
    )
    .await??;
    setup.review(1).await?;
    let got = next(&mut rx).await?;
    assert_eq!(got.body["outcome"], "mutated", "{}", got.body);
    assert_eq!(
        got.body["outcomes"],
        serde_json::json!(["mutated", "failed"])
    );
    let reason = got.body["reason"].as_str().ok_or("no reason")?;
    assert!(
        reason.starts_with("always-skipped skipped: ") && reason.contains("only nobody passes"),
        "{reason}"
    );
    setup.server.shutdown().await
}
