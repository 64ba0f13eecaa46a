//! The transport limit: graft's TLS and HTTP setup (tokio multi-thread runtime, rustls with
//! graft's configuration, hyper-util's auto builder with HTTP/1.1 keep-alive) answering
//! every request with one constant "allowed" AdmissionReview, without reading the review.
//! `bench/load.sh` drives it like graft, so each graft result is also a ratio to this.
//!
//! `transport_limit LISTEN_ADDR CA_FILE DURATION_SECONDS`: serves for at most
//! DURATION_SECONDS (it stops by itself), writing its self-signed CA to CA_FILE.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use graft::server::tls;

/// The allocator `graft serve` runs with (see `src/main.rs`), so the measurement is of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What graft answers when no policy matches, minus the uid echo.
const ALLOWED: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"855e422d-d85e-42f4-8dac-3cd8bf3bb522","allowed":true,"auditAnnotations":{"revision":"sha256:000000000000"}}}"#;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:9443").parse()?;
    let ca_file = args
        .next()
        .unwrap_or_else(|| "/tmp/transport-limit-ca.pem".into());
    let seconds: u64 = args.next().as_deref().unwrap_or("60").parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let generated = tls::self_signed()?;
        tls::write_ca(std::path::Path::new(&ca_file), &generated.ca_pem)?;
        let resolver = Arc::new(tls::CertResolver::new(generated.key));
        let acceptor = TlsAcceptor::from(tls::server_config(resolver, None)?);
        let listener = TcpListener::bind(listen).await?;
        let deadline = tokio::time::sleep(Duration::from_secs(seconds));
        tokio::pin!(deadline);
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .keep_alive(true);
        builder.http2().timer(TokioTimer::new());
        loop {
            let (stream, _) = tokio::select! {
                () = &mut deadline => break,
                accepted = listener.accept() => accepted?,
            };
            let acceptor = acceptor.clone();
            let builder = builder.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(answer);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
        anyhow::Ok(())
    })?;
    // Open keep-alive connections end with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// Reads the body (as graft must) and answers the constant review.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let _ = request.into_body().collect().await;
    let mut response = Response::new(Full::new(Bytes::from_static(ALLOWED)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
