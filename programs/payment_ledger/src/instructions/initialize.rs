use anchor_lang::prelude::*;
use anchor_spl::token_interface::Mint;

use crate::{events::ConfigInitialized, state::*};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct InitializeArgs {
    pub treasury: Pubkey,
}

#[event_cpi]
#[derive(Accounts)]
pub struct Initialize<'info> {
    #[account(mut)]
    pub authority: Signer<'info>,
    #[account(
        init,
        payer = authority,
        space = 8 + Config::INIT_SPACE,
        seeds = [CONFIG_SEED],
        bump
    )]
    pub config: Account<'info, Config>,
    pub settlement_mint: InterfaceAccount<'info, Mint>,
    pub system_program: Program<'info, System>,
}

pub fn handle_initialize(ctx: Context<Initialize>, args: InitializeArgs) -> Result<()> {
    let config = &mut ctx.accounts.config;
    config.authority = ctx.accounts.authority.key();
    config.settlement_mint = ctx.accounts.settlement_mint.key();
    config.treasury = args.treasury;
    config.decimals = ctx.accounts.settlement_mint.decimals;
    config.bump = ctx.bumps.config;
    emit_cpi!(ConfigInitialized {
        authority: config.authority,
        settlement_mint: config.settlement_mint,
        treasury: config.treasury,
        decimals: config.decimals,
    });
    Ok(())
}
