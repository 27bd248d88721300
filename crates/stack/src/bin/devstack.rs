//! The whole stack in one process, for local development (`make run`).
//!
//! Each service loads its own layered settings (`HUB_PROFILE=dev` selects the
//! dev overlays: loopback addresses, echoed magic-link tokens, the dev staff
//! list, loopback trusted as proxy, the dev keys). `HUB_DATABASE_URL` (an
//! administrator URL, default `postgres://postgres@127.0.0.1:5432/hub`) is the
//! database every service gets its own role on; `HUB_NATS_URL` the NATS server.
//! The console serves at http://localhost:8070 (the mailed links point there;
//! passkeys need the host name, not 127.0.0.1).
//! Ctrl-C stops everything; a service that fails stops everything too.

use hub_stack::{Source, Stack, StackConfig};
use service_kit::{settings::Layered, Runtime};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let admin = std::env::var("HUB_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/hub".to_owned());
    let mut common = Vec::new();
    if let Ok(nats) = std::env::var("HUB_NATS_URL") {
        common.push(format!("[nats]\nurl = {nats:?}\n"));
    }
    let cancel = CancellationToken::new();
    let cfg = StackConfig {
        source: Source::Environment,
        common,
        extra: Default::default(),
        database_admin_url: Some(admin),
        gateways: 1,
        runtime: Runtime::new(cancel.clone()),
    };
    let telemetry = Stack::telemetry(&cfg)?;
    let _guard = service_kit::telemetry::init("devstack", &telemetry)?;
    service_kit::shutdown::cancel_on_signal(cancel.clone());
    let mut stack = Stack::start(cfg).await?;
    // The console (http://localhost:8070) in front of the first gateway.
    let (core, product) = stack.gateways.first().cloned().unwrap_or_default();
    let console = console::Settings::load_with(&[format!(
        "[console]\ngateway_url = {core:?}\nproduct_gateway_url = {product:?}\n"
    )])?;
    let console = console::Application::build(console, Runtime::new(cancel.clone())).await?;
    tracing::info!(url = %format!("http://127.0.0.1:{}", console.port()), "console ready");
    stack.serve_with(
        "console",
        futures::FutureExt::boxed(console.run_until_stopped()),
    );
    tracing::info!(
        services = ?stack.services,
        gateways = ?stack.gateways,
        startup_ms = started.elapsed().as_millis() as u64,
        "stack ready"
    );
    stack.run_until_stopped().await
}
