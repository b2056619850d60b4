//! What the channel instructions share: settling a voucher (its checks, the transfer out of the
//! escrow, the records) and emptying and closing the escrow. Handlers emit the events this module
//! returns, since `emit_cpi!` needs their context.

use anchor_lang::prelude::*;
use anchor_spl::token_interface::{self, CloseAccount, Mint, TokenAccount, TokenInterface, TransferChecked};

use crate::{
    errors::LedgerError,
    events::{ChannelSettled, PaymentRecorded},
    instructions::record_payment::charge_invocation,
    state::*,
    voucher::{self, Voucher},
};

/// One charge a voucher covers: a paid request, recorded as its own `PaymentRecorded`.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelCharge {
    /// Allocated by the payer, strictly increasing within the channel.
    pub payment_id: u64,
    /// Base units; the charges of a settlement sum to the voucher's delta.
    pub amount: u64,
    /// Index into the settlement's `endpoints` (endpoint hashes are sent once per settlement).
    pub endpoint: u8,
}

/// A voucher and the charges it adds to the last settled one.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Debug)]
pub struct SettleChannelArgs {
    pub cumulative_amount: u64,
    pub sequence: u64,
    /// sha256 of each endpoint (host and path) the charges name, at most 256.
    pub endpoints: Vec<[u8; 32]>,
    pub charges: Vec<ChannelCharge>,
}

/// The accounts a settlement touches, borrowed from the instruction's `Accounts`.
pub struct SettlementAccounts<'a, 'info> {
    pub settler: Pubkey,
    pub authority: Pubkey,
    pub channel: &'a mut Account<'info, Channel>,
    pub escrow: &'a InterfaceAccount<'info, TokenAccount>,
    pub mint: &'a InterfaceAccount<'info, Mint>,
    pub payee_token: &'a InterfaceAccount<'info, TokenAccount>,
    pub invocation: Option<&'a mut Account<'info, Invocation>>,
    pub token_program: &'a Interface<'info, TokenInterface>,
    pub instructions: &'a AccountInfo<'info>,
}

/// The events of one settlement, in the order they are emitted.
pub struct Settlement {
    pub settled: ChannelSettled,
    pub payments: Vec<PaymentRecorded>,
}

/// The signer seeds of the channel PDA (the escrow's owner).
macro_rules! channel_seeds {
    ($channel:expr) => {
        &[
            CHANNEL_SEED,
            $channel.payer.as_ref(),
            $channel.payee.as_ref(),
            &$channel.channel_id[..],
            &[$channel.bump],
        ]
    };
}

