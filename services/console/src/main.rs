//! console binary: `console` serves; `healthcheck` probes /healthz.

use console::{Application, Settings};
use service_kit::settings::Layered;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::load()?;
    let _guard = service_kit::telemetry::init("console", &settings.telemetry)?;
    match std::env::args().nth(1).as_deref() {
        Some("healthcheck") => service_kit::http::probe(settings.http.port).await,
        Some(other) => anyhow::bail!("unknown subcommand {other:?} (expected healthcheck)"),
        None => {
            let cancel = CancellationToken::new();
            service_kit::shutdown::cancel_on_signal(cancel.clone());
            Application::build(settings, service_kit::Runtime::new(cancel))
                .await?
                .run_until_stopped()
                .await
        }
    }
}
