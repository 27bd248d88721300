//! The whole stack in one process, from one description ([`SERVICES`]).
//!
//! `make run` (the `devstack` binary) and tests-e2e both start the stack from
//! here, so adding a service is one line in [`SERVICES`]: [`Entry::of`] its
//! description (a [`Service`]: its names, schema, settings, how to start it,
//! which services it calls); only the gateway's entry is written out. The
//! stack starts the services in order, the gateway last; it binds every
//! service's listener first, so each knows the address of every service it
//! calls, whatever the order. With [`Source::Generated`] (tests) it also makes
//! every secret the services share: one assertion key per receiving service
//! for the gateway, one caller key per calling pair, and each service's own
//! Postgres role.
//!
//! If a service fails to start, or stops while the others run, the whole stack
//! stops with its error.

use anyhow::Context;
use futures::{future::BoxFuture, FutureExt};
use service_kit::{
    clock::Listener,
    nats_access::Access,
    service::Service,
    settings::{HttpSettings, Layered, TelemetrySettings},
    Runtime,
};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Where settings come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Each service's layered settings (defaults, dev overlay with
    /// `HUB_PROFILE=dev`, `config/<service>.toml`, environment), plus the
    /// stack's layer with the addresses it discovered.
    Environment,
    /// Defaults plus the given layers only; the stack makes the keys (tests).
    Generated,
}

/// How to run the stack.
#[derive(Clone, Debug)]
pub struct StackConfig {
    pub source: Source,
    /// TOML layers for every service (after the defaults).
    pub common: Vec<String>,
    /// Extra TOML layers by service name (after `common` and the stack's own).
    pub extra: BTreeMap<String, Vec<String>>,
    /// An administrator URL of the stack's database: each service then gets
    /// its own role `hub_<schema>` on it (created by the service).
    pub database_admin_url: Option<String>,
    /// How many gateway replicas (each serves a core and a product host).
    pub gateways: usize,
    pub runtime: Runtime,
}

/// Starts a service from its settings layers: its listeners, ready to serve.
type StartFn = fn(Vec<String>, Source, Runtime) -> BoxFuture<'static, anyhow::Result<Vec<Started>>>;

/// One service of the stack.
pub struct Entry {
    /// The service's name in assertions and in the gateway's upstream table.
    pub name: &'static str,
    /// The tracing target of its crate (for its log level).
    pub target: &'static str,
    /// Its Postgres schema (its role is `hub_<schema>`); None for the gateway.
    pub schema: Option<&'static str>,
    /// Services it calls directly: (callee name, settings section with `url`
    /// and `key`).
    pub calls: &'static [(&'static str, &'static str)],
    /// Is this the gateway (started last, with every upstream)?
    pub gateway: bool,
    /// What it does on NATS: its NATS user and that user's permissions.
    pub nats: Access,
    load_telemetry: fn(&[String], &Source) -> anyhow::Result<TelemetrySettings>,
    /// Its HTTP settings (to bind its listener before anything starts).
    load_http: fn(&[String], &Source) -> anyhow::Result<HttpSettings>,
    start: StartFn,
}

/// A running service process-part: its listeners and the future that serves them.
pub struct Started {
    /// `core`/`product` for gateways, `http` for the others, and `metrics`
    /// for all, with the bound port.
    pub ports: Vec<(&'static str, u16)>,
    pub run: BoxFuture<'static, anyhow::Result<()>>,
}

fn svc_started(app: service_kit::server::Running) -> Vec<Started> {
    vec![Started {
        ports: vec![("http", app.port()), ("metrics", app.metrics_port())],
        run: app.run_until_stopped().boxed(),
    }]
}

fn layers(l: &[String]) -> Vec<&str> {
    l.iter().map(String::as_str).collect()
}

impl Entry {
    /// An internal service's entry, from its description.
    pub const fn of<S: Service>() -> Entry {
        Entry {
            name: S::AUDIENCE,
            target: S::TARGET,
            schema: Some(S::SCHEMA),
            calls: S::CALLS,
            gateway: false,
            nats: S::NATS_ACCESS,
            load_telemetry: |l, src| Ok(S::telemetry(&load::<S::Settings>(l, src)?).clone()),
            load_http: |l, src| Ok(S::http(&load::<S::Settings>(l, src)?).clone()),
            start: start::<S>,
        }
    }
}

fn start<S: Service>(
    l: Vec<String>,
    src: Source,
    rt: Runtime,
) -> BoxFuture<'static, anyhow::Result<Vec<Started>>> {
    async move {
        let app = S::build(load::<S::Settings>(&l, &src)?, rt).await?;
        Ok(svc_started(app))
    }
    .boxed()
}

