//! A hand-written, single-purpose webhook: the Multus rule of
//! `policies/multus-networks.yaml` in plain Rust (`support/handwritten_review.rs`), served
//! with the transport limit's TLS and HTTP setup. `bench/load.sh` drives it like graft, so
//! graft's throughput can be compared with what a platform team would write instead.
//!
//! `handwritten_webhook LISTEN_ADDR CA_FILE DURATION_SECONDS`: serves for at most
//! DURATION_SECONDS (it stops by itself), writing its self-signed CA to CA_FILE.
#![forbid(unsafe_code)]

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};

#[path = "support/handwritten_review.rs"]
mod handwritten_review;
#[path = "support/transport.rs"]
mod transport;

/// The allocator `graft serve` runs with (see `src/main.rs`), so the comparison is fair.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    transport::run("/tmp/handwritten-webhook-ca.pem", answer)
}

/// Reads the body and answers the review, or 400 with the reason.
async fn answer(request: Request<Incoming>) -> transport::Answer {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return Ok(refuse(&error.to_string())),
    };
    Ok(match handwritten_review::review(&body) {
        Ok(answer) => transport::json(StatusCode::OK, answer),
        Err(error) => refuse(&error.to_string()),
    })
}

fn refuse(message: &str) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    let body = serde_json::json!({ "error": message }).to_string();
    transport::json(StatusCode::BAD_REQUEST, body)
}
