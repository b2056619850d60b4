//! payment_ledger: the on-chain record of every agent payment.
//!
//! Per-payment data lives in `PaymentRecorded` events emitted with `emit_cpi!` (no rent per
//! payment, immune to log truncation, unforgeable). Accounts exist only for state the chain must
//! enforce: the service `Config`, one `PayerState` per paying wallet (exactly-once payment ids) and
//! one `Invocation` per `agents.invoke` (parent link and hard budget cap), and one `Channel` per
//! escrowed payment channel (deposit, cumulative ed25519 vouchers, close and refund).
#![allow(unexpected_cfgs)]

use anchor_lang::prelude::*;

pub mod channel;
pub mod errors;
pub mod events;
pub mod instructions;
pub mod replay_window;
pub mod state;
pub mod voucher;

pub use channel::{ChannelCharge, SettleChannelArgs};
pub use errors::LedgerError;
pub use events::*;
pub use instructions::*;
pub use state::*;

declare_id!("2Mxhjn4faicAv1UyhyFyiBnVbgahkgxmjCVpEkGffD3t");

#[program]
pub mod payment_ledger {
    use super::*;

    /// Creates the service configuration: the authority that attests records, the settlement
    /// mint every stablecoin payment must use, and the treasury that funds agent wallets.
    pub fn initialize(ctx: Context<Initialize>, args: InitializeArgs) -> Result<()> {
        handle_initialize(ctx, args)
    }

    /// Records one payment. With the stablecoin rail and no settlement reference the program
    /// moves the tokens itself (TransferChecked CPI) so settlement and record are atomic.
    pub fn record_payment(ctx: Context<RecordPayment>, args: RecordPaymentArgs) -> Result<()> {
        handle_record_payment(ctx, args)
    }

    /// Records a payment the authority attests alone: a wallet the gateway does not hold paid in a
    /// separate settlement transaction (named by its signature, which the indexer verifies); the
    /// payer does not sign the record and nothing moves.
    pub fn record_attested_payment(ctx: Context<RecordAttestedPayment>, args: RecordAttestedPaymentArgs) -> Result<()> {
        handle_record_attested_payment(ctx, args)
    }

    /// Opens the invocation account of `agents.invoke`: the parent link of every payment the
    /// sub-agent makes under it, and the budget those payments may never exceed.
    pub fn open_invocation(ctx: Context<OpenInvocation>, args: OpenInvocationArgs) -> Result<()> {
        handle_open_invocation(ctx, args)
    }

    /// Opens a payment channel: the payer escrows `deposit` for one payee, in the settlement
    /// mint, until `expires_at`. The service authority co-signs and pays the rent.
    pub fn open_channel(ctx: Context<OpenChannel>, args: OpenChannelArgs) -> Result<()> {
        handle_open_channel(ctx, args)
    }

    /// Adds `amount` of the payer's tokens to an open, unexpired channel's escrow.
    pub fn top_up_channel(ctx: Context<TopUpChannel>, amount: u64) -> Result<()> {
        handle_top_up_channel(ctx, amount)
    }

    /// Settles the payer's highest cumulative voucher (its ed25519 verification is the previous
    /// instruction): moves the delta to the payee and records every charge it covers.
    pub fn settle_channel(ctx: Context<SettleChannel>, args: SettleChannelArgs) -> Result<()> {
        handle_settle_channel(ctx, args)
    }

    /// Requests the close (payer, payee or authority), optionally with a final settlement.
    pub fn close_channel(ctx: Context<CloseChannel>, final_settlement: Option<SettleChannelArgs>) -> Result<()> {
        handle_close_channel(ctx, final_settlement)
    }

    /// After a close request (and its withdraw delay, unless the payee signs): refunds the
    /// remainder to the payer and deletes channel and escrow.
    pub fn refund_channel(ctx: Context<FinishChannel>) -> Result<()> {
        handle_refund_channel(ctx)
    }

    /// After expiry, by the payer alone: refunds the remainder and deletes channel and escrow.
    pub fn force_close_channel(ctx: Context<FinishChannel>) -> Result<()> {
        handle_force_close_channel(ctx)
    }
}

/// Host-side entry point with the `solana_program_entrypoint::ProcessInstruction` shape.
///
/// The Anchor-generated `entry` ties the lifetimes of the account slice and its elements
/// together, which a plain `fn` pointer cannot express; a native runtime (our local ledger)
/// registers this function instead. On SBF the regular Anchor entrypoint is used.
#[cfg(not(target_os = "solana"))]
pub fn process_instruction(
    program_id: &Pubkey,
    accounts: &[AccountInfo],
    data: &[u8],
) -> anchor_lang::solana_program::entrypoint::ProgramResult {
    // SAFETY: only the lifetime parameters change; the runtime keeps the accounts alive for the
    // whole call, which is all `entry` relies on.
    let accounts: &[AccountInfo] = unsafe { core::mem::transmute(accounts) };
    entry(program_id, accounts, data)
}
