use anchor_lang::prelude::*;
use anchor_spl::token_interface::{Mint, TokenAccount, TokenInterface};

use crate::{
    channel::{self, SettleChannelArgs, SettlementAccounts},
    errors::LedgerError,
    state::*,
};

/// The accounts of a settlement (also those of `close_channel`, which may carry a final one).
#[event_cpi]
#[derive(Accounts)]
pub struct SettleChannel<'info> {
    /// The channel's payee, or the service authority acting for it; pays the fee.
    #[account(mut)]
    pub settler: Signer<'info>,
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
    /// Receives the delta: a token account of the payee in the channel's mint.
    #[account(mut)]
    pub payee_token: InterfaceAccount<'info, TokenAccount>,
    /// The channel's invocation, required when it has one.
    #[account(mut)]
    pub invocation: Option<Account<'info, Invocation>>,
    pub token_program: Interface<'info, TokenInterface>,
    /// CHECK: the instructions sysvar (address checked), where the voucher's ed25519 verification is read.
    #[account(address = solana_instructions_sysvar::ID @ LedgerError::VoucherSignatureMissing)]
    pub instructions: UncheckedAccount<'info>,
}

pub fn handle_settle_channel(ctx: Context<SettleChannel>, args: SettleChannelArgs) -> Result<()> {
    let accounts = &mut *ctx.accounts;
    let settlement = channel::settle(
        SettlementAccounts {
            settler: accounts.settler.key(),
            authority: accounts.config.authority,
            channel: &mut accounts.channel,
            escrow: &accounts.escrow,
            mint: &accounts.mint,
            payee_token: &accounts.payee_token,
            invocation: accounts.invocation.as_mut(),
            token_program: &accounts.token_program,
            instructions: &accounts.instructions.to_account_info(),
        },
        &args,
    )?;
    emit_cpi!(settlement.settled);
    for payment in settlement.payments {
        emit_cpi!(payment);
    }
    Ok(())
}
