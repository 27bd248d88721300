//! org-billing binary: serves; `migrate` applies migrations and exits (the Helm
//! migration Job); `healthcheck` probes /healthz; `dlq list | replay` handles
//! dead letters (see service_kit::service::main).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    service_kit::service::main::<org_billing::OrgBilling>().await
}