/// Every service, in start order. Adding a service is adding it here.
pub const SERVICES: &[Entry] = &[
    Entry::of::<identity::Identity>(),
    Entry::of::<org_billing::OrgBilling>(),
    Entry::of::<kyc::Kyc>(),
    Entry::of::<server_product::ServerProduct>(),
    Entry::of::<webhook_dispatcher::WebhookDispatcher>(),
    Entry::of::<agent::Agent>(),
    Entry {
        name: "gateway",
        target: "core_api_gateway",
        schema: None,
        calls: &[],
        gateway: true,
        nats: core_api_gateway::NATS_ACCESS,
        load_telemetry: |l, src| Ok(load::<core_api_gateway::Settings>(l, src)?.telemetry),
        load_http: |l, src| Ok(load::<core_api_gateway::Settings>(l, src)?.http),
        start: |l, src, rt| {
            async move {
                let app = core_api_gateway::Application::build(
                    load::<core_api_gateway::Settings>(&l, &src)?,
                    rt,
                )
                .await?;
                let mut ports = Vec::new();
                if let Some(p) = app.core_port() {
                    ports.push(("core", p));
                }
                if let Some(p) = app.product_port() {
                    ports.push(("product", p));
                }
                ports.push(("metrics", app.metrics_port()));
                Ok(vec![Started {
                    ports,
                    run: app.run_until_stopped().boxed(),
                }])
            }
            .boxed()
        },
    },
];

/// The nats-server `authorization` block of the stack: one user per entry of
/// [`SERVICES`] (the gateways share one) and the admin user, each allowed
/// only what its description says ([`service_kit::nats_access`]), for a
/// deployment named `naming` (production: the default, no prefix or suffix).
pub fn nats_authorization(naming: &event_contracts::Naming) -> String {
    let access: Vec<Access> = SERVICES.iter().map(|e| e.nats).collect();
    format!(
        "{NATS_AUTHORIZATION_HEADER}{}",
        service_kit::nats_access::authorization(&access, naming)
    )
}

const NATS_AUTHORIZATION_HEADER: &str = "\
# nats-server authorization for the hub: one user per service, each allowed
# only its own subjects, and hub-admin, which manages the streams
# (proto-docs/operations.md, \"NATS users\"). Generated from the services'
# descriptions (crates/stack SERVICES) by
#   cargo run -p hub-stack --bin nats-authorization > deploy/helm/hub/files/nats-authorization.conf
# and checked by `make test`: do not edit by hand. Each password is read from
# the server's environment (HUB_NATS_PASSWORD_<USER>): this file holds no secret.
";

/// Where the chart keeps [`nats_authorization`] (production naming).
pub const NATS_AUTHORIZATION_FILE: &str = "deploy/helm/hub/files/nats-authorization.conf";

/// A service's settings from `l`, as `src` says.
fn load<S: Layered>(l: &[String], src: &Source) -> anyhow::Result<S> {
    match src {
        Source::Environment => S::load_with(l),
        Source::Generated => S::from_layers(&layers(l)),
    }
}

/// Services that call `callee` directly.
fn callers_of(callee: &str) -> impl Iterator<Item = &'static Entry> + '_ {
    SERVICES
        .iter()
        .filter(move |e| e.calls.iter().any(|(c, _)| *c == callee))
}

