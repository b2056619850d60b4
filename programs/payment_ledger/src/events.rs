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

/// A channel was opened: `deposit` moved from the payer's token account into the escrow.
#[event]
pub struct ChannelOpened {
    pub channel: Pubkey,
    pub payer: Pubkey,
    pub payee: Pubkey,
    pub mint: Pubkey,
    pub channel_id: [u8; 32],
    pub deposit: u64,
    pub protocol: Protocol,
    pub invocation: Option<Pubkey>,
    pub expires_at: i64,
    pub withdraw_delay: i64,
    pub opened_at: i64,
    pub slot: u64,
}

#[event]
pub struct ChannelToppedUp {
    pub channel: Pubkey,
    pub amount: u64,
    /// Total escrowed after the top up.
    pub deposit: u64,
    pub slot: u64,
}

/// A voucher was settled: `delta` moved from the escrow to the payee. The charges it covers follow
/// as one `PaymentRecorded` each, in the same instruction.
#[event]
pub struct ChannelSettled {
    pub channel: Pubkey,
    pub payer: Pubkey,
    pub payee: Pubkey,
    /// The payee, or the service authority acting for it.
    pub settler: Pubkey,
    /// The voucher's cumulative amount: everything paid to the payee so far.
    pub cumulative_amount: u64,
    pub delta: u64,
    /// The voucher's sequence: charges settled so far.
    pub sequence: u64,
    /// Charges covered by this settlement (the `PaymentRecorded` events that follow).
    pub charge_count: u32,
    pub charges_digest: [u8; 32],
    pub slot: u64,
}

#[event]
pub struct ChannelCloseRequested {
    pub channel: Pubkey,
    pub requested_by: Pubkey,
    pub close_requested_at: i64,
    /// From this time the payer may take the refund.
    pub refundable_at: i64,
    pub slot: u64,
}

/// The channel is gone: the remainder went back to the payer, the rent to the rent payer.
#[event]
pub struct ChannelClosed {
    pub channel: Pubkey,
    pub payer: Pubkey,
    pub payee: Pubkey,
    pub closed_by: Pubkey,
    pub deposit: u64,
    pub settled: u64,
    pub refunded: u64,
    pub sequence: u64,
    /// Closed by the payer after expiry, without a close request.
    pub forced: bool,
    pub slot: u64,
}
