//! The TLS and HTTP setup of the servers `bench/load.sh` compares graft with: graft's
//! tokio multi-thread runtime, rustls configuration (`graft::server::tls`) and hyper-util
//! auto builder with HTTP/1.1 keep-alive. Shared so that those servers differ only in how
//! they answer a request.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use graft::server::tls;

/// What a request handler returns.
pub type Answer = Result<Response<Full<Bytes>>, Infallible>;

/// Serves `answer` over TLS, as the command line `LISTEN_ADDR CA_FILE DURATION_SECONDS`
/// says: for at most DURATION_SECONDS (the server stops by itself, so a benchmark that
/// dies cannot leave it running), writing its self-signed CA to CA_FILE.
pub fn run<F, Fut>(default_ca_file: &str, answer: F) -> anyhow::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:9443").parse()?;
    let ca_file = args.next().unwrap_or_else(|| default_ca_file.into());
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
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
        anyhow::Ok(())
    })?;
    // Open keep-alive connections end with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// A JSON response with `status`.
pub fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
