//! Black-box tests of the stack over HTTP, through the gateway, against real
//! Postgres and NATS. Each test starts its own stack (own database, own NATS
//! prefix and streams).

// A test reports failure by panicking: unwrap and expect are how it reads
// what must be there (the workspace denies unwrap in the services).
#![allow(clippy::unwrap_used)]

mod account;
mod accounts;
mod agent;
mod agent_review;
mod api_keys;
mod audit;
mod auth;
mod bad_input;
mod billing;
mod catalog;
mod console;
mod console_passkeys;
mod console_sheets;
mod consumers;
mod contract;
mod cross_org;
mod distributors;
mod gateway;
mod invites;
mod isolation;
mod kb;
mod kyc;
mod ledger;
mod ledger_limits;
mod mail;
mod members;
mod membership_limits;
mod metrics;
mod mfa;
mod migrations;
mod nats_permissions;
mod oauth_clients;
mod oauth_token;
mod oidc_flow;
mod oidc_keys;
mod oidc_rp;
mod order_limits;
mod org_admin;
mod org_audit;
mod org_close;
mod orgs;
mod outage;
mod outbox;
mod overview;
mod passkeys;
mod personal_data;
mod pool;
mod profile;
mod properties;
mod role_matrix;
mod runs;
mod schema_agreement;
mod schemathesis;
mod server_credentials;
pub mod servers;
mod sessions;
mod staff_grants;
mod staff_read;
mod staff_users;
mod suspension;
mod tls;
mod traversal;
mod usage_charges;
mod webhooks;
