//! server-product binary: serves; `migrate` applies migrations (and the demo
//! catalog when configured) and exits; `healthcheck` probes /healthz; `dlq`
//! handles dead letters (see service_kit::server::main).

use service_kit::settings::Layered;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::server::main(
        "server-product",
        server_product::Settings::load()?,
        |s| (&s.telemetry, s.http.port, &s.nats),
        |s| async move { server_product::migrate(&s).await },
        server_product::build,
    )
    .await
}
