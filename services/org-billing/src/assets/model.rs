//! An asset and its kinds as the API shows them.

use hub_domain::AssetId;
use serde::Serialize;

hub_domain::text_enum! {
    /// The spec's OrgAsset kinds.
    pub enum Kind: "asset kind" {
        Document = "document",
        Logo = "logo",
        Link = "link",
        Other = "other",
    }
}

/// The spec's OrgAsset.
#[derive(Debug, Serialize)]
pub struct Asset {
    pub id: AssetId,
    pub kind: Kind,
    pub name: String,
    pub url: String,
    pub note: String,
}
