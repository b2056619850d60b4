//! Payment channels from the client side: addresses, instruction builders, and the payer's side of
//! a voucher (charges hashed into the digest, the message signed, the ed25519 precompile
//! instruction that carries the signature to the settlement).

use anchor_lang::{solana_program::pubkey::Pubkey, InstructionData, ToAccountMetas};
use payment_ledger::{
    voucher::{self, Voucher},
    ChannelCharge, OpenChannelArgs, SettleChannelArgs,
};
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::address::{associated_token_address, config_address, event_authority_address};

pub fn channel_address(payer: &Pubkey, payee: &Pubkey, channel_id: &[u8; 32]) -> Pubkey {
    Pubkey::find_program_address(
        &[payment_ledger::CHANNEL_SEED, payer.as_ref(), payee.as_ref(), channel_id],
        &payment_ledger::ID,
    )
    .0
}

pub fn escrow_address(channel: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(&[payment_ledger::ESCROW_SEED, channel.as_ref()], &payment_ledger::ID).0
}

/// Everything that names one channel.
#[derive(Clone, Copy, Debug)]
pub struct ChannelKeys {
    pub payer: Pubkey,
    pub payee: Pubkey,
    pub mint: Pubkey,
    pub channel_id: [u8; 32],
    pub address: Pubkey,
    pub escrow: Pubkey,
}

impl ChannelKeys {
    pub fn new(payer: &Pubkey, payee: &Pubkey, mint: &Pubkey, channel_id: [u8; 32]) -> Self {
        let address = channel_address(payer, payee, &channel_id);
        ChannelKeys { payer: *payer, payee: *payee, mint: *mint, channel_id, address, escrow: escrow_address(&address) }
    }
}

