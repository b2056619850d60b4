//! Instruction builders for payment_ledger, from the Anchor-generated client types (the same
//! IDL-derived layout the TypeScript coder uses).

use anchor_lang::{solana_program::pubkey::Pubkey, InstructionData, ToAccountMetas};
use payment_ledger::{OpenInvocationArgs, RecordAttestedPaymentArgs, RecordPaymentArgs};
use solana_instruction::Instruction;

use crate::address::{
    associated_token_address, config_address, event_authority_address, invocation_address,
    payer_state_address,
};

/// The token accounts of an atomic stablecoin payment.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    pub mint: Pubkey,
    pub payer_token: Pubkey,
    pub payee_token: Pubkey,
}

impl Transfer {
    /// Associated token accounts of payer and payee for `mint`.
    pub fn between(payer: &Pubkey, payee: &Pubkey, mint: &Pubkey) -> Self {
        Transfer {
            mint: *mint,
            payer_token: associated_token_address(payer, mint),
            payee_token: associated_token_address(payee, mint),
        }
    }
}

pub fn record_payment_ix(
    authority: &Pubkey,
    payer: &Pubkey,
    payee: &Pubkey,
    args: RecordPaymentArgs,
    transfer: Option<Transfer>,
    invocation: Option<Pubkey>,
) -> Instruction {
    let accounts = payment_ledger::accounts::RecordPayment {
        authority: *authority,
        payer: *payer,
        payee: *payee,
        config: config_address(),
        payer_state: payer_state_address(payer),
        invocation,
        mint: transfer.map(|t| t.mint),
        payer_token: transfer.map(|t| t.payer_token),
        payee_token: transfer.map(|t| t.payee_token),
        token_program: transfer.map(|_| spl_token_interface::ID),
        system_program: solana_system_interface::program::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::RecordPayment { args };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

/// A record the authority alone signs, naming the settlement transaction a non-custodial payer signed.
pub fn record_attested_payment_ix(authority: &Pubkey, payer: &Pubkey, payee: &Pubkey, args: RecordAttestedPaymentArgs) -> Instruction {
    let accounts = payment_ledger::accounts::RecordAttestedPayment {
        authority: *authority,
        payer: *payer,
        payee: *payee,
        config: config_address(),
        payer_state: payer_state_address(payer),
        system_program: solana_system_interface::program::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::RecordAttestedPayment { args };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

pub fn open_invocation_ix(authority: &Pubkey, invoker: &Pubkey, args: OpenInvocationArgs) -> Instruction {
    let accounts = payment_ledger::accounts::OpenInvocation {
        authority: *authority,
        invoker: *invoker,
        config: config_address(),
        invocation: invocation_address(&args.parent_signature, &args.sub_agent),
        system_program: solana_system_interface::program::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::OpenInvocation { args };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}
