use anchor_lang::prelude::*;
use anchor_spl::token_interface::{Mint, TokenAccount, TokenInterface};

use crate::{
    channel::{self, SettleChannelArgs, SettlementAccounts},
    errors::LedgerError,
    events::ChannelCloseRequested,
    state::*,
};

/// The accounts of `settle_channel`, with a signer that may also be the payer.
#[event_cpi]
#[derive(Accounts)]
pub struct CloseChannel<'info> {
    /// The channel's payer, its payee or the service authority; pays the fee.
    #[account(mut)]
    pub signer: Signer<'info>,
    #[account(seeds = [CONFIG_SEED], bump = config.bump)]
    pub config: Account<'info, Config>,
    #[account(
        mut,
        seeds = [CHANNEL_SEED, channel.payer.as_ref(), channel.payee.as_ref(), &channel.channel_id],
        bump = channel.bump
    )]
    pub channel: Account<'info, Channel>,
    #[account(mut, seeds = [ESCROW_SEED, channel.key().as_ref()], bump = channel.escrow_bump)]
    pub escrow: InterfaceAccount<'info, TokenAccount>,
    pub mint: InterfaceAccount<'info, Mint>,
    /// Receives a final settlement's delta: a token account of the payee in the channel's mint.
    #[account(mut)]
    pub payee_token: InterfaceAccount<'info, TokenAccount>,
    #[account(mut)]
    pub invocation: Option<Account<'info, Invocation>>,
    pub token_program: Interface<'info, TokenInterface>,
    /// CHECK: the instructions sysvar (address checked).
    #[account(address = solana_instructions_sysvar::ID @ LedgerError::VoucherSignatureMissing)]
    pub instructions: UncheckedAccount<'info>,
}

/// Requests the close of a channel: from now on no top up, and the payer may take the refund once
/// the withdraw delay has passed (`refund_channel`). Signed by the payer, the payee or the service
/// authority; the payee or the authority may settle a final voucher in the same instruction.
pub fn handle_close_channel(ctx: Context<CloseChannel>, final_settlement: Option<SettleChannelArgs>) -> Result<()> {
    let clock = Clock::get()?;
    let accounts = &mut *ctx.accounts;
    let signer = accounts.signer.key();
    let channel_state = &accounts.channel;
    require!(
        signer == channel_state.payer || signer == channel_state.payee || signer == accounts.config.authority,
        LedgerError::NotChannelParty
    );
    require!(!channel_state.is_closing(), LedgerError::ChannelClosing);

    let settlement = match final_settlement.as_ref() {
        Some(args) => Some(channel::settle(
            SettlementAccounts {
                settler: signer,
                authority: accounts.config.authority,
                channel: &mut accounts.channel,
                escrow: &accounts.escrow,
                mint: &accounts.mint,
                payee_token: &accounts.payee_token,
                invocation: accounts.invocation.as_mut(),
                token_program: &accounts.token_program,
                instructions: &accounts.instructions.to_account_info(),
            },
            args,
        )?),
        None => None,
    };

    let channel = &mut ctx.accounts.channel;
    // 0 means open, so a (theoretical) request at time 0 is stored as 1.
    channel.close_requested_at = clock.unix_timestamp.max(1);
    let refundable_at = clock
        .unix_timestamp
        .checked_add(channel.withdraw_delay)
        .ok_or(LedgerError::ArithmeticOverflow)?;
    let requested = ChannelCloseRequested {
        channel: channel.key(),
        requested_by: signer,
        close_requested_at: channel.close_requested_at,
        refundable_at,
        slot: clock.slot,
    };
    if let Some(settlement) = settlement {
        emit_cpi!(settlement.settled);
        for payment in settlement.payments {
            emit_cpi!(payment);
        }
    }
    emit_cpi!(requested);
    Ok(())
}
