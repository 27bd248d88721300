//! webhook-dispatcher binary: serves; `migrate`, `healthcheck`, `dlq` (see
//! service_kit::service::main).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::service::main::<webhook_dispatcher::WebhookDispatcher>().await
}
