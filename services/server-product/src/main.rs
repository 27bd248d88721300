//! server-product binary: serves; `migrate` applies migrations (and the demo
//! catalog when configured) and exits; `healthcheck` probes /healthz; `dlq`
//! handles dead letters (see service_kit::service::main).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::service::main::<server_product::ServerProduct>().await
}
