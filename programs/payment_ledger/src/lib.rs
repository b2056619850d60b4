//! payment_ledger: the on-chain record of every agent payment.
//!
//! Per-payment data lives in `PaymentRecorded` events emitted with `emit_cpi!` (no rent per
//! payment, immune to log truncation, unforgeable). Accounts exist only for state the chain must
//! enforce: the service `Config`, one `PayerState` per paying wallet (exactly-once payment ids) and
//! one `Invocation` per `agents.invoke` (parent link and hard budget cap).
#![allow(unexpected_cfgs)]

use anchor_lang::prelude::*;

pub mod errors;
pub mod events;
pub mod instructions;
pub mod replay_window;
pub mod state;

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
