//! webhook-dispatcher binary: serves; `migrate`, `healthcheck`, `dlq` (see
//! service_kit::server::main).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::server::main::<webhook_dispatcher::WebhookDispatcher>().await
}
