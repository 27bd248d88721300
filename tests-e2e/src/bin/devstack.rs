//! The whole stack in one process, for local development (`make run`).
//!
//! Each service loads its own layered settings (`HUB_PROFILE=dev` selects the
//! dev overlays: loopback addresses, echoed magic-link tokens, the dev staff
//! list, loopback trusted as proxy). Ctrl-C stops everything.

use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let identity_settings = identity::Settings::load()?;
    let billing_settings = org_billing::Settings::load()?;
    let gateway_settings = core_api_gateway::Settings::load()?;
    let _guard = service_kit::telemetry::init("devstack", &identity_settings.telemetry)?;
    let cancel = CancellationToken::new();
    service_kit::shutdown::cancel_on_signal(cancel.clone());

    let identity = identity::build(identity_settings, cancel.clone()).await?;
    let billing = org_billing::build(billing_settings, cancel.clone()).await?;
    let gateway = core_api_gateway::Application::build(gateway_settings, cancel.clone()).await?;
    tracing::info!(
        identity = identity.port(),
        org_billing = billing.port(),
        core = gateway.core_port().unwrap_or_default(),
        product = gateway.product_port().unwrap_or_default(),
        startup_ms = started.elapsed().as_millis() as u64,
        "stack ready"
    );
    let (a, b, c) = tokio::join!(
        identity.run_until_stopped(),
        billing.run_until_stopped(),
        gateway.run_until_stopped()
    );
    a?;
    b?;
    c?;
    Ok(())
}
