//! The real `graft serve` stays available to a well-behaved client (the apiserver) while
//! another source floods it: 3,000 half-open TLS connections (three bytes of a
//! ClientHello, then nothing) and 200 header tricklers (a completed handshake, part of
//! the request headers, then nothing) from 127.0.0.1, while a good client on 127.0.0.2
//! sends 200 captured AdmissionReviews over fresh and keep-alive connections. Run twice:
//! with the per-source share, and with one source allowed every slot.
//!
//! The figures in BENCHMARKS.md come from this test's output
//! (`cargo test --test server availability -- --nocapture`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::server::*;
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;

const HALF_OPEN: usize = 3000;
const TRICKLERS: usize = 200;
const REVIEWS: usize = 200;
const MAX_CONNECTIONS: usize = 256;
const MAX_HANDSHAKES: usize = 32;
/// The good client starts once this many half-open connections are in place; the rest
/// of the flood arrives while it sends its reviews.
const FLOOD_BEFORE_GOOD: usize = 1000;
const FIXTURE: &str = "pod-create-multus-worker.json";
const MAX_RSS_KIB: u64 = 64 * 1024;
const MAX_P99: Duration = Duration::from_millis(100);

/// What one run measured.
#[derive(Debug)]
struct Figures {
    latencies: Vec<Duration>,
    peak_rss_kib: u64,
    shed: Vec<(String, u64)>,
    half_open_accepted: usize,
    /// Half-open connections opened while the good client sent its reviews.
    half_open_during_reviews: usize,
    tricklers_established: usize,
}

impl Figures {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        // Rounded up: p99 of 200 is the 198th value.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_half_open_and_trickling_connections_does_not_delay_the_apiserver() -> Result {
    let started = Instant::now();
    raise_open_file_limit(HALF_OPEN + TRICKLERS + 256)?;
    tokio::time::timeout(DEADLINE, async {
        let fair = flood_while_reviewing("per-source share (default)", None).await?;
        // A share larger than the whole flood: nothing but the handshake budget and the
        // established slots stands between it and the good client.
        let one_source = flood_while_reviewing(
            "no per-source share (one source may take every slot)",
            Some(HALF_OPEN + TRICKLERS + 1),
        )
        .await?;
        for figures in [&fair, &one_source] {
            assert!(
                figures.percentile(0.99) < MAX_P99,
                "p99 {:?}",
                figures.percentile(0.99)
            );
            assert!(
                figures.peak_rss_kib < MAX_RSS_KIB,
                "peak RSS {} KiB",
                figures.peak_rss_kib
            );
        }
        let shed = |figures: &Figures, reason: &str| {
            figures
                .shed
                .iter()
                .find(|(name, _)| name == reason)
                .map_or(0, |(_, count)| *count)
        };
        assert!(shed(&fair, "per_source") > 0, "{fair:?}");
        assert!(shed(&one_source, "handshake_budget") > 0, "{one_source:?}");
        assert_eq!(shed(&one_source, "per_source"), 0, "{one_source:?}");
        assert!(
            one_source.tricklers_established > TRICKLERS / 2,
            "the tricklers did not take slots: {one_source:?}"
        );
        Ok::<_, crate::support::Error>(())
    })
    .await??;
    println!("both runs in {:?}", started.elapsed());
    Ok(())
}

