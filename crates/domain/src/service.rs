//! The hub's services, by the name they carry in assertions (`iss`, `aud`)
//! and in the gateway's upstream table.

/// One of the hub's services (the gateway is not one: it is the public edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceName {
    Identity,
    OrgBilling,
    Kyc,
    ServerProduct,
    WebhookDispatcher,
    Agent,
}

impl ServiceName {
    pub const ALL: [ServiceName; 6] = [
        ServiceName::Identity,
        ServiceName::OrgBilling,
        ServiceName::Kyc,
        ServiceName::ServerProduct,
        ServiceName::WebhookDispatcher,
        ServiceName::Agent,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ServiceName::Identity => "identity",
            ServiceName::OrgBilling => "org_billing",
            ServiceName::Kyc => "kyc",
            ServiceName::ServerProduct => "server_product",
            ServiceName::WebhookDispatcher => "webhook_dispatcher",
            ServiceName::Agent => "agent",
        }
    }

    pub fn parse(s: &str) -> Option<ServiceName> {
        ServiceName::ALL.into_iter().find(|n| n.as_str() == s)
    }
}

impl std::fmt::Display for ServiceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in ServiceName::ALL {
            assert_eq!(ServiceName::parse(n.as_str()), Some(n));
        }
        assert_eq!(ServiceName::parse("gateway"), None);
    }
}
