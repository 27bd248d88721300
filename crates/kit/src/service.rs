//! One description of an internal service: its names, its schema, the services
//! it calls, its settings type and how to migrate and build it. Its binary
//! ([`server::main`](crate::server::main)), the one-process stack (hub_stack)
//! and the test harness all start it from this.

use crate::{
    server::Running,
    settings::{HttpSettings, Layered, NatsSettings, TelemetrySettings},
    Runtime,
};
use std::future::Future;

/// An internal service, described once (a unit struct in its crate).
pub trait Service: 'static {
    /// For logs and connection names (`org-billing`): its settings' name.
    const NAME: &'static str = <Self::Settings as Layered>::SERVICE;
    /// Its name in assertions and in the gateway's upstream table (`org_billing`).
    const AUDIENCE: &'static str;
    /// The tracing target of its crate (`org_billing`).
    const TARGET: &'static str;
    /// Its Postgres schema (its role is `hub_<schema>`).
    const SCHEMA: &'static str;
    /// Services it calls directly: (callee's audience, the settings section
    /// with its `url` and `key`).
    const CALLS: &'static [(&'static str, &'static str)] = &[];

    type Settings: Layered + Send + 'static;

    fn telemetry(s: &Self::Settings) -> &TelemetrySettings;
    fn http(s: &Self::Settings) -> &HttpSettings;
    fn nats(s: &Self::Settings) -> &NatsSettings;

    /// Apply its migrations (and whatever else its `migrate` subcommand does).
    fn migrate(s: &Self::Settings) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Start it: ready to serve on its listener.
    fn build(
        s: Self::Settings,
        rt: Runtime,
    ) -> impl Future<Output = anyhow::Result<Running>> + Send;
}
