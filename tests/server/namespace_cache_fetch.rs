//! The namespace cache against a loopback stand-in for the API server that lists one
//! namespace, keeps its watch open without events, and answers `get` for one more: a
//! namespace the watch has not delivered yet is read directly, and one the API does not
//! know is NotFound. (tests/apiserver/main.rs runs the cache against a real apiserver; a
//! namespace created a moment before its first pod cannot be made to race there on
//! purpose.)

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use graft::namespaces::{NamespaceData, NamespaceSource};
use graft::server::namespace_cache::NamespaceCache;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;

type Body = BoxBody<Bytes, Infallible>;

fn json_body(status: u16, value: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    response
}

fn metadata(name: &str, team: &str) -> serde_json::Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"name": name, "resourceVersion": "10", "labels": {"team": team}},
    })
}

/// The stand-in API server's answer to one request.
fn respond(request: &Request<Incoming>, gets: &AtomicUsize) -> Response<Body> {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    if path == "/api/v1/namespaces" && query.contains("watch=true") {
        // A watch that stays open and sends nothing.
        let pending = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
        return Response::new(StreamBody::new(pending).boxed());
    }
    if path == "/api/v1/namespaces" {
        return json_body(
            200,
            json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "10"},
                "items": [metadata("listed", "a")],
            }),
        );
    }
    if path == "/api/v1/namespaces/fresh" {
        gets.fetch_add(1, Ordering::SeqCst);
        return json_body(200, metadata("fresh", "b"));
    }
    json_body(
        404,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": "NotFound", "code": 404, "message": format!("{path} not found"),
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_missing_from_the_cache_is_read_before_it_counts_as_not_found()
-> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let gets = Arc::new(AtomicUsize::new(0));
    let served = gets.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let gets = served.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let response = respond(&request, &gets);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let config = kube::Config::new(format!("http://{addr}").parse()?);
    let client = kube::Client::try_from(config)?;
    let metrics = Arc::new(graft::metrics::Metrics::new());
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let cache = Arc::new(NamespaceCache::start(client, metrics.clone(), stopped));
    tokio::time::timeout(Duration::from_secs(20), cache.wait_synced()).await?;
    assert_eq!(cache.len(), 1);
    assert!(
        metrics
            .encode()
            .contains("graft_namespace_cache_namespaces 1")
    );

    // Reviews ask from blocking threads, as the server's do.
    let asking = cache.clone();
    let (listed, fresh, ghost) = tokio::task::spawn_blocking(move || {
        (
            asking.namespace_data("listed"),
            asking.namespace_data("fresh"),
            asking.namespace_data("ghost"),
        )
    })
    .await?;
    let team = |data: &NamespaceData| match data {
        NamespaceData::Known(namespace) => namespace.labels.get("team").cloned(),
        _ => None,
    };
    assert_eq!(team(&listed).as_deref(), Some("a"), "{listed:?}");
    assert_eq!(team(&fresh).as_deref(), Some("b"), "{fresh:?}");
    assert_eq!(
        gets.load(Ordering::SeqCst),
        1,
        "fresh was read from the API"
    );
    assert!(
        matches!(&ghost, NamespaceData::NotFound { name, .. } if name == "ghost"),
        "{ghost:?}"
    );
    // A read is not stored: the watch stays the one writer of the cache.
    assert_eq!(cache.len(), 1);
    Ok(())
}
