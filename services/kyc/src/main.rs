//! kyc binary: serves; `migrate` applies migrations and exits (the Helm
//! migration Job); `healthcheck` probes /healthz; `dlq` lists or replays dead
//! letters.

use kyc::{build, Settings};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::load()?;
    let _guard = service_kit::telemetry::init("kyc", &settings.telemetry)?;
    match std::env::args().nth(1).as_deref() {
        Some("migrate") => kyc::migrate(&settings).await,
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
