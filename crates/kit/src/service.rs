//! One description of an internal service: its names, its schema, the services
//! it calls, its settings type and how to migrate and build it. Its binary
//! ([`main`]), the one-process stack (hub_stack)
//! and the test harness all start it from this.

use crate::{
    deadletter, http,
    nats::Durable,
    nats_access::Access,
    server::Running,
    settings::{HttpSettings, Layered, NatsSettings, TelemetrySettings},
    Runtime,
};
use anyhow::Context;
use async_nats::jetstream;
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// The sections every service's settings have (`telemetry`, `http`, `nats`):
/// implement it with [`common_settings!`](crate::common_settings).
pub trait Common {
    fn telemetry_settings(&self) -> &TelemetrySettings;
    fn http_settings(&self) -> &HttpSettings;
    fn nats_settings(&self) -> &NatsSettings;
}

/// `impl Common` for a settings struct with the fields `telemetry`, `http`
/// and `nats`.
#[macro_export]
macro_rules! common_settings {
    ($t:ty) => {
        impl $crate::service::Common for $t {
            fn telemetry_settings(&self) -> &$crate::settings::TelemetrySettings {
                &self.telemetry
            }
            fn http_settings(&self) -> &$crate::settings::HttpSettings {
                &self.http
            }
            fn nats_settings(&self) -> &$crate::settings::NatsSettings {
                &self.nats
            }
        }
    };
}

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
    /// Subjects it publishes (relative to the deployment's prefix; `>`
    /// allowed): the events its outbox carries. Its NATS user may publish
    /// these and no others ([`crate::nats_access`]).
    const EMITS: &'static [&'static str] = &[];
    /// Its durable consumers; it starts them from these constants, and its
    /// NATS user may create, read and acknowledge these and no others.
    const CONSUMES: &'static [Durable] = &[];
    /// What it does on NATS: the source of its NATS user's permissions.
    const NATS_ACCESS: Access = Access {
        user: Self::NAME,
        emits: Self::EMITS,
        consumes: Self::CONSUMES,
        listens: &[],
        jetstream: true,
    };

    type Settings: Layered + Common + Send + 'static;

    fn telemetry(s: &Self::Settings) -> &TelemetrySettings {
        s.telemetry_settings()
    }
    fn http(s: &Self::Settings) -> &HttpSettings {
        s.http_settings()
    }
    fn nats(s: &Self::Settings) -> &NatsSettings {
        s.nats_settings()
    }

    /// Apply its migrations (and whatever else its `migrate` subcommand does).
    fn migrate(s: &Self::Settings) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Start it: ready to serve on its listener.
    fn build(
        s: Self::Settings,
        rt: Runtime,
    ) -> impl Future<Output = anyhow::Result<Running>> + Send;
}

/// The body of every internal service's `main`: load its settings, then
/// serve, or run the subcommand (`migrate`: apply migrations, create or
/// update the NATS streams (with `nats.stream_replicas`; its NATS user must
/// manage streams: `hub-admin`) and exit, for the Helm Job; `healthcheck`: probe `/healthz`; `dlq list | replay ...`: the dead
/// letters).
pub async fn main<S: Service>() -> anyhow::Result<()> {
    let settings = S::Settings::load()?;
    let _guard = crate::telemetry::init(S::NAME, S::telemetry(&settings))?;
    match std::env::args().nth(1).as_deref() {
        Some("migrate") => {
            S::migrate(&settings).await?;
            let nats = S::nats(&settings);
            let client = crate::nats::connect(nats, &format!("{}-migrate", S::NAME)).await?;
            crate::nats::manage_streams(&jetstream::new(client), nats).await
        }
        Some("healthcheck") => http::probe(S::http(&settings).port).await,
        Some("dlq") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            dlq_command(S::nats(&settings), &args).await
        }
        Some(other) => {
            anyhow::bail!("unknown subcommand {other:?} (expected migrate, healthcheck or dlq)")
        }
        None => {
            let cancel = CancellationToken::new();
            crate::shutdown::cancel_on_signal(cancel.clone());
            S::build(settings, crate::Runtime::new(cancel))
                .await?
                .run_until_stopped()
                .await
        }
    }
}

/// The `dlq` subcommand of every service binary: `list`, `replay SEQ...`,
/// `replay --all`.
async fn dlq_command(settings: &NatsSettings, args: &[String]) -> anyhow::Result<()> {
    let client = crate::nats::connect(settings, "dlq-command").await?;
    let js = jetstream::new(client);
    let naming = settings.naming();
    match args.first().map(String::as_str) {
        Some("list") => {
            let all = deadletter::list(&js, &naming).await?;
            println!("{} dead letter(s)", all.len());
            for d in all {
                println!(
                    "{}\t{}\t{}\tdeliveries={}\t{}",
                    d.sequence, d.consumer, d.original_subject, d.deliveries, d.error
                );
            }
            Ok(())
        }
        Some("replay") => {
            let seqs: Vec<u64> = if args.get(1).map(String::as_str) == Some("--all") {
                deadletter::list(&js, &naming)
                    .await?
                    .iter()
                    .map(|d| d.sequence)
                    .collect()
            } else {
                args[1..]
                    .iter()
                    .map(|a| a.parse().with_context(|| format!("not a sequence: {a}")))
                    .collect::<anyhow::Result<_>>()?
            };
            anyhow::ensure!(!seqs.is_empty(), "usage: dlq replay <sequence>... | --all");
            for seq in seqs {
                deadletter::replay(&js, &naming, seq).await?;
                println!("replayed {seq}");
            }
            Ok(())
        }
        _ => anyhow::bail!("usage: dlq list | dlq replay <sequence>... | dlq replay --all"),
    }
}
