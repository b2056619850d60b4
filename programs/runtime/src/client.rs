//! Instruction builders and event decoding for payment_ledger, from the Anchor-generated client
//! types (the same IDL-derived layout the TypeScript coder uses).

use anchor_lang::{
    solana_program::pubkey::Pubkey, AnchorDeserialize, Discriminator, InstructionData,
    ToAccountMetas,
};
use litesvm::types::TransactionMetadata;
use payment_ledger::{OpenInvocationArgs, RecordAttestedPaymentArgs, RecordPaymentArgs};
use solana_instruction::Instruction;

use crate::ledger::{
    associated_token_address, config_address, event_authority_address, invocation_address,
    payer_state_address,
};

/// `sha256("anchor:event")[..8]` read as a big-endian u64, written little-endian on the wire.
pub const EVENT_IX_TAG_LE: [u8; 8] = [0xe4, 0x45, 0xa5, 0x2e, 0x51, 0xcb, 0x9a, 0x1d];

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

/// Every event of type `E` the program emitted with `emit_cpi!`: inner instructions to
/// payment_ledger whose data is the event tag, `E`'s discriminator and the borsh body.
/// `account_keys` are the transaction message's keys (inner instructions index into them).
pub fn emitted_events<E: AnchorDeserialize + Discriminator>(
    meta: &TransactionMetadata,
    account_keys: &[Pubkey],
) -> Vec<E> {
    meta.inner_instructions
        .iter()
        .flatten()
        .filter(|inner| account_keys.get(inner.instruction.program_id_index as usize) == Some(&payment_ledger::ID))
        .filter_map(|inner| {
            let data = inner.instruction.data.as_slice();
            let body = data.strip_prefix(&EVENT_IX_TAG_LE)?.strip_prefix(E::DISCRIMINATOR)?;
            E::try_from_slice(body).ok()
        })
        .collect()
}
