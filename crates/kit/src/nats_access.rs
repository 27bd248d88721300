//! Who may do what on NATS: one user per service, with the permissions its
//! description implies, rendered as a nats-server `authorization` block.
//!
//! A service's description lists the subjects it emits (`Service::EMITS`),
//! its durable consumers (`Service::CONSUMES`) and the subjects it reads
//! without JetStream (the gateway's invalidations); [`Access::permissions`]
//! turns that into exactly what it may publish and subscribe to:
//!
//! - publish: the subjects it emits; for each of its consumers the JetStream
//!   API calls of that consumer only (create it with its one filter subject,
//!   look it up, pull from it), its acknowledgements and its dead-letter
//!   subject; a look-up of each stream (`STREAM.INFO`: at start, and the
//!   dead-letter count on `/metrics`);
//! - subscribe: its own inbox (`_INBOX_<user>.>`, [`crate::nats::inbox_prefix`]: the
//!   replies to its requests and its consumers' deliveries, which no other
//!   user can read) and what it listens to.
//!
//! Nothing else: no stream is created, changed or deleted by a service, no
//! consumer of another service is touched, no subject another service owns
//! is published. Streams are managed by [`ADMIN_USER`] (the `migrate`
//! subcommand, `dlq replay`), which holds the JetStream API and the hub's
//! subjects. crates/stack renders the block for every service of the stack
//! (`cargo run -p hub-stack --bin nats-authorization`); the chart ships it
//! (deploy/helm/hub/files/nats-authorization.conf, checked to be current).

use crate::nats::{inbox_prefix, stream_for, Durable};
use event_contracts::{Naming, STREAMS};

/// The user that manages the streams and replays dead letters.
pub const ADMIN_USER: &str = "hub-admin";

/// What one process does on NATS (from its description).
#[derive(Debug, Clone, Copy)]
pub struct Access {
    /// Its NATS user: the service's settings name (`org-billing`).
    pub user: &'static str,
    /// Subjects it publishes (relative to the prefix; `>` allowed).
    pub emits: &'static [&'static str],
    /// Its durable consumers.
    pub consumes: &'static [Durable],
    /// Subjects it subscribes to without JetStream (core NATS).
    pub listens: &'static [&'static str],
    /// Does it use JetStream at all (streams, outbox)?
    pub jetstream: bool,
}

/// What a user may publish and subscribe to (absolute subjects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
}

/// The nats-server variable holding `user`'s password (`org-billing`:
/// `HUB_NATS_PASSWORD_ORG_BILLING`, `hub-admin`: `HUB_NATS_PASSWORD_HUB_ADMIN`):
/// the server reads it from its environment, so the configuration itself
/// holds no secret. nats-server parses the value as configuration: a
/// password starts with a letter and holds letters and digits only.
pub fn password_variable(user: &str) -> String {
    format!(
        "HUB_NATS_PASSWORD_{}",
        user.to_uppercase().replace('-', "_")
    )
}

fn stream_bases() -> impl Iterator<Item = &'static str> {
    STREAMS
        .iter()
        .map(|(b, _)| *b)
        .chain([crate::deadletter::STREAM])
}

impl Access {
    pub fn permissions(&self, naming: &Naming) -> Permissions {
        let mut publish: Vec<String> = self.emits.iter().map(|s| naming.subject(s)).collect();
        if self.jetstream {
            publish.extend(
                stream_bases().map(|b| format!("$JS.API.STREAM.INFO.{}", naming.stream(b))),
            );
        }
        for c in self.consumes {
            let stream = naming.stream(stream_for(c.subject));
            let durable = naming.durable(c.name);
            publish.extend([
                format!(
                    "$JS.API.CONSUMER.CREATE.{stream}.{durable}.{}",
                    naming.subject(c.subject)
                ),
                format!("$JS.API.CONSUMER.INFO.{stream}.{durable}"),
                format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"),
                format!("$JS.ACK.{stream}.{durable}.>"),
                naming.subject(&format!("{}.{}", crate::deadletter::SUBJECT_ROOT, c.name)),
            ]);
        }
        let mut subscribe = vec![format!("{}.>", inbox_prefix(self.user))];
        subscribe.extend(self.listens.iter().map(|s| naming.subject(s)));
        Permissions { publish, subscribe }
    }
}

