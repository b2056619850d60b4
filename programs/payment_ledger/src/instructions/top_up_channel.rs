use anchor_lang::prelude::*;
use anchor_spl::token_interface::{self, Mint, TokenAccount, TokenInterface, TransferChecked};

use crate::{errors::LedgerError, events::ChannelToppedUp, state::*};

#[event_cpi]
#[derive(Accounts)]
pub struct TopUpChannel<'info> {
    /// The channel's payer: the only one who can add its own tokens.
    pub payer: Signer<'info>,
    #[account(
        mut,
        has_one = payer @ LedgerError::NotChannelParty,
        seeds = [CHANNEL_SEED, channel.payer.as_ref(), channel.payee.as_ref(), &channel.channel_id],
        bump = channel.bump
    )]
    pub channel: Account<'info, Channel>,
    #[account(mut, seeds = [ESCROW_SEED, channel.key().as_ref()], bump = channel.escrow_bump)]
    pub escrow: InterfaceAccount<'info, TokenAccount>,
    pub mint: InterfaceAccount<'info, Mint>,
    #[account(mut)]
    pub payer_token: InterfaceAccount<'info, TokenAccount>,
    /// The channel's invocation, when it has one: the unsettled deposit must still fit its budget.
    pub invocation: Option<Account<'info, Invocation>>,
    pub token_program: Interface<'info, TokenInterface>,
}

pub fn handle_top_up_channel(ctx: Context<TopUpChannel>, amount: u64) -> Result<()> {
    let clock = Clock::get()?;
    let accounts = &ctx.accounts;
    let channel = &accounts.channel;
    require!(amount > 0, LedgerError::ZeroAmount);
    require!(!channel.is_closing(), LedgerError::ChannelClosing);
    require!(clock.unix_timestamp < channel.expires_at, LedgerError::ChannelExpired);
    require_keys_eq!(accounts.mint.key(), channel.mint, LedgerError::WrongMint);
    require_keys_eq!(accounts.payer_token.mint, channel.mint, LedgerError::WrongMint);
    require_keys_eq!(accounts.payer_token.owner, channel.payer, LedgerError::TokenAccountMismatch);
    require!(accounts.payer_token.amount >= amount, LedgerError::InsufficientFunds);
    let deposit = channel.deposit.checked_add(amount).ok_or(LedgerError::ArithmeticOverflow)?;
    match (channel.invocation, accounts.invocation.as_ref()) {
        (None, None) => {}
        (Some(bound), Some(invocation)) if invocation.key() == bound => {
            let unsettled = deposit - channel.settled;
            require!(
                unsettled <= invocation.budget.saturating_sub(invocation.spent),
                LedgerError::InvocationBudgetExceeded
            );
        }
        _ => return err!(LedgerError::ChannelInvocationMismatch),
    }

    token_interface::transfer_checked(
        CpiContext::new(
            accounts.token_program.key(),
            TransferChecked {
                from: accounts.payer_token.to_account_info(),
                mint: accounts.mint.to_account_info(),
                to: accounts.escrow.to_account_info(),
                authority: accounts.payer.to_account_info(),
            },
        ),
        amount,
        accounts.mint.decimals,
    )?;

    let channel = &mut ctx.accounts.channel;
    channel.deposit = deposit;
    emit_cpi!(ChannelToppedUp { channel: channel.key(), amount, deposit, slot: clock.slot });
    Ok(())
}
