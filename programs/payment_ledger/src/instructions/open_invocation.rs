use anchor_lang::prelude::*;

use crate::{errors::LedgerError, events::InvocationOpened, state::*};

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct OpenInvocationArgs {
    /// Signature of the invoking transaction: the parent of every payment made under it.
    pub parent_signature: [u8; 64],
    pub sub_agent: Pubkey,
    /// Hard cap, in settlement-mint base units, on what the sub-agent may spend under it.
    pub budget: u64,
}

#[event_cpi]
#[derive(Accounts)]
#[instruction(args: OpenInvocationArgs)]
pub struct OpenInvocation<'info> {
    #[account(mut)]
    pub authority: Signer<'info>,
    pub invoker: Signer<'info>,
    #[account(
        seeds = [CONFIG_SEED],
        bump = config.bump,
        has_one = authority @ LedgerError::Unauthorized
    )]
    pub config: Account<'info, Config>,
    #[account(
        init,
        payer = authority,
        space = 8 + Invocation::INIT_SPACE,
        seeds = [
            INVOCATION_SEED,
            &args.parent_signature[..32],
            &args.parent_signature[32..],
            args.sub_agent.as_ref()
        ],
        bump
    )]
    pub invocation: Account<'info, Invocation>,
    pub system_program: Program<'info, System>,
}

pub fn handle_open_invocation(ctx: Context<OpenInvocation>, args: OpenInvocationArgs) -> Result<()> {
    require!(args.budget > 0, LedgerError::ZeroBudget);
    let clock = Clock::get()?;
    let invocation = &mut ctx.accounts.invocation;
    invocation.invoker = ctx.accounts.invoker.key();
    invocation.sub_agent = args.sub_agent;
    invocation.parent_signature = args.parent_signature;
    invocation.budget = args.budget;
    invocation.spent = 0;
    invocation.payment_count = 0;
    invocation.opened_at = clock.unix_timestamp;
    invocation.bump = ctx.bumps.invocation;
    emit_cpi!(InvocationOpened {
        invocation: invocation.key(),
        invoker: invocation.invoker,
        sub_agent: invocation.sub_agent,
        parent_signature: invocation.parent_signature,
        budget: invocation.budget,
        opened_at: invocation.opened_at,
        slot: clock.slot,
    });
    Ok(())
}
