use anchor_lang::prelude::*;

use crate::state::{Protocol, Rail};

/// The parent link of a sub-agent payment, copied from the invocation account so the event
/// alone is enough to build the payment tree.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug, PartialEq, Eq)]
pub struct ParentLink {
    pub invocation: Pubkey,
    pub parent_signature: [u8; 64],
    pub budget: u64,
    /// Invocation total after this payment.
    pub spent: u64,
}

#[event]
pub struct ConfigInitialized {
    pub authority: Pubkey,
    pub settlement_mint: Pubkey,
    pub treasury: Pubkey,
    pub decimals: u8,
}

#[event]
pub struct PaymentRecorded {
    pub payer: Pubkey,
    pub payee: Pubkey,
    /// Unique per payer; (payer, payment_id) identifies the payment.
    pub payment_id: u64,
    /// Base units of `mint` (6 decimals).
    pub amount: u64,
    pub mint: Pubkey,
    pub protocol: Protocol,
    pub rail: Rail,
    pub endpoint_hash: [u8; 32],
    /// True when this instruction moved the tokens itself (TransferChecked CPI).
    pub atomic: bool,
    /// Signature of a separate settlement transaction, for the indexer to verify.
    pub settlement_reference: Option<[u8; 64]>,
    pub parent: Option<ParentLink>,
    pub recorded_at: i64,
    pub slot: u64,
}

#[event]
pub struct InvocationOpened {
    pub invocation: Pubkey,
    pub invoker: Pubkey,
    pub sub_agent: Pubkey,
    pub parent_signature: [u8; 64],
    pub budget: u64,
    pub opened_at: i64,
    pub slot: u64,
}
