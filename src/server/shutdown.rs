//! Process signals: SIGTERM (kubelet stopping the pod) and SIGINT (Ctrl-C) both start a
//! graceful shutdown.

/// Resolves when the process receives SIGTERM or SIGINT.
pub async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(stream) => stream,
        Err(error) => {
            // Without a SIGTERM handler only Ctrl-C can stop us gracefully; keep serving.
            tracing::error!(%error, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = terminate.recv() => tracing::info!(signal = "SIGTERM", "shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!(signal = "SIGINT", "shutting down"),
    }
}