/// The keys a generated stack uses: gateway -> service, caller -> callee.
struct Keys(BTreeMap<(String, String), String>);

impl Keys {
    fn generate() -> Keys {
        let mut m = BTreeMap::new();
        for e in SERVICES.iter().filter(|e| !e.gateway) {
            m.insert(("gateway".to_owned(), e.name.to_owned()), fresh_key());
            for (callee, _) in e.calls {
                m.insert((e.name.to_owned(), (*callee).to_owned()), fresh_key());
            }
        }
        Keys(m)
    }

    fn get(&self, from: &str, to: &str) -> &str {
        self.0
            .get(&(from.to_owned(), to.to_owned()))
            .map_or("", String::as_str)
    }
}

fn fresh_key() -> String {
    format!("k{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple())
}

/// The database URL of `role` on the database of `admin_url`.
pub fn role_url(admin_url: &str, role: &str) -> anyhow::Result<String> {
    let mut u = reqwest::Url::parse(admin_url).context("parsing the database admin URL")?;
    u.set_username(role)
        .map_err(|_| anyhow::anyhow!("cannot set a user on {admin_url}"))?;
    u.set_password(None)
        .map_err(|_| anyhow::anyhow!("cannot clear the password of {admin_url}"))?;
    Ok(u.to_string())
}

/// The stack's own layer for `e`: database, keys and the addresses of what it calls.
fn stack_layer(
    e: &Entry,
    cfg: &StackConfig,
    keys: Option<&Keys>,
    addresses: &BTreeMap<&'static str, String>,
) -> anyhow::Result<String> {
    let mut t = String::new();
    if let (Some(schema), Some(admin)) = (e.schema, &cfg.database_admin_url) {
        t += &format!(
            "[database]\nurl = {:?}\nadmin_url = {:?}\n",
            role_url(admin, &format!("hub_{schema}"))?,
            admin
        );
    }
    if let Some(keys) = keys {
        if e.gateway {
            t += "[assertion.keys]\n";
            for s in SERVICES.iter().filter(|s| !s.gateway) {
                t += &format!("{} = {:?}\n", s.name, keys.get("gateway", s.name));
            }
        } else {
            t += &format!("[assertion]\nkeys = [{:?}]\n", keys.get("gateway", e.name));
            for c in callers_of(e.name) {
                t += &format!(
                    "[assertion.callers.{}]\nkeys = [{:?}]\n",
                    c.name,
                    keys.get(c.name, e.name)
                );
            }
        }
    }
    for (callee, section) in e.calls {
        let url = addresses
            .get(callee)
            .with_context(|| format!("{} calls {callee}, which is not in the stack", e.name))?;
        t += &format!("[{section}]\nurl = {url:?}\n");
        if let Some(keys) = keys {
            t += &format!("key = {:?}\n", keys.get(e.name, callee));
        }
    }
    if e.gateway {
        t += "[upstreams]\n";
        for (name, url) in addresses {
            t += &format!("{name} = {url:?}\n");
        }
    }
    Ok(t)
}

/// The running stack.
pub struct Stack {
    /// Each non-gateway service's base URL, by name.
    pub services: BTreeMap<&'static str, String>,
    /// Each gateway replica's (core, product) base URLs.
    pub gateways: Vec<(String, String)>,
    /// Every service's and gateway replica's metrics URL
    /// (`http://127.0.0.1:port/metrics`), by name, in start order.
    pub metrics: Vec<(&'static str, String)>,
    runs: Vec<(&'static str, BoxFuture<'static, anyhow::Result<()>>)>,
    cancel: tokio_util::sync::CancellationToken,
    keys: Option<Keys>,
}

impl Stack {
    /// One telemetry setup for the process: the first service's format and
    /// OTLP endpoint (the first that has one), each service's log level for
    /// its own crate.
    pub fn telemetry(cfg: &StackConfig) -> anyhow::Result<TelemetrySettings> {
        let mut merged: Option<TelemetrySettings> = None;
        let mut directives = Vec::new();
        for e in SERVICES {
            let layers = Self::layers_for(e, cfg, "")?;
            let t = (e.load_telemetry)(&layers, &cfg.source)?;
            let level = t.log_level.clone();
            if level.contains('=') || level.contains(',') {
                directives.push(level);
            } else {
                directives.push(format!("{}={level}", e.target));
            }
            match &mut merged {
                None => merged = Some(t),
                Some(m) => {
                    if m.otlp_endpoint.is_empty() {
                        m.otlp_endpoint = t.otlp_endpoint;
                    }
                }
            }
        }
        let mut m = merged.context("no services")?;
        directives.insert(0, "info".to_owned());
        m.log_level = directives.join(",");
        Ok(m)
    }

    fn layers_for(e: &Entry, cfg: &StackConfig, stack: &str) -> anyhow::Result<Vec<String>> {
        let mut l = cfg.common.clone();
        l.push(stack.to_owned());
        l.extend(cfg.extra.get(e.name).cloned().unwrap_or_default());
        Ok(l)
    }

    /// Start every service in order; any failure stops what already started.
    pub async fn start(cfg: StackConfig) -> anyhow::Result<Stack> {
        let keys = (cfg.source == Source::Generated).then(Keys::generate);
        let cancel = cfg.runtime.cancel.clone();
        let mut stack = Stack {
            services: BTreeMap::new(),
            gateways: Vec::new(),
            metrics: Vec::new(),
            runs: Vec::new(),
            cancel: cancel.clone(),
            keys: None,
        };
        // Bind every service's listener first: then every address is known
        // before anything starts, and services may call each other.
        let mut listeners = BTreeMap::new();
        for e in SERVICES.iter().filter(|e| !e.gateway) {
            let http = (e.load_http)(&Self::layers_for(e, &cfg, "")?, &cfg.source)?;
            let l = std::net::TcpListener::bind(http.addr())
                .with_context(|| format!("binding {} on {}", e.name, http.addr()))?;
            let port = l.local_addr()?.port();
            stack
                .services
                .insert(e.name, format!("http://127.0.0.1:{port}"));
            listeners.insert(e.name, Listener::new(l));
        }
        for e in SERVICES {
            let replicas = if e.gateway { cfg.gateways.max(1) } else { 1 };
            for _ in 0..replicas {
                let layer = stack_layer(e, &cfg, keys.as_ref(), &stack.services)?;
                let layers = Self::layers_for(e, &cfg, &layer)?;
                let mut runtime = cfg.runtime.clone();
                runtime.listener = listeners.get(e.name).cloned().unwrap_or_default();
                let started = match (e.start)(layers, cfg.source.clone(), runtime).await {
                    Ok(s) => s,
                    Err(err) => {
                        cancel.cancel();
                        return Err(err.context(format!("starting {}", e.name)));
                    }
                };
                for s in started {
                    let url = |role: &str| {
                        s.ports
                            .iter()
                            .find(|(r, _)| *r == role)
                            .map(|(_, p)| format!("http://127.0.0.1:{p}"))
                            .unwrap_or_default()
                    };
                    if e.gateway {
                        stack.gateways.push((url("core"), url("product")));
                    }
                    stack
                        .metrics
                        .push((e.name, format!("{}/metrics", url("metrics"))));
                    tracing::info!(service = e.name, url = %url("metrics"), "metrics listener");
                    stack.runs.push((e.name, s.run));
                }
            }
        }
        stack.keys = keys;
        Ok(stack)
    }

    /// Serve `run` with the stack (a front started after it, such as the
    /// console): it stops with the stack, and its stopping stops the stack.
    pub fn serve_with(&mut self, name: &'static str, run: BoxFuture<'static, anyhow::Result<()>>) {
        self.runs.push((name, run));
    }

    /// A generated stack's key from `from` (a service or `gateway`) to `to`.
    pub fn key(&self, from: &str, to: &str) -> Option<String> {
        self.keys
            .as_ref()
            .map(|k| k.get(from, to).to_owned())
            .filter(|k| !k.is_empty())
    }

    /// Serve until cancelled. A service that stops on its own stops the others,
    /// and its error (or the fact that it stopped) is the stack's.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let cancel = self.cancel.clone();
        let mut runs: futures::stream::FuturesUnordered<_> = self
            .runs
            .into_iter()
            .map(|(name, run)| async move { (name, run.await) })
            .collect();
        let mut first_error = None;
        while let Some((name, result)) = futures::StreamExt::next(&mut runs).await {
            if !cancel.is_cancelled() {
                tracing::error!(service = name, "service stopped; stopping the stack");
                first_error = Some(match result {
                    Err(e) => e.context(format!("{name} failed")),
                    Ok(()) => anyhow::anyhow!("{name} stopped unexpectedly"),
                });
                cancel.cancel();
            } else if let Err(e) = result {
                tracing::warn!(service = name, error = ?e, "service stopped with an error");
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Serve in the background (tests): each service on a task of its own.
    pub fn spawn(self) -> BTreeMap<&'static str, String> {
        let services = self.services.clone();
        tokio::spawn(self.run_until_stopped().map(|r| {
            if let Err(e) = r {
                tracing::error!(error = ?e, "stack stopped");
            }
        }));
        services
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_names_a_service_of_the_stack() {
        for e in SERVICES {
            for (callee, _) in e.calls {
                assert!(
                    SERVICES.iter().any(|s| s.name == *callee && !s.gateway),
                    "{} calls {callee}",
                    e.name
                );
            }
        }
        assert!(SERVICES.last().is_some_and(|e| e.gateway));
    }

    #[test]
    fn the_charts_nats_authorization_is_what_the_services_describe() {
        let path = format!(
            "{}/../../{NATS_AUTHORIZATION_FILE}",
            env!("CARGO_MANIFEST_DIR")
        );
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == nats_authorization(&Default::default()),
            "{NATS_AUTHORIZATION_FILE} is not current: run \
             `cargo run -p hub-stack --bin nats-authorization > {NATS_AUTHORIZATION_FILE}`"
        );
    }

    #[test]
    fn every_nats_user_is_its_own() {
        let mut users: Vec<&str> = SERVICES.iter().map(|e| e.nats.user).collect();
        users.sort();
        let n = users.len();
        users.dedup();
        assert_eq!(users.len(), n, "two entries share a NATS user");
        assert!(!users.contains(&service_kit::nats_access::ADMIN_USER));
    }

    #[test]
    fn generated_layers_give_each_receiver_its_own_keys() {
        let keys = Keys::generate();
        let cfg = StackConfig {
            source: Source::Generated,
            common: vec![],
            extra: BTreeMap::new(),
            database_admin_url: Some("postgres://postgres@127.0.0.1:5432/x".into()),
            gateways: 1,
            runtime: Runtime::default(),
        };
        let mut addresses = BTreeMap::new();
        addresses.insert("identity", "http://127.0.0.1:1".to_owned());
        addresses.insert("kyc", "http://127.0.0.1:3".to_owned());
        addresses.insert("server_product", "http://127.0.0.1:4".to_owned());
        let id = stack_layer(&SERVICES[0], &cfg, Some(&keys), &addresses).expect("identity");
        let ob = stack_layer(&SERVICES[1], &cfg, Some(&keys), &addresses).expect("billing");
        assert!(id.contains(keys.get("gateway", "identity")));
        assert!(!id.contains(keys.get("gateway", "org_billing")));
        assert!(id.contains(keys.get("org_billing", "identity")));
        assert!(ob.contains(keys.get("org_billing", "identity")));
        assert!(ob.contains("postgres://hub_org_billing@127.0.0.1:5432/x"));
        assert!(ob.contains(keys.get("org_billing", "kyc")) && ob.contains("http://127.0.0.1:3"));
        assert!(
            ob.contains(keys.get("org_billing", "server_product"))
                && ob.contains("http://127.0.0.1:4")
        );
        assert_ne!(
            keys.get("gateway", "identity"),
            keys.get("gateway", "org_billing")
        );
    }
}
