//! The whole-stack harness: every service in one process on random ports, each
//! stack with its own Postgres database and its own NATS subject prefix and
//! stream names, so tests run in parallel and never see each other's data.
//! Both are named after the test process's run ([`runs`]) and removed when a
//! stack whose test passed is dropped. `TEST_LOG=1` shows the services' logs.

pub mod nats_server;
pub mod runs;
pub mod scratch;
pub mod tls;

use anyhow::Context;
use serde_json::Value;
use service_kit::{service::Service, settings::Layered};
use sqlx::{Connection, Executor, PgConnection, PgPool};
use std::{collections::BTreeMap, time::Duration};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub mod relay;

/// Where the tests find Postgres (an admin connection that may create databases).
pub fn admin_database_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub fn nats_url() -> String {
    std::env::var("TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// Databases made by the harness start with this (`hubtest_<run>_<uuid>`,
/// see [`runs::database_name`]).
pub const TEST_DB_PREFIX: &str = "hubtest_";

#[derive(Clone, Debug)]
pub struct StackOptions {
    /// How many core gateway replicas (each also serves a product host).
    pub gateways: usize,
    /// Extra TOML for identity's settings.
    pub identity_toml: String,
    /// Extra TOML for every gateway's settings.
    pub gateway_toml: String,
    /// Extra TOML for org-billing's settings.
    pub org_billing_toml: String,
    /// Extra TOML for kyc's settings.
    pub kyc_toml: String,
    /// Extra TOML for server-product's settings.
    pub server_product_toml: String,
    /// Extra TOML for webhook-dispatcher's settings.
    pub webhook_toml: String,
    /// Extra TOML for the agent's settings.
    pub agent_toml: String,
    /// Connect org-billing (its role) to Postgres through this local port (a
    /// relay a test controls) instead of directly.
    pub org_billing_database_port: Option<u16>,
    /// Connect these services (by their settings name: `server_product`,
    /// `org_billing`, ...) to Postgres through the given local port (a relay
    /// a test controls, see [`relay::Relay`]) instead of directly.
    pub database_ports: std::collections::BTreeMap<String, u16>,
    /// Query parameters for every database URL of the stack (the services'
    /// roles and the administrator's), e.g. `sslmode=require`.
    pub database_params: String,
    /// The dev seed (`seed.distributors`, `seed.skus`: the demo catalog).
    /// Off, the stack starts like production: no distributors, no SKUs.
    pub dev_seed: bool,
    /// A NATS server of the test's own with the hub's authorization: the
    /// streams are made by its admin user (as the `migrate` Job does), every
    /// service connects as its own user, the harness's client as the admin.
    /// None: the shared NATS of [`nats_url`], no users.
    pub nats: Option<std::sync::Arc<nats_server::AuthorizedNats>>,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            gateways: 1,
            identity_toml: String::new(),
            gateway_toml: String::new(),
            org_billing_toml: String::new(),
            kyc_toml: String::new(),
            server_product_toml: String::new(),
            webhook_toml: String::new(),
            agent_toml: String::new(),
            org_billing_database_port: None,
            database_ports: Default::default(),
            database_params: String::new(),
            dev_seed: true,
            nats: None,
        }
    }
}

pub struct Gateway {
    pub core: String,
    pub product: String,
}

