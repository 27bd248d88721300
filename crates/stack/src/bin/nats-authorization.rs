//! Print the nats-server `authorization` block of the hub (every service's
//! NATS user and permissions, from the services' descriptions), as the chart
//! ships it:
//!
//! ```text
//! cargo run -p hub-stack --bin nats-authorization > deploy/helm/hub/files/nats-authorization.conf
//! ```

fn main() {
    print!("{}", hub_stack::nats_authorization(&Default::default()));
}
