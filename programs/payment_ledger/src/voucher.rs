//! Channel vouchers: the exact bytes a payer signs, the hash chain that binds every charge to
//! them, and how a settlement finds the payer's signature verified by the ed25519 precompile.
//!
//! Voucher message (113 bytes, what the payer's ed25519 key signs):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 33 | `VOUCHER_DOMAIN`, ASCII `payment_ledger:channel-voucher:v1` |
//! | 33 | 32 | channel account address |
//! | 65 | 8 | cumulative amount, u64 little-endian (base units paid to the payee since open) |
//! | 73 | 8 | sequence, u64 little-endian (number of charges since open) |
//! | 81 | 32 | charges digest after the `sequence`-th charge |
//!
//! Charges digest: `d0 = sha256(CHARGES_DOMAIN || channel || opened_slot as u64 LE)`, then per
//! charge `d_i = sha256(d_{i-1} || payment_id u64 LE || amount u64 LE || endpoint_hash)`. The
//! payer's signature therefore covers every charge (id, amount, endpoint), not just the total, and
//! a voucher of a closed channel never matches a channel later opened at the same address in
//! another slot.

use anchor_lang::prelude::*;
use solana_sha256_hasher::hashv;

use crate::errors::LedgerError;

pub const VOUCHER_DOMAIN: &[u8; 33] = b"payment_ledger:channel-voucher:v1";
pub const CHARGES_DOMAIN: &[u8; 33] = b"payment_ledger:channel-charges:v1";
pub const VOUCHER_MESSAGE_LEN: usize = 33 + 32 + 8 + 8 + 32;

/// The ed25519 signature-verification precompile.
pub const ED25519_PROGRAM_ID: Pubkey = pubkey!("Ed25519SigVerify111111111111111111111111111");

/// What a payer signs for a channel state.
#[derive(AnchorSerialize, AnchorDeserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Voucher {
    pub cumulative_amount: u64,
    pub sequence: u64,
    pub charges_digest: [u8; 32],
}

pub fn voucher_message(channel: &Pubkey, voucher: &Voucher) -> [u8; VOUCHER_MESSAGE_LEN] {
    let mut message = [0u8; VOUCHER_MESSAGE_LEN];
    message[..33].copy_from_slice(VOUCHER_DOMAIN);
    message[33..65].copy_from_slice(channel.as_ref());
    message[65..73].copy_from_slice(&voucher.cumulative_amount.to_le_bytes());
    message[73..81].copy_from_slice(&voucher.sequence.to_le_bytes());
    message[81..].copy_from_slice(&voucher.charges_digest);
    message
}

/// The digest of a channel with no charge yet.
pub fn initial_charges_digest(channel: &Pubkey, opened_slot: u64) -> [u8; 32] {
    hashv(&[CHARGES_DOMAIN, channel.as_ref(), &opened_slot.to_le_bytes()]).to_bytes()
}

pub fn next_charges_digest(previous: &[u8; 32], payment_id: u64, amount: u64, endpoint_hash: &[u8; 32]) -> [u8; 32] {
    hashv(&[previous, &payment_id.to_le_bytes(), &amount.to_le_bytes(), endpoint_hash]).to_bytes()
}

/// Size of the header and of one offsets entry in an ed25519 precompile instruction.
const ED25519_HEADER: usize = 2;
const ED25519_OFFSETS: usize = 14;
/// An offsets' instruction index meaning "this instruction".
const THIS_INSTRUCTION: u16 = u16::MAX;

fn read_u16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

