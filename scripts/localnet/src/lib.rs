//! The local ledger as a library: the chain (slots, blocks, indexes) and its JSON-RPC and
//! websocket front ends. `main.rs` is the `localnet` process; benches drive `chain` directly.

pub mod chain;
pub mod encode;
pub mod parse;
pub mod rpc;
pub mod ws;
