//! The real binary under SIGTERM: in-flight requests complete, idle keep-alive connections
//! are closed, new connections are refused, exit code 0.

use std::process::Command;
use std::sync::mpsc;

use crate::support::Error;
use crate::support::server::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Waits (bounded) for a JSON log line whose message is `message`.
fn wait_for_log(lines: &mpsc::Receiver<String>, message: &str) -> Result<serde_json::Value> {
    next_log_where(lines, |line| line["message"] == message)
}

#[tokio::test]
async fn sigterm_finishes_in_flight_requests_and_exits_zero() -> Result {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    let mut child = serve_command(policies.path(), &secret)
        .args(["--shutdown-grace", "20s"])
        .spawn()?;
    let lines = log_lines(&mut child)?;

    let outcome = async {
        let serving = wait_for_log(&lines, "graft serving")?;
        let addr: std::net::SocketAddr = serving["addr"].as_str().ok_or("no addr")?.parse()?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let body = fixture("pod-create-multus-worker.json")?;
        let expected = expected_answer(policies.path(), &body)?;

        // An idle keep-alive connection, as the apiserver's pool holds.
        let mut idle = connect(addr, client.clone()).await?;
        let head = format!(
            "POST /mutate?timeout=5s HTTP/1.1\r\nhost: {SERVICE_NAME}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        idle.write_all(head.as_bytes()).await?;
        idle.write_all(&body).await?;
        assert_eq!(read_response(&mut idle).await?, (200, expected.clone()));

        // An in-flight request: headers and half the body sent. `Expect: 100-continue`
        // makes the server say when its handler has started reading the body, so the
        // signal below cannot overtake the request (an unread request on a connection
        // counts as idle and is closed).
        let mut slow = connect(addr, client.clone()).await?;
        let (first, rest) = body.split_at(body.len() / 2);
        let expecting = head.replace("\r\n\r\n", "\r\nexpect: 100-continue\r\n\r\n");
        slow.write_all(expecting.as_bytes()).await?;
        slow.flush().await?;
        assert!(read_interim(&mut slow).await?.starts_with("HTTP/1.1 100"));
        slow.write_all(first).await?;
        slow.flush().await?;

        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        assert!(kill.success());
        wait_for_log(&lines, "stopped accepting connections")?;

        // New connections are refused once the listener is closed.
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());

        // The idle connection is closed by the server.
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(DEADLINE, idle.read(&mut buf)).await?;
        assert!(matches!(read, Ok(0) | Err(_)), "idle connection still open: {read:?}");

        // The in-flight request completes with the full answer.
        slow.write_all(rest).await?;
        slow.flush().await?;
        assert_eq!(read_response(&mut slow).await?, (200, expected));
        wait_for_log(&lines, "all connections drained")?;
        Ok::<_, Error>(())
    }
    .await;

    let status = wait_exit(child)?;
    outcome?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

/// Reads an interim (1xx) response head, byte by byte so nothing after it is consumed.
async fn read_interim<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(DEADLINE, stream.read(&mut byte)).await??;
        if read == 0 {
            return Err("connection closed before the interim response".into());
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8(head)?)
}

/// Waits (bounded) for the child to exit, killing it if it outlives the deadline.
fn wait_exit(mut child: std::process::Child) -> Result<std::process::ExitStatus> {
    let pid = child.id().to_string();
    let (status_tx, status) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = status_tx.send(child.wait());
    });
    match status.recv_timeout(DEADLINE) {
        Ok(status) => Ok(status?),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            Err("graft did not exit after SIGTERM".into())
        }
    }
}

#[test]
fn an_invalid_flag_value_is_a_usage_error() -> Result {
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["serve", "--shutdown-grace", "soon"])
        .output()?;
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8(output.stderr)?.contains("shutdown-grace"));
    Ok(())
}

#[test]
fn lint_flag_lints_and_exits() -> Result {
    let policies = tempfile::tempdir()?;
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["serve", "--lint", "--policies"])
        .arg(policies.path())
        .output()?;
    assert_eq!(output.status.code(), Some(0));
    Ok(())
}

/// Log lines reach stdout through a buffer (`cli/log_writer.rs`): the last line logged
/// before the process exits is still written out.
#[test]
fn the_last_line_before_exit_is_written_out() -> Result {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = tempfile::tempdir()?;
    std::fs::write(policies.path().join("broken.yaml"), "kind: [unclosed\n")?;
    let output = serve_command(policies.path(), &secret).output()?;
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout)?;
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().ok_or("no log")?)?;
    assert_eq!(
        last["message"], "the policy set is invalid; not serving",
        "{stdout}"
    );
    assert_eq!(last["level"], "ERROR", "{stdout}");
    assert_eq!(last["problems"], 1, "{stdout}");
    Ok(())
}
