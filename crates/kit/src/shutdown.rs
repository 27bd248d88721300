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

/// Run `job` every `every` until `cancel` fires (the first run after one
/// interval), logging how many rows it removed or why it failed. For idempotent
/// clean-ups that every replica may run.
pub fn spawn_periodic<F, Fut>(
    name: &'static str,
    every: std::time::Duration,
    cancel: CancellationToken,
    job: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<u64>> + Send,
{
    let every = every.max(std::time::Duration::from_secs(1));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
            match job().await {
                Ok(n) => tracing::info!(job = name, deleted = n, "periodic job done"),
                Err(e) => {
                    if !crate::outage::report_background(&e) {
                        tracing::warn!(job = name, error = ?e, "periodic job failed")
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        sync::{
            atomic::{AtomicU64, Ordering},
            Arc,
        },
        time::Duration,
    };

    #[tokio::test(start_paused = true)]
    async fn periodic_jobs_run_every_interval_and_stop_on_cancel() {
        let runs = Arc::new(AtomicU64::new(0));
        let cancel = CancellationToken::new();
        let counter = runs.clone();
        let task = spawn_periodic("test", Duration::from_secs(10), cancel.clone(), move || {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                // A failing run does not stop the job.
                anyhow::ensure!(n != 1, "second run fails");
                Ok(n)
            }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "no run before one interval");
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        cancel.cancel();
        task.await.expect("the job stops");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "nothing runs after cancel");
    }
}
