//! Remove what ended test runs left behind: the databases `hubtest_<run>_<uuid>`
//! and the streams `<BASE>_t<run><tag>` of every run whose lock is free (the
//! process that held it is gone), and the unnamed ones from before run ids
//! (`hubtest_<uuid>`, `<BASE>_t<12 hex>`). A run still going keeps everything
//! (see `tests_e2e::runs`). `make test` runs it before the tests;
//! `--dry-run` only lists what would go.
//!
//! It uses the tests' `TEST_DATABASE_URL` (the administrator's database, where
//! the runs hold their locks) and `TEST_NATS_URL`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let dry = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--dry-run") => true,
        Some(other) => anyhow::bail!("unknown argument {other:?} (only --dry-run)"),
    };
    let done = tests_e2e::runs::clean(&tests_e2e::runs::Scope::default(), dry).await?;
    let verb = if dry { "would drop" } else { "dropped" };
    if dry {
        for name in done.databases.iter().chain(&done.streams) {
            println!("{name}");
        }
    }
    if !done.databases.is_empty() || !done.streams.is_empty() {
        println!(
            "{verb} {} test databases and {} test streams ({} ended runs)",
            done.databases.len(),
            done.streams.len(),
            done.ended_runs.len()
        );
    }
    if !done.live_runs.is_empty() {
        println!(
            "kept those of {} test runs still going: {}",
            done.live_runs.len(),
            done.live_runs.join(", ")
        );
    }
    Ok(())
}
