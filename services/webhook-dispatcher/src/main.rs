//! webhook-dispatcher binary: serves; `migrate`, `healthcheck`, `dlq` (see
//! service_kit::server::main).

use service_kit::settings::Layered;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::server::main(
        "webhook-dispatcher",
        webhook_dispatcher::Settings::load()?,
        |s| (&s.telemetry, s.http.port, &s.nats),
        |s| async move { webhook_dispatcher::migrate(&s).await },
        webhook_dispatcher::build,
    )
    .await
}