/// Starts `graft serve` with small limits, floods it from 127.0.0.1 while the good client
/// on 127.0.0.2 sends its reviews, and returns the figures.
async fn flood_while_reviewing(name: &str, per_source: Option<usize>) -> Result<Figures> {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    let mut command = serve_command(policies.path(), &secret);
    command.args([
        "--max-connections",
        &MAX_CONNECTIONS.to_string(),
        "--max-handshakes",
        &MAX_HANDSHAKES.to_string(),
    ]);
    if let Some(per_source) = per_source {
        command.args(["--max-connections-per-source", &per_source.to_string()]);
    }
    let child = Child(command.spawn()?);
    let mut child = child;
    let lines = log_lines(&mut child.0)?;
    let serving = next_log_where(&lines, |line| line["message"] == "graft serving")?;
    let addr: SocketAddr = serving["addr"].as_str().ok_or("no addr")?.parse()?;
    let metrics_addr: SocketAddr = serving["metrics_addr"]
        .as_str()
        .ok_or("no metrics_addr")?
        .parse()?;
    let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
    let body = fixture(FIXTURE)?;
    let expected = expected_answer(policies.path(), &body)?;

    // The good client's keep-alive connection exists before the flood, as the
    // apiserver's pool does.
    let mut kept = http1(connect_from([127, 0, 0, 2], addr, client.clone()).await?).await?;

    let (flooded, flood_ready) = tokio::sync::oneshot::channel();
    let progress = Arc::new(AtomicUsize::new(0));
    let half_open = tokio::spawn(half_open_flood(addr, flooded, progress.clone()));
    let tricklers = tokio::spawn(trickle_headers(addr, client.clone()));
    // Synchronised on the flood's progress, not on time.
    flood_ready.await?;

    let mut latencies = Vec::with_capacity(REVIEWS);
    for review in 0..REVIEWS {
        let request = mutate_request("POST", "application/json", body.clone())?;
        let sent = Instant::now();
        let (status, answer) = if review % 2 == 0 {
            let mut fresh =
                http1(connect_from([127, 0, 0, 2], addr, client.clone()).await?).await?;
            send1(&mut fresh, request).await?
        } else {
            send1(&mut kept, request).await?
        };
        latencies.push(sent.elapsed());
        assert_eq!(status, 200);
        assert_eq!(answer.as_ref(), expected.as_slice());
    }
    let half_open_during_reviews = progress.load(Ordering::Relaxed) - FLOOD_BEFORE_GOOD;
    let (half_open_sockets, half_open_accepted) = half_open.await??;
    let (trickle_sockets, tricklers_established) = tricklers.await??;

    let (status, text) = get(metrics_addr, "/metrics").await?;
    assert_eq!(status, 200);
    let shed = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("graft_connections_shed_total{reason=\"")?;
            let (reason, count) = rest.split_once("\"} ")?;
            Some((reason.to_string(), count.trim().parse().ok()?))
        })
        .collect::<Vec<(String, u64)>>();
    // The first shed connection is logged at once (then at most one line per 10 s).
    next_log_where(&lines, |line| {
        line["level"] == "WARN"
            && line["message"]
                .as_str()
                .is_some_and(|message| message.starts_with("shedding admission connections"))
    })?;
    let peak_rss_kib = peak_rss_kib(child.0.id())?;
    drop((half_open_sockets, trickle_sockets));

    let figures = Figures {
        latencies,
        peak_rss_kib,
        shed,
        half_open_accepted,
        half_open_during_reviews,
        tricklers_established,
    };
    println!(
        "{name}: {REVIEWS} reviews (half on fresh connections) during {HALF_OPEN} half-open \
         connections ({} connected, {} of them while the reviews were sent) and {TRICKLERS} header tricklers ({} past the handshake): \
         p50 {:?}, p99 {:?}, max {:?}; graft peak RSS {} KiB; shed {:?}",
        figures.half_open_accepted,
        figures.half_open_during_reviews,
        figures.tricklers_established,
        figures.percentile(0.5),
        figures.percentile(0.99),
        figures.percentile(1.0),
        figures.peak_rss_kib,
        figures.shed,
    );
    Ok(figures)
}

/// The `graft serve` child, killed when the run ends however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TLS connection from `source` (any 127.0.0.0/8 address is loopback on Linux).
async fn connect_from(
    source: [u8; 4],
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    let tcp = socket.connect(addr).await?;
    let name = ServerName::try_from(SERVICE_NAME)?;
    Ok(TlsConnector::from(client).connect(name, tcp).await?)
}

/// Opens the half-open connections one after another (a burst of concurrent connects
/// overflows the accept queue), each sending the first three bytes of a ClientHello;
/// says when [`FLOOD_BEFORE_GOOD`] are open. Returns the sockets, held until the run
/// ends, and how many connected.
async fn half_open_flood(
    addr: SocketAddr,
    flooded: tokio::sync::oneshot::Sender<()>,
    progress: Arc<AtomicUsize>,
) -> Result<(Vec<TcpStream>, usize)> {
    let mut flooded = Some(flooded);
    let mut sockets = Vec::with_capacity(HALF_OPEN);
    for opened in 0..HALF_OPEN {
        progress.store(opened, Ordering::Relaxed);
        if opened == FLOOD_BEFORE_GOOD
            && let Some(flooded) = flooded.take()
        {
            let _ = flooded.send(());
        }
        // A connection the server has already closed may refuse the write: that is the
        // server shedding it, not a failure of the test.
        let Ok(mut socket) = TcpStream::connect(addr).await else {
            continue;
        };
        let _ = socket.write_all(&[0x16, 0x03, 0x01]).await;
        sockets.push(socket);
    }
    let connected = sockets.len();
    Ok((sockets, connected))
}

/// Completes the TLS handshake and sends part of a request's headers, then nothing;
/// four at a time. Returns the streams and how many got past the handshake.
async fn trickle_headers(
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
) -> Result<(Vec<tokio_rustls::client::TlsStream<TcpStream>>, usize)> {
    let mut streams = Vec::with_capacity(TRICKLERS);
    let mut pending = tokio::task::JoinSet::new();
    let mut started = 0;
    while started < TRICKLERS || !pending.is_empty() {
        while started < TRICKLERS && pending.len() < 4 {
            started += 1;
            let client = client.clone();
            pending.spawn(async move {
                let mut stream = connect_from([127, 0, 0, 1], addr, client).await.ok()?;
                stream
                    .write_all(b"POST /mutate HTTP/1.1\r\nhost: graft.graft.svc\r\ncontent-")
                    .await
                    .ok()?;
                stream.flush().await.ok()?;
                Some(stream)
            });
        }
        if let Some(done) = pending.join_next().await
            && let Some(stream) = done?
        {
            streams.push(stream);
        }
    }
    let established = streams.len();
    Ok((streams, established))
}

