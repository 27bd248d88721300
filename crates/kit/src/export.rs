//! A user's personal-data export, `GET /v1/auth/me/export` (a session only):
//! every service that holds personal data of its own serves its part of the
//! export at [`PATH`] (a JSON object), and the gateway answers the route with
//! the parts merged into one object. identity's part is the person (profile,
//! memberships, sessions, keys, audit); the agent's is what the assistant
//! keeps (memory, conversations, staged actions, proposals).

/// Where each service serves its part, and the route the gateway answers.
pub const PATH: &str = "/v1/auth/me/export";

/// The services whose parts make the export, in the order they are merged
/// (a key of a later part never replaces an earlier one's).
pub const PARTS: &[&str] = &["identity", "agent"];