pub struct TestStack {
    pub gateways: Vec<Gateway>,
    /// Each service's own address by its name in assertions (see
    /// [`service_url`](TestStack::service_url)).
    services: BTreeMap<&'static str, String>,
    /// Each service's layer of this harness, with the addresses of what it
    /// calls and its keys there (for [`settings`](TestStack::settings)).
    own: BTreeMap<&'static str, String>,
    pub database_url: String,
    /// A pool on the stack's database as its administrator, search_path
    /// `identity,org_billing`.
    pub db: PgPool,
    pub nats: async_nats::Client,
    pub naming: event_contracts::Naming,
    /// The stack's clock: moving it moves every service's notion of now.
    pub clock: service_kit::Clock,
    /// The gateway's key for identity (tests forge gateway assertions with it).
    pub assertion_key: String,
    /// org-billing's caller key at identity.
    pub billing_to_identity_key: String,
    /// The agent's caller key at org-billing.
    pub agent_to_billing_key: String,
    gateway_keys: std::collections::BTreeMap<String, String>,
    /// The layer every service got (for [`settings`](TestStack::settings)).
    common: String,
    pub http: reqwest::Client,
    cancel: CancellationToken,
    /// The database's name (dropped with the stack when its test passed).
    database_name: String,
    /// Every service's and gateway replica's `/metrics` URL, by name.
    pub metrics: Vec<(&'static str, String)>,
    /// The stack's own NATS server, if it has one (kept for its lifetime).
    _nats: Option<std::sync::Arc<nats_server::AuthorizedNats>>,
}

impl Drop for TestStack {
    /// Stop the services; after a passed test (not while a panic unwinds) drop
    /// the stack's database and streams too.
    fn drop(&mut self) {
        self.cancel.cancel();
        runs::discard_on_pass(
            self.database_name.clone(),
            self.naming.stream_suffix.clone(),
        );
    }
}

/// A response, decoded: status and JSON body (Null when the body is not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Resp {
    /// The `error` message, or "" when the body has none (a success compared
    /// with a refusal in one assertion shows both).
    pub fn error(&self) -> &str {
        self.text("error")
    }

    /// The string at `path` (a key, or a JSON pointer such as "/0/id"); a missing
    /// or mistyped field panics with the status and the whole body, never reads as "".
    #[track_caller]
    pub fn text(&self, path: &str) -> &str {
        self.field(path)
            .as_str()
            .unwrap_or_else(|| self.missing(path, "a string"))
    }

    /// The integer at `path`, or a panic that shows the response.
    #[track_caller]
    pub fn int(&self, path: &str) -> i64 {
        self.field(path)
            .as_i64()
            .unwrap_or_else(|| self.missing(path, "an integer"))
    }

    /// The boolean at `path`, or a panic that shows the response.
    #[track_caller]
    pub fn boolean(&self, path: &str) -> bool {
        self.field(path)
            .as_bool()
            .unwrap_or_else(|| self.missing(path, "a boolean"))
    }

    /// The array at `path` ("" for the body itself), or a panic that shows the response.
    #[track_caller]
    pub fn array(&self, path: &str) -> Vec<Value> {
        self.field(path)
            .as_array()
            .cloned()
            .unwrap_or_else(|| self.missing(path, "an array"))
    }

    fn field(&self, path: &str) -> &Value {
        pointer(&self.body, path)
    }

    #[track_caller]
    fn missing(&self, path: &str, kind: &str) -> ! {
        panic!(
            "expected {kind} at {path:?} of the response {}: {}",
            self.status, self.body
        )
    }
}

/// Reads of a JSON value that fail loudly: a missing or mistyped field panics
/// with the whole value instead of reading as "", 0 or an empty list. `path` is
/// a key, or a JSON pointer when it starts with '/' ("" is the value itself).
pub trait Json {
    #[track_caller]
    fn text(&self, path: &str) -> &str;
    #[track_caller]
    fn int(&self, path: &str) -> i64;
    #[track_caller]
    fn boolean(&self, path: &str) -> bool;
    #[track_caller]
    fn array(&self, path: &str) -> Vec<Value>;
}

impl Json for Value {
    fn text(&self, path: &str) -> &str {
        pointer(self, path)
            .as_str()
            .unwrap_or_else(|| missing(self, path, "a string"))
    }
    fn int(&self, path: &str) -> i64 {
        pointer(self, path)
            .as_i64()
            .unwrap_or_else(|| missing(self, path, "an integer"))
    }
    fn boolean(&self, path: &str) -> bool {
        pointer(self, path)
            .as_bool()
            .unwrap_or_else(|| missing(self, path, "a boolean"))
    }
    fn array(&self, path: &str) -> Vec<Value> {
        pointer(self, path)
            .as_array()
            .cloned()
            .unwrap_or_else(|| missing(self, path, "an array"))
    }
}

fn pointer<'a>(v: &'a Value, path: &str) -> &'a Value {
    if path.is_empty() || path.starts_with('/') {
        v.pointer(path).unwrap_or(&Value::Null)
    } else {
        &v[path]
    }
}

