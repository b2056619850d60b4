use anchor_lang::prelude::*;
use anchor_spl::token_interface::{self, Mint, TokenAccount, TokenInterface, TransferChecked};

use crate::{
    errors::LedgerError,
    events::{ParentLink, PaymentRecorded},
    replay_window::{self, Rejection},
    state::*,
};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct RecordPaymentArgs {
    /// Unique per payer, allocated in increasing order by the gateway (see `replay_window`).
    pub payment_id: u64,
    /// Settlement-mint base units (6 decimals).
    pub amount: u64,
    pub protocol: Protocol,
    pub rail: Rail,
    /// sha256 of the endpoint (host and path); the text lives off-chain.
    pub endpoint_hash: [u8; 32],
    /// Signature of a separate settlement transaction (a third-party x402 facilitator).
    pub settlement_reference: Option<[u8; 64]>,
}

#[event_cpi]
#[derive(Accounts)]
pub struct RecordPayment<'info> {
    /// The service key: attests the record and pays fees and the payer state's rent.
    #[account(mut)]
    pub authority: Signer<'info>,
    /// The agent wallet that pays.
    pub payer: Signer<'info>,
    /// CHECK: the receiving service wallet; only its address is recorded, and a transfer must
    /// land in a token account it owns (checked in the handler).
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
    /// Present when the payment is made under an `agents.invoke` budget.
    #[account(mut)]
    pub invocation: Option<Account<'info, Invocation>>,
    pub mint: Option<InterfaceAccount<'info, Mint>>,
    #[account(mut)]
    pub payer_token: Option<InterfaceAccount<'info, TokenAccount>>,
    #[account(mut)]
    pub payee_token: Option<InterfaceAccount<'info, TokenAccount>>,
    pub token_program: Option<Interface<'info, TokenInterface>>,
    pub system_program: Program<'info, System>,
}

pub fn handle_record_payment(ctx: Context<RecordPayment>, args: RecordPaymentArgs) -> Result<()> {
    require!(args.amount > 0, LedgerError::ZeroAmount);
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

    let parent = match ctx.accounts.invocation.as_mut() {
        Some(invocation) => Some(charge_invocation(invocation, payer, args.amount)?),
        None => None,
    };

    let atomic = args.rail == Rail::Stablecoin && args.settlement_reference.is_none();
    if atomic {
        transfer(&ctx.accounts, args.amount)?;
    }

    emit_cpi!(PaymentRecorded {
        payer,
        payee: ctx.accounts.payee.key(),
        payment_id: args.payment_id,
        amount: args.amount,
        mint: ctx.accounts.config.settlement_mint,
        protocol: args.protocol,
        rail: args.rail,
        endpoint_hash: args.endpoint_hash,
        atomic,
        settlement_reference: args.settlement_reference,
        parent,
        recorded_at: clock.unix_timestamp,
        slot: clock.slot,
    });
    Ok(())
}

/// Adds `amount` to the invocation's spend (payer must be its sub-agent, the budget is a hard cap)
/// and returns the parent link the payment's event carries.
pub fn charge_invocation(invocation: &mut Account<Invocation>, payer: Pubkey, amount: u64) -> Result<ParentLink> {
    require_keys_eq!(invocation.sub_agent, payer, LedgerError::InvocationPayerMismatch);
    let spent = invocation
        .spent
        .checked_add(amount)
        .ok_or(LedgerError::ArithmeticOverflow)?;
    require!(spent <= invocation.budget, LedgerError::InvocationBudgetExceeded);
    invocation.spent = spent;
    invocation.payment_count = invocation.payment_count.saturating_add(1);
    Ok(ParentLink {
        invocation: invocation.key(),
        parent_signature: invocation.parent_signature,
        budget: invocation.budget,
        spent,
    })
}

/// Moves `amount` from the payer's token account to the payee's, signed by the payer.
fn transfer(accounts: &RecordPayment, amount: u64) -> Result<()> {
    let (Some(mint), Some(from), Some(to), Some(token_program)) = (
        accounts.mint.as_ref(),
        accounts.payer_token.as_ref(),
        accounts.payee_token.as_ref(),
        accounts.token_program.as_ref(),
    ) else {
        return err!(LedgerError::MissingTransferAccounts);
    };
    require_keys_eq!(mint.key(), accounts.config.settlement_mint, LedgerError::WrongMint);
    require_keys_eq!(from.mint, mint.key(), LedgerError::WrongMint);
    require_keys_eq!(to.mint, mint.key(), LedgerError::WrongMint);
    require_keys_eq!(from.owner, accounts.payer.key(), LedgerError::TokenAccountMismatch);
    require_keys_eq!(to.owner, accounts.payee.key(), LedgerError::TokenAccountMismatch);
    require!(from.amount >= amount, LedgerError::InsufficientFunds);

    let cpi = CpiContext::new(
        token_program.key(),
        TransferChecked {
            from: from.to_account_info(),
            mint: mint.to_account_info(),
            to: to.to_account_info(),
            authority: accounts.payer.to_account_info(),
        },
    );
    token_interface::transfer_checked(cpi, amount, mint.decimals)
}
