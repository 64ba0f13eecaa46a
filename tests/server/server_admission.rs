//! `/mutate` over real TLS on loopback: byte-for-byte agreement with `graft review`,
//! HTTP/1.1 keep-alive and HTTP/2, bad inputs, probes, metrics and mTLS.

use std::sync::Arc;

use crate::support::server::*;
use tokio::io::AsyncWriteExt;

const FIXTURE: &str = "pod-create-multus-worker.json";

struct Setup {
    pki: Pki,
    policies: tempfile::TempDir,
    _secret: SecretDir,
    server: TestServer,
}

async fn setup(adjust: impl FnOnce(&mut graft::server::Config, &Pki)) -> Result<Setup> {
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    let mut config = config(policies.path(), &secret);
    adjust(&mut config, &pki);
    let server = start(config).await?;
    Ok(Setup {
        pki,
        policies,
        _secret: secret,
        server,
    })
}

fn uid_and_version(body: &[u8]) -> Result<(String, String)> {
    let value: serde_json::Value = serde_json::from_slice(body)?;
    Ok((
        value["response"]["uid"]
            .as_str()
            .ok_or("no uid")?
            .to_string(),
        value["apiVersion"]
            .as_str()
            .ok_or("no apiVersion")?
            .to_string(),
    ))
}