#[track_caller]
fn missing(v: &Value, path: &str, kind: &str) -> ! {
    panic!("expected {kind} at {path:?} of {v}")
}

/// A new database of this run; returns its name and URL.
async fn create_database(params: &str) -> anyhow::Result<(String, String)> {
    let admin = admin_database_url();
    let name = runs::database_name();
    let mut conn = PgConnection::connect(&admin)
        .await
        .context("connecting to the admin database")?;
    conn.execute(format!("CREATE DATABASE \"{name}\"").as_str())
        .await?;
    conn.close().await?;
    // The administrator URL's own parameters (sslmode, ...) are kept; the
    // stack's are added.
    let mut url = reqwest::Url::parse(&admin).context("parsing TEST_DATABASE_URL")?;
    url.set_path(&format!("/{name}"));
    let query = [url.query().unwrap_or(""), params]
        .into_iter()
        .filter(|q| !q.is_empty())
        .collect::<Vec<_>>()
        .join("&");
    url.set_query((!query.is_empty()).then_some(query.as_str()));
    Ok((name, url.to_string()))
}

impl TestStack {
    pub async fn spawn() -> TestStack {
        Self::spawn_with(StackOptions::default()).await
    }

    pub async fn spawn_with(opts: StackOptions) -> TestStack {
        match Self::try_spawn(opts).await {
            Ok(s) => s,
            Err(e) => panic!("cannot start the test stack: {e:?}"),
        }
    }

