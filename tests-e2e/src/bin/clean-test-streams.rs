//! Delete the JetStream streams (and with them their consumers) that earlier
//! test runs left behind: names `CORE_t<12 hex>` / `PRODUCT_t<12 hex>` /
//! `DLQ_t<12 hex>` only.
//! `make test` runs it before the tests, beside dropping old test databases.

use futures::TryStreamExt;

fn is_test_stream(name: &str) -> bool {
    let bases = event_contracts::STREAMS
        .iter()
        .map(|(base, _)| *base)
        .chain([service_kit::deadletter::STREAM]);
    bases.into_iter().any(|base| {
        name.strip_prefix(base)
            .and_then(|rest| rest.strip_prefix("_t"))
            .is_some_and(|tag| tag.len() == 12 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let client = async_nats::connect(tests_e2e::nats_url()).await?;
    let js = async_nats::jetstream::new(client);
    let names: Vec<String> = js.stream_names().try_collect().await?;
    let mut deleted = 0;
    for name in names.iter().filter(|n| is_test_stream(n)) {
        js.delete_stream(name).await?;
        deleted += 1;
    }
    if deleted > 0 {
        println!("deleted {deleted} test streams");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_test_stream;

    #[test]
    fn only_test_streams_match() {
        assert!(is_test_stream("CORE_t0123456789ab"));
        assert!(is_test_stream("PRODUCT_tabcdefabcdef"));
        assert!(is_test_stream("DLQ_tabcdefabcdef"));
        assert!(!is_test_stream("CORE"));
        assert!(!is_test_stream("CORE_bench"));
        assert!(!is_test_stream("CORE_t0123"));
        assert!(!is_test_stream("OTHER_t0123456789ab"));
    }
}