/// The child's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .ok_or("no VmHWM")?;
    Ok(line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?)
}

/// Past the handshake, a connection must start its first request within the header read
/// timeout, whatever the protocol (hyper alone waits for the first bytes forever); an
/// idle HTTP/1 keep-alive connection gets the same time for its next request's headers,
/// and an idle HTTP/2 connection is kept.
#[tokio::test]
async fn established_connections_must_start_a_request_in_time() -> Result {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = tempfile::tempdir()?;
        let mut config = config(policies.path(), &secret);
        let header_read = Duration::from_millis(300);
        config.limits.header_read_timeout = header_read;
        let server = start(config).await?;
        let addr = server.running.addr;
        let body = fixture(FIXTURE)?;

        // Silent after the handshake, and after one byte that does not tell the protocol.
        for sent in [&b""[..], b"P"] {
            let client = client_config(&pki.ca_pem(), None, &[b"h2", b"http/1.1"])?;
            let mut silent = connect(addr, client).await?;
            silent.write_all(sent).await?;
            silent.flush().await?;
            let started = Instant::now();
            let mut buf = [0u8; 1];
            let read = silent.read(&mut buf).await;
            assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
            assert!(
                started.elapsed() >= header_read / 2,
                "{:?}",
                started.elapsed()
            );
        }

        // HTTP/1 keep-alive: idle past the header read timeout, closed.
        let h1_client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut h1 = http1(connect(addr, h1_client).await?).await?;
        let (status, _) = send1(
            &mut h1,
            mutate_request("POST", "application/json", body.clone())?,
        )
        .await?;
        assert_eq!(status, 200);
        let closed = Instant::now();
        while !h1.is_closed() {
            tokio::task::yield_now().await;
        }
        assert!(
            closed.elapsed() >= header_read / 2,
            "{:?}",
            closed.elapsed()
        );

        // HTTP/2: still open after several header read timeouts (the timeout of the first
        // request's deadline would have closed it by then).
        let h2_client = client_config(&pki.ca_pem(), None, &[b"h2"])?;
        let mut h2 = http2(connect(addr, h2_client).await?).await?;
        let (status, _) = send2(
            &mut h2,
            mutate_request("POST", "application/json", body.clone())?,
        )
        .await?;
        assert_eq!(status, 200);
        // A fresh HTTP/1 connection left silent past the timeout marks the time passing.
        let marker_client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut marker = connect(addr, marker_client).await?;
        let mut buf = [0u8; 1];
        let _ = marker.read(&mut buf).await;
        let (status, _) = send2(&mut h2, mutate_request("POST", "application/json", body)?).await?;
        assert_eq!(status, 200, "the idle HTTP/2 connection was closed");
        server.shutdown().await
    })
    .await?
}

/// Raises this process's soft limit on open files to at least `wanted` (within the hard
/// limit): the flood holds one descriptor per connection, more than the usual 1,024.
fn raise_open_file_limit(wanted: usize) -> Result {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let wanted = u64::try_from(wanted)?;
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_none_or(|current| current >= wanted) {
        return Ok(());
    }
    if limit.maximum.is_some_and(|maximum| maximum < wanted) {
        return Err(format!(
            "the flood needs {wanted} open files and the hard limit is {:?}: raise it \
             (ulimit -Hn)",
            limit.maximum
        )
        .into());
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(wanted),
            maximum: limit.maximum,
        },
    )?;
    Ok(())
}

/// A body trickled after complete headers is bounded by the request's deadline (the
/// request timeout here): answered 408, then the connection is closed, so the trickler
/// gives its established slot back.
#[tokio::test]
async fn a_trickled_body_is_answered_408_at_the_request_deadline() -> Result {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(DEADLINE, async {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let policies = tempfile::tempdir()?;
        let mut config = config(policies.path(), &secret);
        let request_timeout = Duration::from_millis(400);
        config.limits.request_timeout = request_timeout;
        let server = start(config).await?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let mut stream = connect(server.running.addr, client).await?;
        stream
            .write_all(
                format!(
                    "POST /mutate HTTP/1.1\r\nhost: {SERVICE_NAME}\r\n\
                     content-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"apiVersion\""
                )
                .as_bytes(),
            )
            .await?;
        stream.flush().await?;
        let started = Instant::now();
        let (status, _) = read_response(&mut stream).await?;
        assert_eq!(status, 408);
        assert!(
            started.elapsed() >= request_timeout / 2,
            "{:?}",
            started.elapsed()
        );
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest).await;
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "still open: {read:?} {rest:?}"
        );
        server.shutdown().await
    })
    .await?
}