    async fn try_spawn(opts: StackOptions) -> anyhow::Result<TestStack> {
        service_kit::telemetry::init_for_tests();
        let (database_name, database_url) = create_database(&opts.database_params).await?;
        let naming = match &opts.nats {
            Some(n) => n.naming.clone(),
            None => {
                let tag = runs::stack_tag();
                event_contracts::Naming {
                    subject_prefix: format!("t{tag}."),
                    stream_suffix: format!("_t{tag}"),
                }
            }
        };
        let nats_url = opts.nats.as_ref().map_or_else(nats_url, |n| n.url.clone());
        let cancel = CancellationToken::new();
        let clock = service_kit::Clock::system();
        let common = format!(
            r#"
[http]
host = "127.0.0.1"
port = 0
metrics_port = 0
metrics_host = "127.0.0.1"
workers = 1
[product_http]
host = "127.0.0.1"
port = 0
workers = 1
[database]
max_connections = 8
migrate_at_start = true
[nats]
url = "{nats}"
subject_prefix = "{prefix}"
stream_suffix = "{suffix}"
memory_storage = true
stream_max_age_secs = 3600
[telemetry]
log_format = "pretty"
"#,
            nats = nats_url,
            prefix = naming.subject_prefix,
            suffix = naming.stream_suffix,
        );
        // org-billing seals legal identities with a fresh key of its own; the
        // others share one fresh key per stack.
        let fresh_key = || {
            base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                [Uuid::new_v4().into_bytes(), Uuid::new_v4().into_bytes()].concat(),
            )
        };
        let (billing_sealing_key, sealing_key) = (fresh_key(), fresh_key());
        let seed = opts.dev_seed;
        // Each service's layer of this harness: its stack instance and another
        // instance of it ([`TestStack::settings`]) both get it.
        let mut own: BTreeMap<&'static str, String> = BTreeMap::from([
            // identity seals TOTP secrets (and queued mail) with the shared key.
            (
                identity::SERVICE,
                format!(
                    "[auth]\necho_dev_token = true\nstaff_emails = [\"staff@example.com\"]\n\
                     [sealing]\nkeys = [\"t1:{sealing_key}\"]\n"
                ),
            ),
            (
                org_billing::SERVICE,
                format!(
                    "[seed]\ndistributors = {seed}\n[sealing]\nkeys = [\"t1:{billing_sealing_key}\"]\nsearch_key = \"t1-{billing_sealing_key}\"\n"
                ),
            ),
            // The sweep only when a test runs it.
            (
                kyc::SERVICE,
                format!(
                    "[sealing]\nkeys = [\"t1:{sealing_key}\"]\n[retention]\nsweep_interval_secs = 86400\n"
                ),
            ),
            // Sandbox servers are ready in 300 ms here.
            (
                server_product::SERVICE,
                format!(
                    "[sealing]\nkeys = [\"t1:{sealing_key}\"]\n[seed]\nskus = {seed}\n\
                     [provider]\nsandbox_delay_ms = 300\npoll_ms = 50\n"
                ),
            ),
            // Local receivers (loopback allowed), quick retries.
            (
                webhook_dispatcher::SERVICE,
                format!(
                    "[sealing]\nkeys = [\"t1:{sealing_key}\"]\n[ssrf]\nallow_loopback = true\n\
                     [delivery]\nbackoff_ms = [200, 400]\ntimeout_ms = 2000\nlease_ms = 5000\n"
                ),
            ),
            // Scheduled curation only where a test runs it (its own replicas).
            (
                agent::SERVICE,
                "[curation]\ninterval_secs = 86400\n".to_owned(),
            ),
        ]);
        let mut database_ports = opts.database_ports.clone();
        if let Some(port) = opts.org_billing_database_port {
            database_ports.insert("org_billing".to_owned(), port);
        }
        // The service's role, through the test's relay.
        let relayed = |service: &str| -> anyhow::Result<Option<String>> {
            let Some(port) = database_ports.get(service) else {
                return Ok(None);
            };
            let mut url = reqwest::Url::parse(&hub_stack::role_url(
                &database_url,
                &format!("hub_{service}"),
            )?)?;
            url.set_port(Some(*port))
                .map_err(|_| anyhow::anyhow!("cannot set a port"))?;
            Ok(Some(format!("[database]\nurl = {:?}\n", url.as_str())))
        };
        let mut tests_toml = BTreeMap::from([
            (identity::SERVICE, opts.identity_toml),
            (org_billing::SERVICE, opts.org_billing_toml),
            (kyc::SERVICE, opts.kyc_toml),
            (server_product::SERVICE, opts.server_product_toml),
            (webhook_dispatcher::SERVICE, opts.webhook_toml),
            (agent::SERVICE, opts.agent_toml),
        ]);
        let mut extra = BTreeMap::new();
        for e in hub_stack::SERVICES.iter().filter(|e| !e.gateway) {
            let mut layers = vec![
                own.get(e.name).cloned().unwrap_or_default(),
                "[jobs]\noutbox_poll_ms = 100\n".to_owned(),
            ];
            layers.extend(relayed(e.name)?);
            layers.extend(tests_toml.remove(e.name));
            extra.insert(e.name.to_owned(), layers);
        }
        extra.insert(
            "gateway".to_owned(),
            vec![
                "[proxy]\ntrusted_proxies = [\"127.0.0.0/8\", \"::1/128\"]\n".to_owned(),
                opts.gateway_toml,
            ],
        );
        // Each service as its own NATS user; the streams made first by the
        // admin user, as the chart's migration Jobs do.
        let admin_nats = match &opts.nats {
            Some(n) => {
                for e in hub_stack::SERVICES {
                    extra
                        .entry(e.name.to_owned())
                        .or_default()
                        .push(n.toml(e.nats.user));
                }
                let admin = n.settings(service_kit::nats_access::ADMIN_USER);
                let client = service_kit::nats::connect(&admin, "tests-e2e").await?;
                service_kit::nats::manage_streams(
                    &async_nats::jetstream::new(client.clone()),
                    &admin,
                )
                .await?;
                Some(client)
            }
            None => None,
        };
        let stack = hub_stack::Stack::start(hub_stack::StackConfig {
            source: hub_stack::Source::Generated,
            common: vec![common.clone()],
            extra,
            database_admin_url: Some(database_url.clone()),
            gateways: opts.gateways,
            // The harness is a dev profile (it echoes sign-in tokens).
            runtime: service_kit::Runtime {
                cancel: cancel.clone(),
                clock: clock.clone(),
                listener: Default::default(),
                dev: true,
            },
        })
        .await?;
        let key = |from: &str, to: &str| {
            stack
                .key(from, to)
                .with_context(|| format!("the stack made no {from} -> {to} key"))
        };
        let assertion_key = key("gateway", "identity")?;
        let billing_to_identity_key = key("org_billing", "identity")?;
        let agent_to_billing_key = key("agent", "org_billing")?;
        let gateway_keys = hub_stack::SERVICES
            .iter()
            .filter_map(|e| Some((e.name.to_owned(), stack.key("gateway", e.name)?)))
            .collect();
        let gateways = stack
            .gateways
            .iter()
            .map(|(core, product)| Gateway {
                core: core.clone(),
                product: product.clone(),
            })
            .collect();
        // Another instance of a service also gets the addresses of the
        // services it calls and its caller keys there.
        for e in hub_stack::SERVICES {
            for (callee, section) in e.calls {
                let url = stack
                    .services
                    .get(callee)
                    .with_context(|| format!("no {callee} in the stack"))?;
                *own.entry(e.name).or_default() += &format!(
                    "[{section}]\nurl = {url:?}\nkey = {:?}\n",
                    key(e.name, callee)?
                );
            }
        }
        let metrics = stack.metrics.clone();
        let services = stack.spawn();

        let db = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect_with(
                database_url
                    .parse::<sqlx::postgres::PgConnectOptions>()?
                    .options([(
                        "search_path",
                        "identity,org_billing,kyc,server_product,webhook_dispatcher,agent",
                    )]),
            )
            .await?;
        let nats = match admin_nats {
            Some(c) => c,
            None => async_nats::connect(nats_url.as_str()).await?,
        };
        let http = service_kit::tls::http_client(&Default::default())?
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(TestStack {
            gateways,
            services,
            own,
            database_url,
            db,
            nats,
            naming,
            clock,
            assertion_key,
            billing_to_identity_key,
            agent_to_billing_key,
            gateway_keys,
            common,
            http,
            cancel,
            database_name,
            metrics,
            _nats: opts.nats,
        })
    }

    /// Settings for another instance of `S` (a restart, a second replica,
    /// its `migrate`) on this stack's database, NATS and services, plus
    /// `extra` TOML: its own role, an assertion key of its own, the harness's
    /// layer for it, the addresses of the services it calls and its keys there.
    pub fn settings<S: Service>(&self, extra: &str) -> S::Settings {
        let role = hub_stack::role_url(&self.database_url, &format!("hub_{}", S::SCHEMA))
            .expect("role url");
        let replica = format!(
            "[database]\nurl = {role:?}\nadmin_url = {:?}\n[assertion]\nkeys = [\"another-replica-key-0123\"]\n",
            self.database_url
        );
        let own = self.own.get(S::AUDIENCE).map_or("", String::as_str);
        S::Settings::from_layers(&[&self.common, &replica, own, extra]).expect("settings")
    }

    /// The base URL of a service of the stack by its name in assertions
    /// (`org_billing`), for calling it directly.
    pub fn service_url(&self, audience: &str) -> &str {
        self.services
            .get(audience)
            .unwrap_or_else(|| panic!("no service {audience} in the stack"))
    }

    /// The metrics URL of service `name` (`gateway`: its first replica).
    pub fn metrics_url(&self, name: &str) -> &str {
        self.metrics
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, u)| u.as_str())
            .unwrap_or_else(|| panic!("no metrics listener for {name}"))
    }

    /// The `/metrics` text of service `name` (`gateway`: its first replica).
    pub async fn scrape(&self, name: &str) -> String {
        let r = self
            .http
            .get(self.metrics_url(name))
            .send()
            .await
            .expect("metrics");
        r.text().await.expect("a metrics body")
    }

    /// The gateway's assertion key for `service` (only the stack knows it).
    pub fn gateway_key(&self, service: &str) -> String {
        self.gateway_keys
            .get(service)
            .cloned()
            .unwrap_or_else(|| panic!("the gateway has no assertion key for {service}"))
    }

    /// The first core gateway's base URL.
    /// The stack's database (`hubtest_<run>_<uuid>`).
    pub fn database_name(&self) -> &str {
        &self.database_name
    }

    pub fn core(&self) -> &str {
        &self.gateways[0].core
    }

    pub fn product(&self) -> &str {
        &self.gateways[0].product
    }

    /// Send a request; `token` is the bearer, `body` JSON.
    pub async fn call(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut rb = self.http.request(m, url);
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: reading the body: {e}"));
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            body,
            headers,
        }
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Resp {
        self.call("GET", &format!("{}{path}", self.core()), token, None, &[])
            .await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> Resp {
        self.call(
            "POST",
            &format!("{}{path}", self.core()),
            token,
            Some(body),
            &[],
        )
        .await
    }

    pub async fn patch(&self, path: &str, token: Option<&str>, body: Value) -> Resp {
        self.call(
            "PATCH",
            &format!("{}{path}", self.core()),
            token,
            Some(body),
            &[],
        )
        .await
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> Resp {
        self.call(
            "DELETE",
            &format!("{}{path}", self.core()),
            token,
            None,
            &[],
        )
        .await
    }

    /// Ask for a magic link (from `ip`) and return the echoed dev token.
    pub async fn request_link_from(&self, email: &str, ip: &str) -> Resp {
        self.call(
            "POST",
            &format!("{}/v1/auth/request-link", self.core()),
            None,
            Some(serde_json::json!({ "email": email })),
            &[("x-forwarded-for", ip)],
        )
        .await
    }

    pub async fn verify_from(&self, token: &str, ip: &str) -> Resp {
        self.call(
            "POST",
            &format!("{}/v1/auth/verify", self.core()),
            None,
            Some(serde_json::json!({ "token": token })),
            &[("x-forwarded-for", ip)],
        )
        .await
    }

    /// The OpenID Provider's JWK Set once it holds a key (the first is made
    /// at start).
    pub async fn published_keys(&self) -> Value {
        eventually(Duration::from_secs(20), || async {
            let r = self.get("/.well-known/jwks.json", None).await;
            r.body["keys"]
                .as_array()
                .is_some_and(|k| !k.is_empty())
                .then_some(r.body)
        })
        .await
        .expect("a published signing key")
    }

    /// End every Postgres connection to this stack's database opened under
    /// `application_name` `app` (a service's pool, a writer's own
    /// connection), as a restart or a network cut would; how many it ended.
    pub async fn end_connections(&self, app: &str) -> i64 {
        sqlx::query_scalar!(
            r#"SELECT count(*) AS "v!" FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = $1) q"#,
            app,
        )
        .fetch_one(&self.db)
        .await
        .expect("terminate")
    }

    /// Make the session of `token` an hour old (identity reads a session's
    /// age from the database's clock, not the stack's).
    pub async fn age_session(&self, token: &str) {
        let aged = sqlx::query!(
            "UPDATE identity.sessions SET created_at = now() - interval '1 hour' \
             WHERE token_hash = $1",
            identity::tokens::hash(token),
        )
        .execute(&self.db)
        .await
        .expect("an older session");
        assert_eq!(aged.rows_affected(), 1, "one session of that token");
    }

    /// Sign in through the gateway from a fresh client IP; returns the session token.
    pub async fn sign_in(&self, email: &str) -> String {
        let ip = random_ip();
        let link = self.request_link_from(email, &ip).await;
        assert_eq!(link.status, 200, "request-link: {:?}", link.body);
        let dev = link.text("dev_token").to_owned();
        let v = self.verify_from(&dev, &ip).await;
        assert_eq!(v.status, 200, "verify: {:?}", v.body);
        v.text("session_token").to_owned()
    }

    /// Publish an event on this stack's NATS naming, as another service would.
    pub async fn publish<T: event_contracts::Event>(&self, event: T) -> Uuid {
        let env = event_contracts::Envelope::new(event);
        let js = async_nats::jetstream::new(self.nats.clone());
        let ack = js
            .publish(
                self.naming.subject(T::SUBJECT),
                serde_json::to_vec(&env).expect("JSON").into(),
            )
            .await
            .unwrap_or_else(|e| panic!("publish: {e}"));
        ack.await.unwrap_or_else(|e| panic!("publish ack: {e}"));
        env.id
    }
}

/// A random documentation-range IPv4 address (TEST-NET-3), so that tests do not
/// share rate-limit buckets unless they mean to.
pub fn random_ip() -> String {
    let b = Uuid::new_v4().into_bytes();
    format!("203.0.{}.{}", b[0], b[1].max(1))
}

/// Poll `f` until it returns Some, for at most `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl TestStack {
    /// Run one SQL statement on the stack's database (schema identity): a
    /// runtime string, for tests that break or arrange state by hand (each
    /// caller passes a literal; the services' own queries are all checked).
    pub async fn db_exec(&self, sql: &str) {
        sqlx::query(sql)
            .execute(&self.db)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Wait (at most 20 s, else panic) until the durable consumer
    /// `durable_base` (e.g. `identity-audit`) on the stack's `stream_base`
    /// stream (`CORE`, `PRODUCT`) has handled everything published to it so
    /// far: nothing left to deliver, nothing delivered and not yet acknowledged
    /// (a consumer acknowledges after its handler committed, or after moving the
    /// event to the DLQ). The positive marker to wait for before asserting that
    /// an event had no effect (a redelivery stored once, nothing retried).
    pub async fn consumer_caught_up(&self, stream_base: &str, durable_base: &str) {
        let js = async_nats::jetstream::new(self.nats.clone());
        let (stream, durable) = (
            self.naming.stream(stream_base),
            self.naming.durable(durable_base),
        );
        let caught_up = eventually(Duration::from_secs(20), || async {
            let s = js.get_stream(&stream).await.ok()?;
            let mut c: async_nats::jetstream::consumer::PullConsumer =
                s.get_consumer(&durable).await.ok()?;
            let info = c.info().await.ok()?;
            (info.num_pending == 0 && info.num_ack_pending == 0).then_some(())
        })
        .await;
        assert!(
            caught_up.is_some(),
            "the consumer {durable} on {stream} did not handle everything within 20 s"
        );
    }

    /// A pool like identity's own (for calling its jobs directly).
    pub async fn identity_pool(&self) -> PgPool {
        self.db.clone()
    }
}

/// Organization helpers (issue 3).
impl TestStack {
    pub async fn create_org(&self, token: &str, name: &str, country: &str) -> Resp {
        self.post(
            "/v1/organizations",
            Some(token),
            serde_json::json!({"name": name, "legal_type": "corporate", "country": country}),
        )
        .await
    }

    /// Create an organization owned by a new user; returns (owner token, org id).
    pub async fn org_with_owner(&self, owner_email: &str) -> (String, String) {
        let owner = self.sign_in(owner_email).await;
        let r = self.create_org(&owner, "Acme", "TR").await;
        assert_eq!(r.status, 201, "create org: {:?}", r.body);
        let id = r.text("id").to_owned();
        (owner, id)
    }

    pub async fn add_member(&self, admin: &str, org: &str, email: &str, role: &str) -> Resp {
        self.post(
            &format!("/v1/organizations/{org}/members"),
            Some(admin),
            serde_json::json!({"email": email, "role": role}),
        )
        .await
    }

    /// A new user with `role` in `org`; returns their session token.
    pub async fn member(&self, owner: &str, org: &str, role: &str) -> String {
        let email = format!("{role}-{}@example.com", Uuid::new_v4().simple());
        let r = self.add_member(owner, org, &email, role).await;
        assert_eq!(r.status, 200, "add member: {:?}", r.body);
        self.sign_in(&email).await
    }

    pub async fn create_key(&self, admin: &str, org: &str, role: Option<&str>) -> Resp {
        let mut body = serde_json::json!({"name": "ci key"});
        if let Some(r) = role {
            body["role"] = serde_json::json!(r);
        }
        self.post(
            &format!("/v1/organizations/{org}/api-keys"),
            Some(admin),
            body,
        )
        .await
    }

    /// Credit (or correct) a wallet as `token` (staff).
    pub async fn credit(&self, token: &str, org: &str, amount_minor: i64) -> Resp {
        self.post(
            &format!("/v1/organizations/{org}/wallet/credit"),
            Some(token),
            serde_json::json!({ "amount_minor": amount_minor }),
        )
        .await
    }

    /// Grant AI tokens as `token` (staff).
    pub async fn grant(&self, token: &str, org: &str, amount: i64) -> Resp {
        self.post(
            &format!("/v1/organizations/{org}/tokens/grant"),
            Some(token),
            serde_json::json!({ "amount": amount }),
        )
        .await
    }

    /// Call org-billing's internal routes as the agent does (signed with the
    /// agent's caller key), for the caller behind `token`.
    pub async fn internal_call(
        &self,
        base: &str,
        method: &str,
        path: &str,
        token: &str,
        body: Value,
    ) -> Resp {
        let me = self.get("/v1/auth/me", Some(token)).await;
        assert_eq!(me.status, 200);
        let identity: hub_domain::Identity = serde_json::from_value(me.body).expect("an Identity");
        let minter = service_kit::assertion::Minter::new(
            "agent",
            "org_billing",
            &secrecy::SecretString::from(self.agent_to_billing_key.clone()),
        )
        .expect("minter");
        let bytes = body.to_string();
        let (payload, sig) = minter.sign(
            Some(identity),
            Some(hub_domain::Credential {
                kind: hub_domain::CredentialKind::Session,
                id: Uuid::new_v4(),
            }),
            false,
            &service_kit::assertion::RequestFacts {
                method,
                path_and_query: path,
                body: bytes.as_bytes(),
                idempotency_key: None,
                ip: "127.0.0.1",
                request_id: "internal-test",
                deadline_ms: None,
            },
        );
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let resp = self
            .http
            .request(m, format!("{base}{path}"))
            .header("x-hub-assertion", payload)
            .header("x-hub-signature", sig)
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: reading the body: {e}"));
        Resp {
            status,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            headers,
        }
    }
}

/// A stand-in HTTP server on a free local port (an upstream not built yet, an
/// OTLP collector, a model provider): `handle` answers every request. Returns
/// `http://127.0.0.1:port`.
///
/// Handlers may block (a slow answer sleeps on its worker thread), so the
/// server has [`STAND_IN_WORKERS`] workers: a request that comes while another
/// is held is answered at once, not after it (with one worker a provider's
/// quick 500 queued behind a slow answer was a timeout).
pub fn stand_in<F>(handle: F) -> String
where
    F: Fn(&actix_web::HttpRequest, actix_web::web::Bytes) -> actix_web::HttpResponse
        + Clone
        + Send
        + 'static,
{
    use actix_web::{web, App, HttpRequest, HttpServer};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = HttpServer::new(move || {
        let handle = handle.clone();
        App::new()
            .app_data(web::PayloadConfig::new(16 << 20))
            .default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
                let response = handle(&req, body);
                async move { response }
            }))
    })
    .workers(STAND_IN_WORKERS)
    .listen(listener)
    .expect("listen")
    .run();
    tokio::spawn(server);
    format!("http://127.0.0.1:{port}")
}

