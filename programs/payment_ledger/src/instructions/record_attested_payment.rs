use anchor_lang::prelude::*;

use crate::{
    errors::LedgerError,
    events::PaymentRecorded,
    replay_window::{self, Rejection},
    state::*,
};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RecordAttestedPaymentArgs {
    /// Unique per payer, allocated in increasing order by the gateway (see `replay_window`).
    pub payment_id: u64,
    /// Settlement-mint base units (6 decimals): what the referenced transfer moved.
    pub amount: u64,
    pub protocol: Protocol,
    /// sha256 of the endpoint (host and path); the text lives off-chain.
    pub endpoint_hash: [u8; 32],
    /// Signature of the settlement transaction that moved the tokens. Required: without it the
    /// record would claim a payment nobody can check.
    pub settlement_reference: [u8; 64],
}

/// A payment the service authority attests on its own: the payer (a wallet the gateway does not
/// hold, paying through a standard x402 or MPP client) signed the transfer in a separate
/// settlement transaction the gateway co-signed as fee payer, but does not sign this record. The
/// record therefore moves nothing and always names its settlement transaction, which the indexer
/// checks (amount, mint, payer, payee) before it shows the payment as verified.
#[event_cpi]
#[derive(Accounts)]
pub struct RecordAttestedPayment<'info> {
    /// The service key: the only signer; attests the record and pays fees and the payer state's rent.
    #[account(mut)]
    pub authority: Signer<'info>,
    /// CHECK: the wallet that signed the referenced transfer; only its address is recorded.
    pub payer: UncheckedAccount<'info>,
    /// CHECK: the receiving wallet; only its address is recorded.
    pub payee: UncheckedAccount<'info>,
    #[account(
        seeds = [CONFIG_SEED],
        bump = config.bump,
        has_one = authority @ LedgerError::Unauthorized
    )]
    pub config: Account<'info, Config>,
    #[account(
        init_if_needed,
        payer = authority,
        space = 8 + PayerState::INIT_SPACE,
        seeds = [PAYER_SEED, payer.key().as_ref()],
        bump
    )]
    pub payer_state: Account<'info, PayerState>,
    pub system_program: Program<'info, System>,
}

pub fn handle_record_attested_payment(ctx: Context<RecordAttestedPayment>, args: RecordAttestedPaymentArgs) -> Result<()> {
    require!(args.amount > 0, LedgerError::ZeroAmount);
    require!(args.settlement_reference != [0u8; 64], LedgerError::MissingSettlementReference);
    let clock = Clock::get()?;
    let payer = ctx.accounts.payer.key();

    let payer_state: &mut PayerState = &mut ctx.accounts.payer_state;
    if payer_state.payer == Pubkey::default() {
        payer_state.payer = payer;
        payer_state.bump = ctx.bumps.payer_state;
    }
    replay_window::accept(
        &mut payer_state.highest_payment_id,
        &mut payer_state.recent_ids,
        args.payment_id,
    )
    .map_err(|rejection| match rejection {
        Rejection::Zero => LedgerError::InvalidPaymentId,
        Rejection::Duplicate => LedgerError::DuplicatePaymentId,
        Rejection::TooOld => LedgerError::PaymentIdTooOld,
    })?;
    payer_state.payment_count = payer_state
        .payment_count
        .checked_add(1)
        .ok_or(LedgerError::ArithmeticOverflow)?;

    emit_cpi!(PaymentRecorded {
        payer,
        payee: ctx.accounts.payee.key(),
        payment_id: args.payment_id,
        amount: args.amount,
        mint: ctx.accounts.config.settlement_mint,
        protocol: args.protocol,
        rail: Rail::Stablecoin,
        endpoint_hash: args.endpoint_hash,
        atomic: false,
        settlement_reference: Some(args.settlement_reference),
        parent: None,
        recorded_at: clock.unix_timestamp,
        slot: clock.slot,
    });
    Ok(())
}
