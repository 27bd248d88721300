//! Graceful shutdown: SIGTERM or Ctrl-C cancels one token that every
//! background task and server watches.

use tokio_util::sync::CancellationToken;

/// Cancel `token` on SIGTERM or Ctrl-C.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot listen for SIGTERM");
                        let _ = ctrl_c.await;
                        token.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        tracing::info!("shutdown requested");
        token.cancel();
    });
}

/// Stop `server` gracefully when `token` is cancelled.
pub fn stop_server_on(token: CancellationToken, handle: actix_web::dev::ServerHandle) {
    tokio::spawn(async move {
        token.cancelled().await;
        handle.stop(true).await;
    });
}