/// Worker threads of a [`stand_in`]: more than the requests any test holds at
/// once.
pub const STAND_IN_WORKERS: usize = 8;

/// Send one HTTP/1.1 request with its target exactly as given, byte for byte
/// (what `curl --path-as-is` sends: no dot-segment resolution, no
/// re-encoding, backslashes kept), to `base` (`http://host:port`).
pub async fn raw_request(
    base: &str,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .unwrap_or_else(|e| panic!("connect {authority}: {e}"));
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out).await.expect("write request");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .expect("response within 30 s")
        .expect("read response");
    parse_raw_response(&raw)
}

fn parse_raw_response(raw: &[u8]) -> Resp {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let mut headers = reqwest::header::HeaderMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()),
                reqwest::header::HeaderValue::from_str(v.trim()),
            ) {
                headers.append(k, v);
            }
        }
    }
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .get("transfer-encoding")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        let mut decoded = Vec::new();
        let mut rest = &body[..];
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&rest[..eol])
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim(),
                16,
            )
            .unwrap_or(0);
            if size == 0 || rest.len() < eol + 2 + size {
                break;
            }
            decoded.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
            rest = &rest[(eol + 4 + size).min(rest.len())..];
        }
        body = decoded;
    }
    Resp {
        status,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        headers,
    }
}

/// The value of the sample whose name and labels are exactly `series` in a
/// Prometheus text exposition (`name{a="x",b="y"}`, as it is written there).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
