//! One HTTP POST of a JSON body, over plain HTTP or TLS (the system's roots), HTTP/1.1,
//! a fresh connection each time: a sink hears a few messages a minute at most.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("invalid URL: {0}")]
    Url(String),
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("cannot build the request: {0}")]
    Request(#[from] hyper::http::Error),
    #[error("answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the chat service refused the message: {0}")]
    Refused(String),
}

/// The TLS client configuration: the platform's trusted roots.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, DeliveryError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| DeliveryError::Tls(error.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// POSTs `body` to `url` with `headers`; the answer's body when the status is 2xx.
pub async fn post(
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Result<Vec<u8>, DeliveryError> {
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|error: hyper::http::uri::InvalidUri| DeliveryError::Url(error.to_string()))?;
    let host = uri
        .host()
        .ok_or_else(|| DeliveryError::Url("no host".to_string()))?
        .to_string();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => {
            return Err(DeliveryError::Url(
                "the scheme must be http or https".to_string(),
            ));
        }
    };
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let stream = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(DeliveryError::Connect)?;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    let mut request = hyper::Request::post(path)
        .header(hyper::header::HOST, authority(&host, port, tls))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::USER_AGENT, "graft-notices");
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request.body(Full::new(Bytes::from(body)))?;
    let response = if tls {
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|error| DeliveryError::Tls(error.to_string()))?;
        let stream = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, stream)
            .await
            .map_err(|error| DeliveryError::Tls(error.to_string()))?;
        send(TokioIo::new(stream), request).await?
    } else {
        send(TokioIo::new(stream), request).await?
    };
    let status = response.status();
    let answer = response.into_body().collect().await?.to_bytes().to_vec();
    if !status.is_success() {
        return Err(DeliveryError::Status {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&answer).chars().take(200).collect(),
        });
    }
    Ok(answer)
}

fn authority(host: &str, port: u16, tls: bool) -> String {
    if (tls && port == 443) || (!tls && port == 80) {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

async fn send<I>(
    io: I,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, DeliveryError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    // The connection is driven beside the request and ends with it.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender.send_request(request).await?)
}
