//! Certificate rotation the way kubelet projects a Secret, under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::server::*;

const FIXTURE: &str = "pod-create-multus-worker.json";

/// Sends reviews in a loop, on a kept-alive connection and on a new connection each
/// round, until told to stop; returns the number of successes and every failure.
fn load_loop(
    addr: std::net::SocketAddr,
    client: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
    stop: Arc<AtomicBool>,
    progress: tokio::sync::mpsc::UnboundedSender<()>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let mut ok = 0;
        let mut failures = Vec::new();
        let mut kept = match connect(addr, client.clone()).await {
            Ok(tls) => http1(tls).await.ok(),
            Err(_) => None,
        };
        while !stop.load(Ordering::SeqCst) {
            let fresh = async {
                let mut h1 = http1(connect(addr, client.clone()).await?).await?;
                send1(
                    &mut h1,
                    mutate_request("POST", "application/json", body.clone())?,
                )
                .await
            }
            .await;
            let reused = async {
                let h1 = kept.as_mut().ok_or("no kept-alive connection")?;
                send1(
                    h1,
                    mutate_request("POST", "application/json", body.clone())?,
                )
                .await
            }
            .await;
            for result in [fresh, reused] {
                match result {
                    Ok((status, _)) if status == 200 => ok += 1,
                    Ok((status, _)) => failures.push(format!("status {status}")),
                    Err(error) => failures.push(error.to_string()),
                }
            }
            let _ = progress.send(());
        }
        (ok, failures)
    })
}

async fn wait_rounds(progress: &mut tokio::sync::mpsc::UnboundedReceiver<()>, n: usize) -> Result {
    for _ in 0..n {
        progress.recv().await.ok_or("load loop ended")?;
    }
    Ok(())
}

#[tokio::test]
async fn kubelet_style_rotation_under_load_fails_no_request() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let first = pki.issue(&[SERVICE_NAME])?;
        let second = pki.issue(&[SERVICE_NAME])?;
        let secret = SecretDir::new(&first)?;
        let policies = tempfile::tempdir()?;
        let server = start(config(policies.path(), &secret)).await?;
        let addr = server.running.addr;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut reloads = server.running.state.tls_reloads();

        let before = connect(addr, client.clone()).await?;
        assert_eq!(peer_cert(&before), Some(first.cert_der()?));

        let stop = Arc::new(AtomicBool::new(false));
        let (progress_tx, mut progress) = tokio::sync::mpsc::unbounded_channel();
        let load = load_loop(
            addr,
            client.clone(),
            fixture(FIXTURE)?,
            stop.clone(),
            progress_tx,
        );
        wait_rounds(&mut progress, 5).await?;

        secret.rotate(&second)?;
        reloads.wait_for(|status| status.successes >= 1).await?;
        wait_rounds(&mut progress, 5).await?;
        stop.store(true, Ordering::SeqCst);
        let (ok, failures) = load.await?;
        assert!(
            failures.is_empty(),
            "failed requests during rotation: {failures:?}"
        );
        assert!(ok >= 20, "only {ok} requests");

        // New handshakes get the new certificate; the old connection still works.
        let after = connect(addr, client.clone()).await?;
        assert_eq!(peer_cert(&after), Some(second.cert_der()?));
        let mut old = http1(before).await?;
        let (status, _) = send1(
            &mut old,
            mutate_request("POST", "application/json", fixture(FIXTURE)?)?,
        )
        .await?;
        assert_eq!(status, 200);

        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        assert!(
            metrics.contains("graft_tls_reloads_total{result=\"success\"} 1"),
            "{metrics}"
        );
        server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn a_mismatched_pair_keeps_the_old_certificate() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let first = pki.issue(&[SERVICE_NAME])?;
        let other = pki.issue(&[SERVICE_NAME])?;
        let secret = SecretDir::new(&first)?;
        let policies = tempfile::tempdir()?;
        let server = start(config(policies.path(), &secret)).await?;
        let addr = server.running.addr;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut reloads = server.running.state.tls_reloads();

        // The new certificate with the old key: the key does not match.
        let mismatched = Pair {
            cert_pem: other.cert_pem.clone(),
            key_pem: first.key_pem.clone(),
        };
        secret.rotate(&mismatched)?;
        reloads.wait_for(|status| status.failures >= 1).await?;
        assert_eq!(reloads.borrow().successes, 0);

        let tls = connect(addr, client.clone()).await?;
        assert_eq!(peer_cert(&tls), Some(first.cert_der()?));
        let mut h1 = http1(tls).await?;
        let (status, _) = send1(
            &mut h1,
            mutate_request("POST", "application/json", fixture(FIXTURE)?)?,
        )
        .await?;
        assert_eq!(status, 200);
        let (_, metrics) = get(server.running.metrics_addr, "/metrics").await?;
        // Counters of known results start at 0: counted means present and not 0.
        assert!(
            metrics.contains("graft_tls_reloads_total{result=\"error\"}")
                && !metrics.contains("graft_tls_reloads_total{result=\"error\"} 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("graft_tls_reloads_total{result=\"success\"} 0\n"),
            "{metrics}"
        );

        // A good pair afterwards is picked up.
        secret.rotate(&other)?;
        reloads.wait_for(|status| status.successes >= 1).await?;
        let tls = connect(addr, client).await?;
        assert_eq!(peer_cert(&tls), Some(other.cert_der()?));
        server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn poll_mode_also_sees_the_swap() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let first = pki.issue(&[SERVICE_NAME])?;
        let second = pki.issue(&[SERVICE_NAME])?;
        let secret = SecretDir::new(&first)?;
        let policies = tempfile::tempdir()?;
        let mut config = config(policies.path(), &secret);
        config.watch.mode = graft::watch::WatchMode::Poll;
        config.watch.poll_interval = std::time::Duration::from_millis(100);
        let server = start(config).await?;
        let mut reloads = server.running.state.tls_reloads();
        secret.rotate(&second)?;
        reloads.wait_for(|status| status.successes >= 1).await?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let tls = connect(server.running.addr, client).await?;
        assert_eq!(peer_cert(&tls), Some(second.cert_der()?));
        server.shutdown().await
    })
    .await?
}
