//! The agent schema's storage: every query outside the exchange journal
//! ([`crate::journal`]), by area. Functions take a pool or a connection and
//! return rows as domain values; the modules that own the behaviour decide
//! what a missing row means.

pub mod conversations;
pub mod erasure;
pub mod kb;
pub mod memory;
pub mod model;
pub mod personal;
pub mod proposals;
pub mod staged;