pub fn open_channel_ix(authority: &Pubkey, keys: &ChannelKeys, args: OpenChannelArgs, invocation: Option<Pubkey>) -> Instruction {
    assert_eq!(args.channel_id, keys.channel_id, "the args name the channel the keys derive");
    let accounts = payment_ledger::accounts::OpenChannel {
        authority: *authority,
        payer: keys.payer,
        payee: keys.payee,
        config: config_address(),
        mint: keys.mint,
        payer_token: associated_token_address(&keys.payer, &keys.mint),
        channel: keys.address,
        escrow: keys.escrow,
        invocation,
        token_program: spl_token_interface::ID,
        system_program: solana_system_interface::program::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::OpenChannel { args };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

pub fn top_up_channel_ix(keys: &ChannelKeys, amount: u64, invocation: Option<Pubkey>) -> Instruction {
    let accounts = payment_ledger::accounts::TopUpChannel {
        payer: keys.payer,
        channel: keys.address,
        escrow: keys.escrow,
        mint: keys.mint,
        payer_token: associated_token_address(&keys.payer, &keys.mint),
        invocation,
        token_program: spl_token_interface::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::TopUpChannel { amount };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

/// `settle_channel`; the payee's associated token account receives the delta unless `payee_token` is given.
pub fn settle_channel_ix(
    settler: &Pubkey,
    keys: &ChannelKeys,
    args: SettleChannelArgs,
    invocation: Option<Pubkey>,
    payee_token: Option<Pubkey>,
) -> Instruction {
    let accounts = payment_ledger::accounts::SettleChannel {
        settler: *settler,
        config: config_address(),
        channel: keys.address,
        escrow: keys.escrow,
        mint: keys.mint,
        payee_token: payee_token.unwrap_or_else(|| associated_token_address(&keys.payee, &keys.mint)),
        invocation,
        token_program: spl_token_interface::ID,
        instructions: solana_instructions_sysvar::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::SettleChannel { args };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

pub fn close_channel_ix(
    signer: &Pubkey,
    keys: &ChannelKeys,
    final_settlement: Option<SettleChannelArgs>,
    invocation: Option<Pubkey>,
) -> Instruction {
    let accounts = payment_ledger::accounts::CloseChannel {
        signer: *signer,
        config: config_address(),
        channel: keys.address,
        escrow: keys.escrow,
        mint: keys.mint,
        payee_token: associated_token_address(&keys.payee, &keys.mint),
        invocation,
        token_program: spl_token_interface::ID,
        instructions: solana_instructions_sysvar::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    };
    let data = payment_ledger::instruction::CloseChannel { final_settlement };
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None))
}

fn finish_accounts(signer: &Pubkey, keys: &ChannelKeys, rent_payer: &Pubkey) -> Vec<solana_instruction::AccountMeta> {
    payment_ledger::accounts::FinishChannel {
        signer: *signer,
        config: config_address(),
        channel: keys.address,
        escrow: keys.escrow,
        mint: keys.mint,
        payer_token: associated_token_address(&keys.payer, &keys.mint),
        rent_payer: *rent_payer,
        token_program: spl_token_interface::ID,
        event_authority: event_authority_address(),
        program: payment_ledger::ID,
    }
    .to_account_metas(None)
}

pub fn refund_channel_ix(signer: &Pubkey, keys: &ChannelKeys, rent_payer: &Pubkey) -> Instruction {
    let data = payment_ledger::instruction::RefundChannel {};
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), finish_accounts(signer, keys, rent_payer))
}

pub fn force_close_channel_ix(signer: &Pubkey, keys: &ChannelKeys, rent_payer: &Pubkey) -> Instruction {
    let data = payment_ledger::instruction::ForceCloseChannel {};
    Instruction::new_with_bytes(payment_ledger::ID, &data.data(), finish_accounts(signer, keys, rent_payer))
}

/// The ed25519 precompile instruction carrying `signer`'s signature over `message`.
pub fn ed25519_verify_ix(signer: &Keypair, message: &[u8]) -> Instruction {
    let signature: [u8; 64] = signer.sign_message(message).into();
    solana_ed25519_program::new_ed25519_instruction_with_signature(message, &signature, &signer.pubkey().to_bytes())
}

/// Requests `units` of compute for the transaction (a settlement emits one event per charge, and
/// each re-entry of the native program is charged a flat `NATIVE_INVOCATION_UNITS`).
pub fn compute_unit_limit_ix(units: u32) -> Instruction {
    solana_compute_budget_interface::ComputeBudgetInstruction::set_compute_unit_limit(units)
}

/// One paid request, as the payer's side of a channel knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charge {
    pub payment_id: u64,
    pub amount: u64,
    pub endpoint_hash: [u8; 32],
}

/// The payer's running state of a channel: what it has signed so far. Each `charge` advances it
/// and yields the voucher for that state; `settlement` packs the charges between two states.
#[derive(Clone, Debug)]
pub struct VoucherBook {
    pub channel: Pubkey,
    /// The digest of the channel before any charge.
    pub start: [u8; 32],
    pub cumulative_amount: u64,
    pub sequence: u64,
    pub digest: [u8; 32],
    pub charges: Vec<Charge>,
}

impl VoucherBook {
    /// A channel as opened in `opened_slot` (read from the channel account).
    pub fn new(channel: Pubkey, opened_slot: u64) -> Self {
        let start = voucher::initial_charges_digest(&channel, opened_slot);
        VoucherBook { channel, start, cumulative_amount: 0, sequence: 0, digest: start, charges: Vec::new() }
    }

    pub fn charge(&mut self, charge: Charge) -> Voucher {
        self.cumulative_amount += charge.amount;
        self.sequence += 1;
        self.digest = voucher::next_charges_digest(&self.digest, charge.payment_id, charge.amount, &charge.endpoint_hash);
        self.charges.push(charge);
        self.voucher()
    }

    pub fn voucher(&self) -> Voucher {
        Voucher { cumulative_amount: self.cumulative_amount, sequence: self.sequence, charges_digest: self.digest }
    }

    pub fn message(&self) -> [u8; voucher::VOUCHER_MESSAGE_LEN] {
        voucher::voucher_message(&self.channel, &self.voucher())
    }

    /// The settlement of charges `from..to` (0-based positions in the book; `to` is the voucher's
    /// sequence), with each distinct endpoint hash sent once.
    pub fn settlement(&self, from: usize, to: usize) -> SettleChannelArgs {
        let mut endpoints: Vec<[u8; 32]> = Vec::new();
        let charges = self.charges[from..to]
            .iter()
            .map(|charge| {
                let index = match endpoints.iter().position(|known| *known == charge.endpoint_hash) {
                    Some(index) => index,
                    None => {
                        endpoints.push(charge.endpoint_hash);
                        endpoints.len() - 1
                    }
                };
                ChannelCharge { payment_id: charge.payment_id, amount: charge.amount, endpoint: index as u8 }
            })
            .collect();
        SettleChannelArgs {
            cumulative_amount: self.charges[..to].iter().map(|charge| charge.amount).sum(),
            sequence: to as u64,
            endpoints,
            charges,
        }
    }

    /// The message the payer signed for the state after `to` charges.
    pub fn message_at(&self, to: usize) -> [u8; voucher::VOUCHER_MESSAGE_LEN] {
        let mut book = VoucherBook { digest: self.start, cumulative_amount: 0, sequence: 0, charges: Vec::new(), ..*self };
        for charge in &self.charges[..to] {
            book.charge(*charge);
        }
        book.message()
    }
}
