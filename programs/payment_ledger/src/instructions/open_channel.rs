use anchor_lang::prelude::*;
use anchor_spl::token_interface::{self, Mint, TokenAccount, TokenInterface, TransferChecked};

use crate::{errors::LedgerError, events::ChannelOpened, state::*, voucher};

/// Longest withdraw delay a channel may ask for (30 days).
pub const MAX_WITHDRAW_DELAY_SECONDS: i64 = 30 * 24 * 60 * 60;

#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct OpenChannelArgs {
    /// The payer's salt for this channel (random; part of the channel address).
    pub channel_id: [u8; 32],
    /// Base units moved from the payer's token account into the escrow.
    pub deposit: u64,
    /// Unix seconds; from then on the payer may force-close.
    pub expires_at: i64,
    /// Seconds between a close request and the payer's refund.
    pub withdraw_delay: i64,
    pub protocol: Protocol,
}

#[event_cpi]
#[derive(Accounts)]
#[instruction(args: OpenChannelArgs)]
pub struct OpenChannel<'info> {
    /// The service key: authorizes the channel and pays the rent of channel and escrow.
    #[account(mut)]
    pub authority: Signer<'info>,
    /// The agent wallet that escrows the deposit and will sign the vouchers.
    pub payer: Signer<'info>,
    /// CHECK: the receiving wallet; only its address is bound to the channel.
    pub payee: UncheckedAccount<'info>,
    #[account(
        seeds = [CONFIG_SEED],
        bump = config.bump,
        has_one = authority @ LedgerError::Unauthorized
    )]
    pub config: Account<'info, Config>,
    pub mint: InterfaceAccount<'info, Mint>,
    #[account(mut)]
    pub payer_token: InterfaceAccount<'info, TokenAccount>,
    #[account(
        init,
        payer = authority,
        space = 8 + Channel::INIT_SPACE,
        seeds = [CHANNEL_SEED, payer.key().as_ref(), payee.key().as_ref(), &args.channel_id],
        bump
    )]
    pub channel: Account<'info, Channel>,
    #[account(
        init,
        payer = authority,
        seeds = [ESCROW_SEED, channel.key().as_ref()],
        bump,
        token::mint = mint,
        token::authority = channel,
        token::token_program = token_program
    )]
    pub escrow: InterfaceAccount<'info, TokenAccount>,
    /// Present when the channel's charges are made under an `agents.invoke` budget.
    pub invocation: Option<Account<'info, Invocation>>,
    pub token_program: Interface<'info, TokenInterface>,
    pub system_program: Program<'info, System>,
}

pub fn handle_open_channel(ctx: Context<OpenChannel>, args: OpenChannelArgs) -> Result<()> {
    let clock = Clock::get()?;
    let accounts = &ctx.accounts;
    require!(args.deposit > 0, LedgerError::ZeroAmount);
    require!(args.expires_at > clock.unix_timestamp, LedgerError::InvalidChannelExpiry);
    require!(
        (1..=MAX_WITHDRAW_DELAY_SECONDS).contains(&args.withdraw_delay),
        LedgerError::InvalidWithdrawDelay
    );
    require_keys_neq!(accounts.payer.key(), accounts.payee.key(), LedgerError::ChannelPayeeIsPayer);
    require_keys_eq!(accounts.mint.key(), accounts.config.settlement_mint, LedgerError::WrongMint);
    require_keys_eq!(accounts.payer_token.mint, accounts.mint.key(), LedgerError::WrongMint);
    require_keys_eq!(accounts.payer_token.owner, accounts.payer.key(), LedgerError::TokenAccountMismatch);
    require!(accounts.payer_token.amount >= args.deposit, LedgerError::InsufficientFunds);
    if let Some(invocation) = accounts.invocation.as_ref() {
        require_keys_eq!(invocation.sub_agent, accounts.payer.key(), LedgerError::InvocationPayerMismatch);
        require!(
            args.deposit <= invocation.budget.saturating_sub(invocation.spent),
            LedgerError::InvocationBudgetExceeded
        );
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
        args.deposit,
        accounts.mint.decimals,
    )?;

    let address = accounts.channel.key();
    let invocation = accounts.invocation.as_ref().map(|invocation| invocation.key());
    let channel = &mut ctx.accounts.channel;
    channel.payer = ctx.accounts.payer.key();
    channel.payee = ctx.accounts.payee.key();
    channel.mint = ctx.accounts.mint.key();
    channel.channel_id = args.channel_id;
    channel.rent_payer = ctx.accounts.authority.key();
    channel.invocation = invocation;
    channel.protocol = args.protocol;
    channel.deposit = args.deposit;
    channel.settled = 0;
    channel.sequence = 0;
    channel.charges_digest = voucher::initial_charges_digest(&address, clock.slot);
    channel.last_payment_id = 0;
    channel.opened_at = clock.unix_timestamp;
    channel.opened_slot = clock.slot;
    channel.expires_at = args.expires_at;
    channel.withdraw_delay = args.withdraw_delay;
    channel.close_requested_at = 0;
    channel.bump = ctx.bumps.channel;
    channel.escrow_bump = ctx.bumps.escrow;

    emit_cpi!(ChannelOpened {
        channel: address,
        payer: channel.payer,
        payee: channel.payee,
        mint: channel.mint,
        channel_id: channel.channel_id,
        deposit: channel.deposit,
        protocol: channel.protocol,
        invocation: channel.invocation,
        expires_at: channel.expires_at,
        withdraw_delay: channel.withdraw_delay,
        opened_at: channel.opened_at,
        slot: clock.slot,
    });
    Ok(())
}