/// Checks that `instruction` (the one right before the settlement) is an ed25519 precompile
/// verification of exactly one signature by `payer` over exactly `message`, with signature, key
/// and message all inside that instruction's own data. The runtime fails the whole transaction
/// before the settlement runs if that signature is invalid, so this check is all a settlement
/// needs: the precompile verified precisely the key and bytes read here.
pub fn check_voucher_signature(
    program_id: &Pubkey,
    data: &[u8],
    own_index: u16,
    payer: &Pubkey,
    message: &[u8],
) -> Result<()> {
    require_keys_eq!(*program_id, ED25519_PROGRAM_ID, LedgerError::VoucherSignatureMissing);
    require!(data.len() >= ED25519_HEADER + ED25519_OFFSETS && data[0] == 1, LedgerError::VoucherSignatureMissing);
    let field = |n: usize| read_u16(data, ED25519_HEADER + 2 * n).ok_or(LedgerError::VoucherSignatureMissing);
    let (signature_ix, key_offset, key_ix) = (field(1)?, field(2)? as usize, field(3)?);
    let (message_offset, message_size, message_ix) = (field(4)? as usize, field(5)? as usize, field(6)?);
    let here = |index: u16| index == THIS_INSTRUCTION || index == own_index;
    require!(here(signature_ix) && here(key_ix) && here(message_ix), LedgerError::VoucherSignatureMissing);

    let key = data.get(key_offset..key_offset + 32).ok_or(LedgerError::VoucherSignatureMissing)?;
    require!(key == payer.as_ref(), LedgerError::VoucherSignerMismatch);
    let signed = data
        .get(message_offset..message_offset + message_size)
        .ok_or(LedgerError::VoucherSignatureMissing)?;
    require!(signed == message, LedgerError::VoucherMessageMismatch);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ed25519_data(key: &[u8; 32], message: &[u8], indexes: [u16; 3]) -> Vec<u8> {
        let (key_offset, signature_offset) = (16u16, 48u16);
        let message_offset = 112u16;
        let mut data = vec![1, 0];
        for value in [
            signature_offset,
            indexes[0],
            key_offset,
            indexes[1],
            message_offset,
            message.len() as u16,
            indexes[2],
        ] {
            data.extend_from_slice(&value.to_le_bytes());
        }
        data.extend_from_slice(key);
        data.extend_from_slice(&[7u8; 64]);
        data.extend_from_slice(message);
        data
    }

    fn code(result: Result<()>) -> u32 {
        match result {
            Err(Error::AnchorError(error)) => error.error_code_number,
            other => panic!("expected an anchor error, got {other:?}"),
        }
    }

    #[test]
    fn the_voucher_message_is_the_documented_113_bytes() {
        let channel = Pubkey::new_from_array([9; 32]);
        let voucher = Voucher { cumulative_amount: 0x0102, sequence: 3, charges_digest: [5; 32] };
        let message = voucher_message(&channel, &voucher);
        assert_eq!(message.len(), 113);
        assert_eq!(&message[..33], b"payment_ledger:channel-voucher:v1");
        assert_eq!(&message[33..65], &[9; 32]);
        assert_eq!(&message[65..73], &[2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&message[73..81], &[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&message[81..], &[5; 32]);
    }

    #[test]
    fn the_charges_digest_depends_on_every_field_and_on_the_open_slot() {
        let channel = Pubkey::new_from_array([1; 32]);
        let start = initial_charges_digest(&channel, 10);
        assert_ne!(start, initial_charges_digest(&channel, 11));
        let one = next_charges_digest(&start, 1, 100, &[2; 32]);
        for other in [
            next_charges_digest(&start, 2, 100, &[2; 32]),
            next_charges_digest(&start, 1, 101, &[2; 32]),
            next_charges_digest(&start, 1, 100, &[3; 32]),
        ] {
            assert_ne!(one, other);
        }
    }

    #[test]
    fn a_signature_instruction_is_accepted_only_for_the_payer_and_the_exact_message() {
        let payer = Pubkey::new_from_array([4; 32]);
        let message = [6u8; VOUCHER_MESSAGE_LEN];
        let own = [THIS_INSTRUCTION; 3];
        let data = ed25519_data(&[4; 32], &message, own);
        assert!(check_voucher_signature(&ED25519_PROGRAM_ID, &data, 0, &payer, &message).is_ok());
        // Absolute index of the instruction itself is the same thing.
        let data_abs = ed25519_data(&[4; 32], &message, [2, 2, 2]);
        assert!(check_voucher_signature(&ED25519_PROGRAM_ID, &data_abs, 2, &payer, &message).is_ok());

        let missing = u32::from(LedgerError::VoucherSignatureMissing);
        let other_program = Pubkey::new_from_array([8; 32]);
        assert_eq!(code(check_voucher_signature(&other_program, &data, 0, &payer, &message)), missing);
        let other_key = ed25519_data(&[5; 32], &message, own);
        assert_eq!(
            code(check_voucher_signature(&ED25519_PROGRAM_ID, &other_key, 0, &payer, &message)),
            u32::from(LedgerError::VoucherSignerMismatch)
        );
        let mut other_message = message;
        other_message[70] ^= 1;
        assert_eq!(
            code(check_voucher_signature(&ED25519_PROGRAM_ID, &data, 0, &payer, &other_message)),
            u32::from(LedgerError::VoucherMessageMismatch)
        );
        // Key or message taken from another instruction: the precompile checked other bytes.
        for indexes in [[1, THIS_INSTRUCTION, THIS_INSTRUCTION], [THIS_INSTRUCTION, 1, THIS_INSTRUCTION], [THIS_INSTRUCTION, THIS_INSTRUCTION, 1]] {
            let elsewhere = ed25519_data(&[4; 32], &message, indexes);
            assert_eq!(code(check_voucher_signature(&ED25519_PROGRAM_ID, &elsewhere, 0, &payer, &message)), missing);
        }
        // Two signatures, truncated data, offsets past the end.
        let mut two = data.clone();
        two[0] = 2;
        assert_eq!(code(check_voucher_signature(&ED25519_PROGRAM_ID, &two, 0, &payer, &message)), missing);
        assert_eq!(code(check_voucher_signature(&ED25519_PROGRAM_ID, &data[..10], 0, &payer, &message)), missing);
        assert_eq!(code(check_voucher_signature(&ED25519_PROGRAM_ID, &data[..150], 0, &payer, &message)), missing);
    }
}
