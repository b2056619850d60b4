use anchor_lang::prelude::*;

use crate::replay_window::WINDOW_WORDS;

pub const CONFIG_SEED: &[u8] = b"config";
pub const PAYER_SEED: &[u8] = b"payer";
pub const INVOCATION_SEED: &[u8] = b"invocation";

/// The service configuration, one per deployment (PDA `["config"]`).
#[account]
#[derive(InitSpace)]
pub struct Config {
    /// Signs every record and invocation: the gateway's service key.
    pub authority: Pubkey,
    /// The only mint stablecoin payments settle in (a 6-decimal USDC-like token).
    pub settlement_mint: Pubkey,
    /// The account that funds agent wallets.
    pub treasury: Pubkey,
    pub decimals: u8,
    pub bump: u8,
}

/// Per agent wallet (PDA `["payer", payer]`): the replay window that makes payment ids
/// exactly-once, and running totals.
#[account]
#[derive(InitSpace)]
pub struct PayerState {
    pub payer: Pubkey,
    pub highest_payment_id: u64,
    pub recent_ids: [u64; WINDOW_WORDS],
    pub payment_count: u64,
    pub bump: u8,
}

/// The account of one `agents.invoke` (PDA `["invocation", sig[..32], sig[32..], sub_agent]`):
/// where the parent link lives, and the hard cap on what the sub-agent may spend under it.
#[account]
#[derive(InitSpace)]
pub struct Invocation {
    pub invoker: Pubkey,
    pub sub_agent: Pubkey,
    /// Signature of the invoking (parent) transaction.
    pub parent_signature: [u8; 64],
    pub budget: u64,
    pub spent: u64,
    pub payment_count: u32,
    pub opened_at: i64,
    pub bump: u8,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum Protocol {
    X402,
    Mpp,
}

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq, InitSpace)]
pub enum Rail {
    Stablecoin,
    Card,
    Other,
}
