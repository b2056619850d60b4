use anchor_lang::prelude::*;
use anchor_spl::{
    associated_token::get_associated_token_address_with_program_id,
    token_interface::{Mint, TokenAccount, TokenInterface},
};

use crate::{channel, errors::LedgerError, events::ChannelClosed, state::*};

/// The accounts that end a channel: the remainder goes to the payer, channel and escrow are
/// closed and their rent returns to the service authority that paid it.
#[event_cpi]
#[derive(Accounts)]
pub struct FinishChannel<'info> {
    /// `refund_channel`: payee, payer or service authority; `force_close_channel`: the payer.
    #[account(mut)]
    pub signer: Signer<'info>,
    #[account(seeds = [CONFIG_SEED], bump = config.bump)]
    pub config: Account<'info, Config>,
    #[account(
        mut,
        close = rent_payer,
        seeds = [CHANNEL_SEED, channel.payer.as_ref(), channel.payee.as_ref(), &channel.channel_id],
        bump = channel.bump
    )]
    pub channel: Account<'info, Channel>,
    #[account(mut, seeds = [ESCROW_SEED, channel.key().as_ref()], bump = channel.escrow_bump)]
    pub escrow: InterfaceAccount<'info, TokenAccount>,
    pub mint: InterfaceAccount<'info, Mint>,
    /// Receives the refund: the payer's associated token account for the channel's mint (checked),
    /// the account wallets read, so a refund cannot be stranded in another account of the payer.
    #[account(mut)]
    pub payer_token: InterfaceAccount<'info, TokenAccount>,
    /// CHECK: must be the channel's `rent_payer` (checked); receives the rent of channel and escrow.
    #[account(mut)]
    pub rent_payer: UncheckedAccount<'info>,
    pub token_program: Interface<'info, TokenInterface>,
}

/// Ends a channel whose close was requested. The payee may do so at any time (it gives up
/// settling further); the payer, or the service authority, once the withdraw delay has passed, so
/// that no one but the payee can cut short its time to settle.
pub fn handle_refund_channel(ctx: Context<FinishChannel>) -> Result<()> {
    let clock = Clock::get()?;
    let accounts = &ctx.accounts;
    let signer = accounts.signer.key();
    let channel = &accounts.channel;
    let payee = signer == channel.payee;
    require!(
        payee || signer == channel.payer || signer == accounts.config.authority,
        LedgerError::NotChannelParty
    );
    require!(channel.is_closing(), LedgerError::ChannelNotClosing);
    if !payee {
        let refundable_at = channel
            .close_requested_at
            .checked_add(channel.withdraw_delay)
            .ok_or(LedgerError::ArithmeticOverflow)?;
        require!(clock.unix_timestamp >= refundable_at, LedgerError::WithdrawDelayNotElapsed);
    }
    finish(ctx, false)
}

/// Ends a channel after its expiry without a close request: the payer's way out when the payee
/// is gone. The payee had until `expires_at` to settle.
pub fn handle_force_close_channel(ctx: Context<FinishChannel>) -> Result<()> {
    let clock = Clock::get()?;
    let channel = &ctx.accounts.channel;
    require_keys_eq!(ctx.accounts.signer.key(), channel.payer, LedgerError::NotChannelParty);
    require!(clock.unix_timestamp >= channel.expires_at, LedgerError::ChannelNotExpired);
    finish(ctx, true)
}

fn finish(ctx: Context<FinishChannel>, forced: bool) -> Result<()> {
    let clock = Clock::get()?;
    let accounts = &ctx.accounts;
    let payer_ata = get_associated_token_address_with_program_id(
        &accounts.channel.payer,
        &accounts.channel.mint,
        &accounts.token_program.key(),
    );
    require_keys_eq!(accounts.payer_token.key(), payer_ata, LedgerError::RefundNotToPayerAssociatedAccount);
    let refunded = channel::empty_escrow(
        &accounts.channel,
        &accounts.escrow,
        &accounts.mint,
        &accounts.payer_token,
        &accounts.rent_payer.to_account_info(),
        &accounts.token_program,
    )?;
    let channel = &accounts.channel;
    emit_cpi!(ChannelClosed {
        channel: channel.key(),
        payer: channel.payer,
        payee: channel.payee,
        closed_by: accounts.signer.key(),
        deposit: channel.deposit,
        settled: channel.settled,
        refunded,
        sequence: channel.sequence,
        forced,
        slot: clock.slot,
    });
    Ok(())
}
