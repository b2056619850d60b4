use anchor_lang::prelude::*;

use crate::replay_window::WINDOW_WORDS;

pub const CONFIG_SEED: &[u8] = b"config";
pub const PAYER_SEED: &[u8] = b"payer";
pub const INVOCATION_SEED: &[u8] = b"invocation";
pub const CHANNEL_SEED: &[u8] = b"channel";
pub const ESCROW_SEED: &[u8] = b"escrow";

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

/// An escrowed payment channel (PDA `["channel", payer, payee, channel_id]`): the payer's deposit
/// sits in the escrow token account (PDA `["escrow", channel]`, owned by this account) and leaves
/// it only to the payee, against the payer's cumulative vouchers, or back to the payer at close.
/// The account is deleted at close; see docs/ledger.md "Channels".
#[account]
#[derive(InitSpace)]
pub struct Channel {
    /// Escrowed the deposit, signs the vouchers, receives the refund.
    pub payer: Pubkey,
    pub payee: Pubkey,
    /// The settlement mint at open; escrow, payee and refund accounts are in it.
    pub mint: Pubkey,
    /// The payer's salt for this channel (a seed): never reused by a careful payer.
    pub channel_id: [u8; 32],
    /// The service authority that paid the rent of channel and escrow; gets it back at close.
    pub rent_payer: Pubkey,
    /// Every charge settled is also charged to this invocation (parent link and budget).
    pub invocation: Option<Pubkey>,
    /// The protocol every charge of this channel is recorded under.
    pub protocol: Protocol,
    /// Total escrowed: the opening deposit plus every top up (base units).
    pub deposit: u64,
    /// Cumulative amount paid to the payee: the highest settled voucher.
    pub settled: u64,
    /// Number of charges settled: the highest settled voucher's sequence.
    pub sequence: u64,
    /// Hash chain over every settled charge (see `voucher::next_charges_digest`).
    pub charges_digest: [u8; 32],
    /// Payment id of the last settled charge (0 before the first).
    pub last_payment_id: u64,
    pub opened_at: i64,
    pub opened_slot: u64,
    /// Unix seconds after which the payer may force-close without a close request.
    pub expires_at: i64,
    /// Seconds between a close request and the refund, for the payee to settle its last voucher.
    pub withdraw_delay: i64,
    /// Unix seconds of the close request; 0 while the channel is open.
    pub close_requested_at: i64,
    pub bump: u8,
    pub escrow_bump: u8,
}

impl Channel {
    pub fn is_closing(&self) -> bool {
        self.close_requested_at != 0
    }

    /// What the escrow still owes: deposit not yet settled.
    pub fn unsettled(&self) -> u64 {
        self.deposit.saturating_sub(self.settled)
    }
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
