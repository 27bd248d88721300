//! Wallet and AI-token moves, applied in batches by `apply_wallet_moves` and
//! `apply_token_moves` (their live definitions are in
//! `migrations/org_billing/live/`): the two ledgers share this one mechanism,
//! each a [`Book`] with writers of its own (the kit's group commit, [`writer`]).
//! The routes of each book are in [`wallet`] and [`tokens`].
//!
//! Every move locks its wallet row until it commits, so one busy wallet admits
//! one commit at a time however many requests wait. The [`Writer`] takes the
//! moves waiting at that moment and applies them in one call and one commit:
//! the function locks the wallets in id order (so batches never deadlock),
//! checks each move against the running balance in arrival order, appends one
//! ledger row per accepted move carrying the balance after it, writes the audit
//! events to the outbox and each wallet's final balance. A move is answered only
//! after the commit that holds it, and a refused move (409, or 404 for an
//! unknown wallet) does not affect the others. Correctness across replicas rests
//! on the row lock, not on the batching: each writer is an ordinary Postgres
//! client, and a move with an Idempotency-Key goes through the same function in
//! its own transaction.
//!
//! No late credits: a move enters a batch only while its caller still waits
//! and before its deadline (`ledger.queue_timeout_ms` after the request
//! arrived); otherwise it is dropped unapplied. A batch runs under a statement
//! timeout (`ledger.batch_timeout_ms`, set on the writer's connection), and the
//! writer stops waiting for a connection that does not answer shortly after
//! it, so a hung connection stalls its shard no longer than that. With both
//! below the gateway's upstream timeout, a 504 means the credit was not applied.
//!
//! The mechanism is in [`book`], the batching writer in [`writer`]; this file
//! only names them.

pub mod book;
mod keyed;
pub mod store;
pub mod tokens;
pub mod usage_routes;
pub mod wallet;
pub mod writer;

pub use book::{
    apply_one, batch_limit, Book, EntryKind, Move, TokenBalance, Tokens, Wallet, WalletBalance,
};
pub use writer::{Writer, WriterDb};
