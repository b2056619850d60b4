//! The local ledger as a library: the chain (slots, blocks, indexes), its write-ahead log and
//! replay (`wal`, `persistence`), and its JSON-RPC and websocket front ends. `main.rs` is the
//! `localnet` process; benches drive `chain` directly.

pub mod chain;
pub mod dir_lock;
pub mod encode;
pub mod fields;
pub mod parent_watch;
pub mod parse;
pub mod persistence;
pub mod rpc;
pub mod wal;
pub mod ws;
