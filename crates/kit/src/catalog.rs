//! The declared catalog file (`catalog.file`): read, bounded and validated
//! before anything touches the database. The format and its rules are
//! [`hub_domain::catalog`]; org-billing applies the distributors and
//! server-product the SKUs, each in its `migrate` subcommand.

use crate::settings::CatalogSettings;
use anyhow::Context;
use hub_domain::catalog::{Catalog, MAX_FILE_BYTES};
use std::io::Read;

/// How a service applies its part of a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The declared file (`migrate`): insert, or update the declared fields.
    Declared,
    /// The dev seed: insert what is missing, change nothing that exists.
    Missing,
}

/// Rows created, updated and left unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub created: u64,
    pub updated: u64,
    pub unchanged: u64,
}

impl Counts {
    /// Count one upsert's outcome as `RETURNING (xmax = 0)` reports it: true
    /// for an insert, false for an update, no row when nothing changed.
    pub fn add(&mut self, outcome: Option<bool>) {
        match outcome {
            Some(true) => self.created += 1,
            Some(false) => self.updated += 1,
            None => self.unchanged += 1,
        }
    }
}

/// The catalog `catalog.file` declares, or None when it is empty.
pub fn read(settings: &CatalogSettings) -> anyhow::Result<Option<Catalog>> {
    let path = settings.file.trim();
    if path.is_empty() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading catalog.file {path}"))?;
    let catalog =
        Catalog::parse(&bytes).with_context(|| format!("catalog.file {path} is refused"))?;
    Ok(Some(catalog))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(file: &str) -> CatalogSettings {
        CatalogSettings {
            file: file.to_owned(),
        }
    }

    #[test]
    fn an_empty_setting_declares_nothing_and_a_missing_file_fails() {
        assert!(read(&settings("")).expect("empty").is_none());
        let e = read(&settings("/nonexistent/catalog.json")).expect_err("missing");
        assert!(format!("{e:#}").contains("/nonexistent/catalog.json"));
    }

    #[test]
    fn a_file_is_parsed_and_its_errors_name_file_and_entry() {
        let dir = std::env::temp_dir().join(format!("catalog-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let good = dir.join("good.json");
        std::fs::write(&good, hub_domain::catalog::DEMO_JSON).expect("write");
        let c = read(&settings(good.to_str().unwrap_or_default()))
            .expect("valid")
            .expect("declared");
        assert_eq!(c.skus.len(), 4);
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"skus": [{"id": "Bad", "name": "x", "fulfilment": "api", "monthly_price_minor": 1, "currency": "TRY"}]}"#)
            .expect("write");
        let e = format!(
            "{:#}",
            read(&settings(bad.to_str().unwrap_or_default())).expect_err("bad")
        );
        assert!(
            e.contains("bad.json") && e.contains("skus[0] \"Bad\": id must be"),
            "{e}"
        );
        let big = dir.join("big.json");
        std::fs::write(&big, vec![b' '; MAX_FILE_BYTES as usize + 10]).expect("write");
        assert!(read(&settings(big.to_str().unwrap_or_default())).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
