//! agent binary: serves; `migrate` applies migrations and exits (the Helm
//! migration Job); `healthcheck` probes /healthz; `dlq list | replay` handles
//! dead letters (see service_kit::server::main).

use service_kit::settings::Layered;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::server::main(
        "agent",
        agent::Settings::load()?,
        |s| (&s.telemetry, s.http.port, &s.nats),
        |s| async move { agent::migrate(&s).await },
        agent::build,
    )
    .await
}
