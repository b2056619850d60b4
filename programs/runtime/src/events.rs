//! The events payment_ledger emitted in an executed transaction, decoded from its `emit_cpi!`
//! inner instructions with the Anchor-generated event types.

use anchor_lang::{solana_program::pubkey::Pubkey, AnchorDeserialize, Discriminator};
use litesvm::types::TransactionMetadata;

/// `sha256("anchor:event")[..8]` read as a big-endian u64, written little-endian on the wire.
pub const EVENT_IX_TAG_LE: [u8; 8] = [0xe4, 0x45, 0xa5, 0x2e, 0x51, 0xcb, 0x9a, 0x1d];

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
