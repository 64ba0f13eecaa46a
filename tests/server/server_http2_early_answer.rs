//! Over HTTP/2, an answer sent before the request body was read ends the exchange
//! cleanly. A refusal that does not depend on the body (404, 405, 415) reads and discards
//! a body within the size limit, so the client finishes sending and no stream is reset
//! (older curl reports any reset during an upload as "Stream error in the HTTP/2 framing
//! layer" instead of the answer). An oversize body (413) is answered completely, then
//! reset with NO_ERROR, "stop sending" (RFC 9113 section 8.1), never with an error code.
//!
//! The client is the `h2` crate itself, so the test sees the reset's reason code, and it
//! keeps sending body data while the server answers, as curl does with an upload.

use crate::support::server::*;
use bytes::Bytes;
use h2::Reason;

/// The server's body limit in these tests.
const LIMIT: usize = 2 * 1024 * 1024;

struct Early {
    status: u16,
    body: serde_json::Value,
    /// Whether the client sent its whole body and ended its side of the stream.
    sent_all: bool,
    /// The server's reset, when the client could not send it all.
    reset: Option<Reason>,
}

/// Sends `POST path` with `headers` and a `length`-byte body in 16 KiB chunks, while
/// reading the answer. Stops sending when the server resets the stream.
async fn early_answer(path: &str, headers: &[(&str, &str)], length: usize) -> Result<Early> {
    let pki = Pki::new("test apiserver CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let mut config = example_config(&secret);
    config.limits.max_body_bytes = LIMIT;
    let server = start(config).await?;

    let tls = connect(
        server.running.addr,
        client_config(&pki.ca_pem(), None, &[b"h2"])?,
    )
    .await?;
    let (client, connection) = h2::client::handshake(tls).await?;
    tokio::spawn(connection);
    let mut client = client.ready().await?;
    let mut request = hyper::Request::builder()
        .method("POST")
        .uri(format!("https://{SERVICE_NAME}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (response, mut sending) = client.send_request(request.body(())?, false)?;

    let sender = tokio::spawn(async move {
        let chunk = Bytes::from(vec![b' '; 16 * 1024]);
        let mut left = length;
        while left > 0 {
            sending.reserve_capacity(left.min(chunk.len()));
            match std::future::poll_fn(|cx| sending.poll_capacity(cx)).await {
                Some(Ok(n)) if n > 0 => {
                    let n = n.min(left);
                    if sending.send_data(chunk.slice(..n), n == left).is_err() {
                        break;
                    }
                    left -= n;
                }
                // No capacity will come: the stream was reset.
                _ => break,
            }
        }
        if left == 0 {
            return Ok::<_, h2::Error>((true, None));
        }
        let reset = std::future::poll_fn(|cx| sending.poll_reset(cx)).await?;
        Ok((false, Some(reset)))
    });

    let response = response.await?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(data) = body.data().await {
        let data = data?;
        let _ = body.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    let (sent_all, reset) = sender.await??;
    server.shutdown().await?;
    Ok(Early {
        status,
        body: serde_json::from_slice(&bytes)?,
        sent_all,
        reset,
    })
}

/// Larger than HTTP/2's initial flow-control windows, so the client can only finish
/// sending if the server reads the body.
const WITHIN_LIMIT: usize = LIMIT * 3 / 4;

#[tokio::test]
async fn a_missing_content_type_is_answered_and_the_client_finishes_sending() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let early = early_answer("/mutate", &[], WITHIN_LIMIT).await?;
        assert_eq!(early.status, 415);
        assert_eq!(
            early.body["error"], "content type must be application/json",
            "{}",
            early.body
        );
        assert!(early.sent_all, "the stream was reset: {:?}", early.reset);
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn a_wrong_path_is_answered_and_the_client_finishes_sending() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let early = early_answer(
            "/validate",
            &[("content-type", "application/json")],
            WITHIN_LIMIT,
        )
        .await?;
        assert_eq!(early.status, 404);
        assert!(early.sent_all, "the stream was reset: {:?}", early.reset);
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn a_declared_oversize_body_is_answered_then_reset_with_no_error() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let declared = (20 * 1024 * 1024).to_string();
        let early = early_answer(
            "/mutate",
            &[
                ("content-type", "application/json"),
                ("content-length", &declared),
            ],
            20 * 1024 * 1024,
        )
        .await?;
        assert_eq!(early.status, 413);
        assert!(
            early.body["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("body larger than")),
            "{}",
            early.body
        );
        assert!(!early.sent_all, "the server read a 20 MB body");
        assert_eq!(early.reset, Some(Reason::NO_ERROR));
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn a_body_that_grows_past_the_limit_is_answered_then_reset_with_no_error() -> Result {
    tokio::time::timeout(DEADLINE, async {
        // No declared length: the limit is found while reading.
        let early = early_answer(
            "/mutate",
            &[("content-type", "application/json")],
            LIMIT * 4,
        )
        .await?;
        assert_eq!(early.status, 413);
        assert!(!early.sent_all, "the server read past its limit");
        assert_eq!(early.reset, Some(Reason::NO_ERROR));
        Ok(())
    })
    .await?
}

#[tokio::test]
async fn a_refused_body_past_the_limit_is_not_read_to_its_end() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let early = early_answer("/mutate", &[], LIMIT * 4).await?;
        assert_eq!(early.status, 415);
        assert!(
            !early.sent_all,
            "the server read past its limit to discard a body"
        );
        assert_eq!(early.reset, Some(Reason::NO_ERROR));
        Ok(())
    })
    .await?
}
