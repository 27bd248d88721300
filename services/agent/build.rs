//! `sqlx::migrate!` embeds the migration files at compile time: rebuild this
//! crate whenever one is added or changed, or a stale binary would skip it.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations/agent");
}