/// Settles `args` into the channel: every check of docs/ledger.md "Channels", then the delta from
/// the escrow to the payee's token account. Fails without any change when a check fails.
pub fn settle(accounts: SettlementAccounts, args: &SettleChannelArgs) -> Result<Settlement> {
    let SettlementAccounts { settler, authority, channel, escrow, mint, payee_token, invocation, token_program, instructions } =
        accounts;
    require!(settler == channel.payee || settler == authority, LedgerError::NotChannelSettler);
    require_keys_eq!(mint.key(), channel.mint, LedgerError::WrongMint);
    require_keys_eq!(payee_token.mint, channel.mint, LedgerError::WrongMint);
    require_keys_eq!(payee_token.owner, channel.payee, LedgerError::TokenAccountMismatch);
    require!(args.cumulative_amount > channel.settled, LedgerError::VoucherNotIncreasing);
    require!(args.cumulative_amount <= channel.deposit, LedgerError::VoucherExceedsDeposit);
    let delta = args.cumulative_amount - channel.settled;
    let expected_sequence = (args.charges.len() as u64)
        .checked_add(channel.sequence)
        .ok_or(LedgerError::ArithmeticOverflow)?;
    require!(args.sequence == expected_sequence, LedgerError::VoucherSequenceMismatch);

    // The charges: positive, ids strictly increasing, summing to the delta, hashed into the digest.
    let mut digest = channel.charges_digest;
    let mut last_payment_id = channel.last_payment_id;
    let mut sum: u64 = 0;
    for charge in &args.charges {
        require!(charge.amount > 0, LedgerError::ZeroAmount);
        require!(charge.payment_id > last_payment_id, LedgerError::ChargePaymentIdNotIncreasing);
        let endpoint = args
            .endpoints
            .get(charge.endpoint as usize)
            .ok_or(LedgerError::InvalidChargeEndpoint)?;
        sum = sum.checked_add(charge.amount).ok_or(LedgerError::ArithmeticOverflow)?;
        digest = voucher::next_charges_digest(&digest, charge.payment_id, charge.amount, endpoint);
        last_payment_id = charge.payment_id;
    }
    require!(sum == delta, LedgerError::ChargesDoNotMatchDelta);

    // The payer's signature over exactly this state, verified by the precompile right before us.
    let voucher = Voucher { cumulative_amount: args.cumulative_amount, sequence: args.sequence, charges_digest: digest };
    let message = voucher::voucher_message(&channel.key(), &voucher);
    check_signed_by_payer(instructions, &channel.payer, &message)?;

    // The invocation the channel was opened under, charged per charge exactly like record_payment.
    let mut invocation = match (channel.invocation, invocation) {
        (None, None) => None,
        (Some(bound), Some(account)) if account.key() == bound => Some(account),
        _ => return err!(LedgerError::ChannelInvocationMismatch),
    };

    let clock = Clock::get()?;
    let mut payments = Vec::with_capacity(args.charges.len());
    for charge in &args.charges {
        let parent = match invocation.as_mut() {
            Some(account) => Some(charge_invocation(account, channel.payer, charge.amount)?),
            None => None,
        };
        payments.push(PaymentRecorded {
            payer: channel.payer,
            payee: channel.payee,
            payment_id: charge.payment_id,
            amount: charge.amount,
            mint: channel.mint,
            protocol: channel.protocol,
            rail: Rail::Stablecoin,
            endpoint_hash: args.endpoints[charge.endpoint as usize],
            atomic: true,
            settlement_reference: None,
            parent,
            recorded_at: clock.unix_timestamp,
            slot: clock.slot,
        });
    }

    token_interface::transfer_checked(
        CpiContext::new_with_signer(
            token_program.key(),
            TransferChecked {
                from: escrow.to_account_info(),
                mint: mint.to_account_info(),
                to: payee_token.to_account_info(),
                authority: channel.to_account_info(),
            },
            &[channel_seeds!(channel)],
        ),
        delta,
        mint.decimals,
    )?;

    channel.settled = args.cumulative_amount;
    channel.sequence = args.sequence;
    channel.charges_digest = digest;
    channel.last_payment_id = last_payment_id;
    Ok(Settlement {
        settled: ChannelSettled {
            channel: channel.key(),
            payer: channel.payer,
            payee: channel.payee,
            settler,
            cumulative_amount: args.cumulative_amount,
            delta,
            sequence: args.sequence,
            charge_count: args.charges.len() as u32,
            charges_digest: digest,
            slot: clock.slot,
        },
        payments,
    })
}

/// The top-level instruction right before the current one must be the ed25519 precompile
/// verifying `payer`'s signature over `message` (see `voucher::check_voucher_signature`).
fn check_signed_by_payer(instructions: &AccountInfo, payer: &Pubkey, message: &[u8]) -> Result<()> {
    use solana_instructions_sysvar::{load_current_index_checked, load_instruction_at_checked};
    let current = load_current_index_checked(instructions)?;
    require!(current > 0, LedgerError::VoucherSignatureMissing);
    let previous = current - 1;
    let instruction = load_instruction_at_checked(previous as usize, instructions)?;
    voucher::check_voucher_signature(&instruction.program_id, &instruction.data, previous, payer, message)
}

/// Sends everything left in the escrow to the payer's token account and closes the escrow, its
/// rent going to `rent_payer`. Returns the amount refunded.
pub fn empty_escrow<'info>(
    channel: &Account<'info, Channel>,
    escrow: &InterfaceAccount<'info, TokenAccount>,
    mint: &InterfaceAccount<'info, Mint>,
    payer_token: &InterfaceAccount<'info, TokenAccount>,
    rent_payer: &AccountInfo<'info>,
    token_program: &Interface<'info, TokenInterface>,
) -> Result<u64> {
    require_keys_eq!(mint.key(), channel.mint, LedgerError::WrongMint);
    require_keys_eq!(payer_token.mint, channel.mint, LedgerError::WrongMint);
    require_keys_eq!(payer_token.owner, channel.payer, LedgerError::TokenAccountMismatch);
    require_keys_eq!(rent_payer.key(), channel.rent_payer, LedgerError::ChannelAccountMismatch);
    let seeds: &[&[&[u8]]] = &[channel_seeds!(channel)];
    // Everything the escrow holds: the unsettled deposit, and anything sent to it directly.
    let refund = escrow.amount;
    if refund > 0 {
        token_interface::transfer_checked(
            CpiContext::new_with_signer(
                token_program.key(),
                TransferChecked {
                    from: escrow.to_account_info(),
                    mint: mint.to_account_info(),
                    to: payer_token.to_account_info(),
                    authority: channel.to_account_info(),
                },
                seeds,
            ),
            refund,
            mint.decimals,
        )?;
    }
    token_interface::close_account(CpiContext::new_with_signer(
        token_program.key(),
        CloseAccount {
            account: escrow.to_account_info(),
            destination: rent_payer.clone(),
            authority: channel.to_account_info(),
        },
        seeds,
    ))?;
    Ok(refund)
}