/// [`ADMIN_USER`]'s: the whole JetStream API (streams, consumers, messages)
/// and every subject of the hub's streams (a dead-letter replay publishes an
/// event on its original subject).
pub fn admin_permissions(naming: &Naming) -> Permissions {
    let mut publish = vec!["$JS.API.>".to_owned()];
    publish.extend(STREAMS.iter().map(|(_, p)| naming.subject(p)));
    publish.push(naming.subject(&format!("{}.>", crate::deadletter::SUBJECT_ROOT)));
    Permissions {
        publish,
        subscribe: vec![
            format!("{}.>", inbox_prefix(ADMIN_USER)),
            // The `nats` command-line tool's default inbox.
            "_INBOX.>".to_owned(),
        ],
    }
}

/// `allow` of `list`, one subject a line; an empty list denies everything
/// (nats-server reads an empty `allow` as no restriction at all).
fn rule(kind: &str, list: &[String]) -> String {
    if list.is_empty() {
        return format!("        {kind}: {{ deny: [\">\"] }}\n");
    }
    let mut out = format!("        {kind}: {{ allow: [\n");
    for s in list {
        out += &format!("          {s:?}\n");
    }
    out += "        ] }\n";
    out
}

fn user_block(user: &str, p: &Permissions) -> String {
    format!(
        "    {{\n      user: {user:?}\n      password: ${}\n      permissions: {{\n{}{}      }}\n    }}\n",
        password_variable(user),
        rule("publish", &p.publish),
        rule("subscribe", &p.subscribe),
    )
}

/// The nats-server `authorization` block for `services` and the admin user,
/// passwords from the server's environment ([`password_variable`]).
pub fn authorization(services: &[Access], naming: &Naming) -> String {
    let mut out = String::from("authorization {\n  users = [\n");
    for a in services {
        out += &user_block(a.user, &a.permissions(naming));
    }
    out += &user_block(ADMIN_USER, &admin_permissions(naming));
    out += "  ]\n}\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBJ: &str = "core.v1.audit.recorded";
    const CONSUMERS: &[Durable] = &[Durable::raw("x-audit", SUBJ)];

    #[test]
    fn a_consumer_gets_its_own_api_calls_only() {
        let a = Access {
            user: "x",
            emits: &["core.v1.x.happened"],
            consumes: CONSUMERS,
            listens: &[],
            jetstream: true,
        };
        let naming = Naming {
            subject_prefix: "t1.".into(),
            stream_suffix: "_t1".into(),
        };
        let p = a.permissions(&naming);
        assert!(p.publish.contains(&"t1.core.v1.x.happened".to_owned()));
        assert!(p.publish.contains(
            &"$JS.API.CONSUMER.CREATE.CORE_t1.x-audit_t1.t1.core.v1.audit.recorded".to_owned()
        ));
        assert!(p
            .publish
            .contains(&"$JS.ACK.CORE_t1.x-audit_t1.>".to_owned()));
        assert!(p.publish.contains(&"t1.dlq.x-audit".to_owned()));
        assert!(!p.publish.iter().any(|s| s.contains("STREAM.CREATE")
            || s.contains("STREAM.DELETE")
            || s == "$JS.API.>"));
        assert_eq!(p.subscribe, vec!["_INBOX_x.>".to_owned()]);
    }

    #[test]
    fn passwords_are_variables_of_the_server() {
        assert_eq!(
            password_variable("org-billing"),
            "HUB_NATS_PASSWORD_ORG_BILLING"
        );
        assert_eq!(password_variable(ADMIN_USER), "HUB_NATS_PASSWORD_HUB_ADMIN");
        let quiet = Access {
            user: "quiet",
            emits: &[],
            consumes: &[],
            listens: &[],
            jetstream: false,
        };
        let conf = authorization(&[quiet], &Naming::default());
        assert!(
            conf.contains("password: $HUB_NATS_PASSWORD_HUB_ADMIN\n"),
            "{conf}"
        );
        // Publishing nothing is a deny, never an empty (unrestricted) allow.
        assert!(conf.contains("publish: { deny: [\">\"] }"), "{conf}");
    }
}
