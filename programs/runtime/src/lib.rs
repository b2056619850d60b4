//! A real Solana runtime (LiteSVM: the Agave SVM, bank-less) that runs `payment_ledger` as a
//! native builtin next to the BPF builds of SPL Token, Token-2022 and the ATA program.

pub mod address;
pub mod channel;
pub mod client;
pub mod events;
pub mod history;
pub mod ledger;
pub mod native;

pub use ledger::{Executed, Ledger, LedgerSetup};
