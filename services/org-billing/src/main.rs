//! org-billing binary: serves; `migrate` applies migrations (and the seed when
//! configured) and exits; `healthcheck` probes /healthz.

use org_billing::{build, Settings};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::load()?;
    let _guard = service_kit::telemetry::init("org-billing", &settings.telemetry)?;
    match std::env::args().nth(1).as_deref() {
        Some("migrate") => org_billing::migrate(&settings).await,
        Some("healthcheck") => service_kit::http::probe(settings.http.port).await,
        Some("dlq") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            service_kit::deadletter::command(&settings.nats, &args).await
        }
        Some(other) => {
            anyhow::bail!("unknown subcommand {other:?} (expected migrate, healthcheck or dlq)")
        }
        None => {
            let cancel = CancellationToken::new();
            service_kit::shutdown::cancel_on_signal(cancel.clone());
            build(settings, service_kit::Runtime::new(cancel))
                .await?
                .run_until_stopped()
                .await
        }
    }
}