#[tokio::test]
async fn http1_keep_alive_and_http2_answer_exactly_like_the_cli() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let setup = setup(|_, _| {}).await?;
        let addr = setup.server.running.addr;
        let v1 = fixture(FIXTURE)?;
        let v1beta1 = as_v1beta1(&v1)?;
        let request_uid = serde_json::from_slice::<serde_json::Value>(&v1)?["request"]["uid"]
            .as_str()
            .ok_or("fixture has no uid")?
            .to_string();

        // HTTP/1.1, as the apiserver: several reviews on ONE connection.
        let tls = connect(addr, client_config(&setup.pki.ca_pem(), None, &[b"http/1.1"])?).await?;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let mut h1 = http1(tls).await?;
        for (body, version) in [
            (&v1, "admission.k8s.io/v1"),
            (&v1beta1, "admission.k8s.io/v1beta1"),
            (&v1, "admission.k8s.io/v1"),
        ] {
            let (status, answer) =
                send1(&mut h1, mutate_request("POST", "application/json", body.clone())?).await?;
            assert_eq!(status, 200);
            assert_eq!(answer.as_ref(), expected_answer(setup.policies.path(), body)?.as_slice());
            assert_eq!(uid_and_version(&answer)?, (request_uid.clone(), version.to_string()));
        }

        // HTTP/2 negotiated by ALPN.
        let tls = connect(addr, client_config(&setup.pki.ca_pem(), None, &[b"h2", b"http/1.1"])?).await?;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut h2 = http2(tls).await?;
        for body in [&v1, &v1beta1] {
            let request = mutate_request("POST", "application/json; charset=utf-8", body.clone())?;
            let (status, answer) = send2(&mut h2, request).await?;
            assert_eq!(status, 200);
            assert_eq!(answer.as_ref(), expected_answer(setup.policies.path(), body)?.as_slice());
        }

        let (_, metrics) = get(setup.server.running.metrics_addr, "/metrics").await?;
        assert!(
            metrics.contains(
                "graft_admission_requests_total{operation=\"CREATE\",resource=\"pods\",decision=\"allowed\"} 5"
            ),
            "{metrics}"
        );
        assert!(metrics.contains("graft_admission_duration_seconds_count{decision=\"allowed\"} 5"), "{metrics}");
        setup.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn bad_inputs_get_their_status_and_a_json_error() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let setup = setup(|config, _| config.limits.max_body_bytes = 64 * 1024).await?;
        let addr = setup.server.running.addr;
        let client = client_config(&setup.pki.ca_pem(), None, &[b"http/1.1"])?;
        let good = fixture(FIXTURE)?;
        let mut h1 = http1(connect(addr, client.clone()).await?).await?;

        let no_uid = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#;
        let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        let cases: Vec<(&str, &str, &str, Vec<u8>, u16)> = vec![
            ("GET", "/mutate", "application/json", Vec::new(), 405),
            ("POST", "/mutate", "text/plain", good.clone(), 415),
            ("POST", "/mutate", "application/yaml", good.clone(), 415),
            ("POST", "/mutate", "application/json", b"{not json".to_vec(), 400),
            ("POST", "/mutate", "application/json", no_uid.to_vec(), 400),
            ("POST", "/mutate", "application/json", no_request.to_vec(), 400),
            ("POST", "/validate", "application/json", good.clone(), 404),
            ("POST", "/mutate", "application/json", vec![b' '; 65 * 1024], 413),
        ];
        for (method, path, content_type, body, expect) in cases {
            let request = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", content_type)
                .body(http_body_util::Full::new(bytes::Bytes::from(body)))?;
            // A refused body may leave the connection unusable; use a new one then.
            if h1.is_closed() {
                h1 = http1(connect(addr, client.clone()).await?).await?;
            }
            let (status, answer) = send1(&mut h1, request).await?;
            assert_eq!(status.as_u16(), expect, "{method} {path} {content_type}");
            let error: serde_json::Value = serde_json::from_slice(&answer)?;
            assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{error}");
        }

        // A huge declared length is refused before any body byte is sent.
        let mut raw = connect(addr, client.clone()).await?;
        raw.write_all(
            b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000000\r\n\r\n",
        )
        .await?;
        assert_eq!(read_response(&mut raw).await?.0, 413);

        // A chunked body with no length is capped while streaming.
        let mut raw = connect(addr, client.clone()).await?;
        raw.write_all(
            b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await?;
        let chunk = vec![b' '; 16 * 1024];
        let mut status = None;
        for _ in 0..8 {
            let head = format!("{:x}\r\n", chunk.len());
            if raw.write_all(head.as_bytes()).await.is_err()
                || raw.write_all(&chunk).await.is_err()
                || raw.write_all(b"\r\n").await.is_err()
            {
                break;
            }
        }
        if let Ok((code, _)) = read_response(&mut raw).await {
            status = Some(code);
        }
        assert_eq!(status, Some(413));

        // And the server still answers a good request.
        let mut h1 = http1(connect(addr, client).await?).await?;
        let (status, answer) = send1(&mut h1, mutate_request("POST", "application/json", good.clone())?).await?;
        assert_eq!(status, 200);
        assert_eq!(answer.as_ref(), expected_answer(setup.policies.path(), &good)?.as_slice());

        let (_, metrics) = get(setup.server.running.metrics_addr, "/metrics").await?;
        for line in [
            "graft_admission_errors_total{reason=\"method\"} 1",
            "graft_admission_errors_total{reason=\"content_type\"} 2",
            "graft_admission_errors_total{reason=\"bad_review\"} 3",
            "graft_admission_errors_total{reason=\"not_found\"} 1",
            "graft_admission_errors_total{reason=\"too_large\"} 3",
        ] {
            assert!(metrics.contains(line), "missing {line} in\n{metrics}");
        }
        setup.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn probes_and_metrics() -> Result {
    tokio::time::timeout(DEADLINE, async {
        // Before policies and TLS are in place, /readyz says 503.
        let state = Arc::new(graft::server::State::new(Arc::new(
            graft::metrics::Metrics::new(),
        )));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let metrics_addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let metrics_listener = tokio::spawn(graft::server::metrics_listener::serve(
            listener,
            state.clone(),
            stopped,
        ));
        assert_eq!(get(metrics_addr, "/healthz").await?.0, 200);
        assert_eq!(get(metrics_addr, "/readyz").await?.0, 503);
        state.activate(graft::policy::PolicySet::empty());
        assert_eq!(
            get(metrics_addr, "/readyz").await?.0,
            503,
            "TLS not ready yet"
        );
        let certificate = graft::server::tls::self_signed()?;
        state.tls_ready(Arc::new(graft::server::tls::CertResolver::new(
            certificate.key,
        )));
        assert_eq!(get(metrics_addr, "/readyz").await?.0, 200);
        assert_eq!(get(metrics_addr, "/nope").await?.0, 404);
        let _ = stop.send(true);
        metrics_listener.await?;

        // A started server is ready, exposes build info and certificate expiry.
        let setup = setup(|_, _| {}).await?;
        let metrics_addr = setup.server.running.metrics_addr;
        assert_eq!(get(metrics_addr, "/readyz").await?.0, 200);
        let (status, metrics) = get(metrics_addr, "/metrics").await?;
        assert_eq!(status, 200);
        assert!(metrics.contains("graft_build_info{version=\""), "{metrics}");
        assert!(metrics.contains("graft_policies_loaded 0"), "{metrics}");
        let expiry = metrics
            .lines()
            .find_map(|l| l.strip_prefix("graft_tls_certificate_expiry_timestamp_seconds "))
            .ok_or("no expiry")?;
        assert!(expiry.trim().parse::<f64>()? > 1.7e9, "{expiry}");
        setup.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn client_certificates_are_required_with_client_ca() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let apiserver = Pki::new("apiserver client CA")?;
        let ca_file = tempfile::NamedTempFile::new()?;
        std::fs::write(ca_file.path(), apiserver.ca_pem())?;
        let ca_path = ca_file.path().to_path_buf();
        let setup = setup(move |config, _| config.client_ca = Some(ca_path)).await?;
        let addr = setup.server.running.addr;
        let body = fixture(FIXTURE)?;

        // Without a certificate: refused (TLS 1.3 reports it on first use, not in connect).
        let anonymous = client_config(&setup.pki.ca_pem(), None, &[b"http/1.1"])?;
        let refused = async {
            let mut h1 = http1(connect(addr, anonymous).await?).await?;
            send1(
                &mut h1,
                mutate_request("POST", "application/json", body.clone())?,
            )
            .await
        }
        .await;
        assert!(
            refused.is_err(),
            "a client without a certificate was served"
        );

        // A certificate from another CA: refused too.
        let stranger = Pki::new("someone else")?.issue(&["kube-apiserver"])?;
        let other = client_config(&setup.pki.ca_pem(), Some(&stranger), &[b"http/1.1"])?;
        let refused = async {
            let mut h1 = http1(connect(addr, other).await?).await?;
            send1(
                &mut h1,
                mutate_request("POST", "application/json", body.clone())?,
            )
            .await
        }
        .await;
        assert!(
            refused.is_err(),
            "a client with a foreign certificate was served"
        );

        let client_pair = apiserver.issue(&["kube-apiserver"])?;
        let trusted = client_config(&setup.pki.ca_pem(), Some(&client_pair), &[b"http/1.1"])?;
        let mut h1 = http1(connect(addr, trusted).await?).await?;
        let (status, _) = send1(&mut h1, mutate_request("POST", "application/json", body)?).await?;
        assert_eq!(status, 200);
        setup.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn self_signed_certificate_is_trusted_through_the_written_ca() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let policies = tempfile::tempdir()?;
        let pki = Pki::new("unused")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let mut config = config(policies.path(), &secret);
        config.cert = graft::server::CertSource::SelfSigned;
        let server = start(config).await?;
        let ca_file = server.running.ca_file.clone().ok_or("no CA file")?;
        let ca_pem = std::fs::read_to_string(&ca_file)?;
        let client = client_config(&ca_pem, None, &[b"http/1.1"])?;
        let tcp = tokio::net::TcpStream::connect(server.running.addr).await?;
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let tls = tokio_rustls::TlsConnector::from(client)
            .connect(name, tcp)
            .await?;
        let mut h1 = http1(tls).await?;
        let (status, _) = send1(
            &mut h1,
            mutate_request("POST", "application/json", fixture(FIXTURE)?)?,
        )
        .await?;
        assert_eq!(status, 200);
        std::fs::remove_file(ca_file)?;
        server.shutdown().await
    })
    .await?
}
