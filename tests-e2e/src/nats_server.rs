//! A `nats-server` of one test's own (the binary scripts/deps.sh installs),
//! with JetStream, on a free local port: for TLS, and for the per-service
//! NATS users and their permissions ([`AuthorizedNats`]).

use service_kit::settings::NatsSettings;
use std::{collections::BTreeMap, path::PathBuf, process::Child};

/// A running nats-server; killed (and its store removed) when dropped.
#[derive(Debug)]
pub struct NatsServer {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free local port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl NatsServer {
    /// Start one listening on 127.0.0.1 with JetStream and `conf` (more of
    /// its configuration: tls, authorization), `env` in its environment;
    /// returns once it accepts connections.
    pub fn start(conf: &str, env: &[(String, String)]) -> NatsServer {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("hub-nats-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("store")).expect("nats store dir");
        let file = dir.join("nats.conf");
        std::fs::write(
            &file,
            format!(
                "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: {:?} }}\n{conf}",
                dir.join("store").to_string_lossy()
            ),
        )
        .expect("nats.conf");
        let bin = ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("nats-server");
        let log = dir.join("nats.log");
        let child = std::process::Command::new(bin)
            .arg("-c")
            .arg(&file)
            .arg("-l")
            .arg(&log)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).expect("stderr file"))
            .spawn()
            .expect("nats-server starts (scripts/deps.sh installs it)");
        let mut server = NatsServer { child, dir, port };
        for _ in 0..200 {
            if let Ok(Some(status)) = server.child.try_wait() {
                let err = std::fs::read_to_string(server.dir.join("stderr")).unwrap_or_default();
                panic!("nats-server exited ({status}): {err}");
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("nats-server did not listen on {port}: {log}");
    }
}

/// A nats-server with the hub's authorization (every service's user and
/// permissions, [`hub_stack::nats_authorization`], as the chart ships it)
/// for one stack's subject prefix and stream suffix, each user with a fresh
/// password given to the server through its environment, as production does
/// (nats-server parses such a value as configuration: a password starts
/// with a letter and holds letters and digits only).
#[derive(Debug)]
pub struct AuthorizedNats {
    pub url: String,
    pub naming: event_contracts::Naming,
    passwords: BTreeMap<String, String>,
    _server: NatsServer,
}

impl AuthorizedNats {
    pub fn start() -> AuthorizedNats {
        let tag = crate::runs::stack_tag();
        let naming = event_contracts::Naming {
            subject_prefix: format!("t{tag}."),
            stream_suffix: format!("_t{tag}"),
        };
        let conf = hub_stack::nats_authorization(&naming);
        let users = hub_stack::SERVICES
            .iter()
            .map(|e| e.nats.user)
            .chain([service_kit::nats_access::ADMIN_USER]);
        let passwords: BTreeMap<String, String> = users
            .map(|u| (u.to_owned(), format!("p{}", uuid::Uuid::new_v4().simple())))
            .collect();
        let env: Vec<(String, String)> = passwords
            .iter()
            .map(|(u, p)| (service_kit::nats_access::password_variable(u), p.clone()))
            .collect();
        let server = NatsServer::start(&conf, &env);
        AuthorizedNats {
            url: format!("nats://127.0.0.1:{}", server.port),
            naming,
            passwords,
            _server: server,
        }
    }

    /// The `[nats]` settings of `user` (its password; this server's naming).
    pub fn toml(&self, user: &str) -> String {
        format!(
            "[nats]\nurl = {:?}\nuser = {user:?}\npassword = {:?}\nsubject_prefix = {:?}\n\
             stream_suffix = {:?}\nmemory_storage = true\nstream_max_age_secs = 3600\n",
            self.url,
            self.passwords.get(user).cloned().unwrap_or_default(),
            self.naming.subject_prefix,
            self.naming.stream_suffix,
        )
    }

    /// [`toml`](Self::toml) as settings.
    pub fn settings(&self, user: &str) -> NatsSettings {
        #[derive(serde::Deserialize)]
        struct Only {
            nats: NatsSettings,
        }
        service_kit::settings::from_toml::<Only>(&[&self.toml(user)])
            .expect("nats settings")
            .nats
    }
}
