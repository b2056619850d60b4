//! What the runtime executed, with everything an RPC node reports about a transaction: the
//! message, status, logs, inner instructions, fee, and lamport and token balances before and
//! after. The local ledger serves `getTransaction`, `getBlock` and `getSignaturesForAddress`
//! from it; tests read it directly.

use anchor_lang::solana_program::pubkey::Pubkey;
use litesvm::{types::TransactionMetadata, LiteSVM};
use solana_address_lookup_table_interface::state::AddressLookupTable;
use solana_message::VersionedMessage;
use solana_slot_hashes::SlotHashes;
use sha2::{Digest, Sha256};
use solana_account::Account;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

/// An SPL token account's balance as `getTransaction` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBalance {
    pub account_index: u8,
    pub mint: Pubkey,
    pub owner: Pubkey,
    pub program_id: Pubkey,
    pub amount: u64,
    pub decimals: u8,
}

#[derive(Debug, Clone)]
pub struct ExecutedTx {
    pub transaction: VersionedTransaction,
    /// Every key the instructions index into: the message's static keys, then the addresses
    /// loaded from lookup tables (writable, then read-only), the order the runtime uses.
    pub account_keys: Vec<Pubkey>,
    /// The addresses a v0 message's lookups resolved to when it was loaded (empty for legacy).
    pub loaded: LoadedKeys,
    pub slot: u64,
    pub block_time: i64,
    /// `Err` for a transaction that was included (fee charged) but failed.
    pub status: Result<(), TransactionError>,
    pub meta: TransactionMetadata,
    pub pre_balances: Vec<u64>,
    pub post_balances: Vec<u64>,
    pub pre_token_balances: Vec<TokenBalance>,
    pub post_token_balances: Vec<TokenBalance>,
}

/// Addresses loaded from address lookup tables, as `getTransaction` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedKeys {
    pub writable: Vec<Pubkey>,
    pub readonly: Vec<Pubkey>,
}

impl LoadedKeys {
    pub fn is_empty(&self) -> bool {
        self.writable.is_empty() && self.readonly.is_empty()
    }
}

/// Resolves a message's lookups against the lookup tables as they are now, the way the runtime
/// loads them before executing (active tables only, at the clock's slot). None when a lookup
/// cannot be resolved: the runtime then refuses the transaction before running it.
pub fn loaded_keys(svm: &LiteSVM, message: &VersionedMessage) -> Option<LoadedKeys> {
    let mut loaded = LoadedKeys::default();
    let Some(lookups) = message.address_table_lookups() else {
        return Some(loaded);
    };
    let slot = svm.get_sysvar::<solana_clock::Clock>().slot;
    let slot_hashes = svm.get_sysvar::<SlotHashes>();
    for lookup in lookups {
        let table_account = svm.get_account(&lookup.account_key)?;
        if table_account.owner != solana_address_lookup_table_interface::program::ID {
            return None;
        }
        let table = AddressLookupTable::deserialize(&table_account.data).ok()?;
        loaded.writable.extend(table.lookup(slot, &lookup.writable_indexes, &slot_hashes).ok()?);
        loaded.readonly.extend(table.lookup(slot, &lookup.readonly_indexes, &slot_hashes).ok()?);
    }
    Some(loaded)
}

impl ExecutedTx {
    /// A hash of everything the transaction did as a client reads it: status, fee, compute units,
    /// logs, inner instructions, return data, and lamport and token balances before and after.
    /// Two executions with the same digest are indistinguishable through the RPC.
    pub fn effects_digest(&self) -> [u8; 32] {
        let mut hash = Sha256::new();
        let mut bytes = |data: &[u8]| {
            hash.update((data.len() as u64).to_le_bytes());
            hash.update(data);
        };
        bytes(format!("{:?}", self.status).as_bytes());
        bytes(&self.meta.fee.to_le_bytes());
        bytes(&self.meta.compute_units_consumed.to_le_bytes());
        for line in &self.meta.logs {
            bytes(line.as_bytes());
        }
        for (index, inner) in self.meta.inner_instructions.iter().enumerate() {
            bytes(&(index as u64).to_le_bytes());
            for instruction in inner {
                bytes(&[instruction.stack_height, instruction.instruction.program_id_index]);
                bytes(&instruction.instruction.accounts);
                bytes(&instruction.instruction.data);
            }
        }
        bytes(self.meta.return_data.program_id.as_ref());
        bytes(&self.meta.return_data.data);
        for balance in self.pre_balances.iter().chain(&self.post_balances) {
            bytes(&balance.to_le_bytes());
        }
        for token in self.pre_token_balances.iter().chain(&self.post_token_balances) {
            bytes(&[token.account_index, token.decimals]);
            bytes(token.mint.as_ref());
            bytes(token.owner.as_ref());
            bytes(token.program_id.as_ref());
            bytes(&token.amount.to_le_bytes());
        }
        hash.finalize().into()
    }
}

/// Lamports and token balances of `keys`, read from the runtime's accounts.
pub fn balances(svm: &LiteSVM, keys: &[Pubkey]) -> (Vec<u64>, Vec<TokenBalance>) {
    balances_in(keys, |key| svm.get_account(key))
}

/// Lamports and token balances of `keys` in any view of the accounts, such as a simulation's
/// post-state laid over the runtime's.
pub fn balances_in(keys: &[Pubkey], account: impl Fn(&Pubkey) -> Option<Account>) -> (Vec<u64>, Vec<TokenBalance>) {
    let accounts: Vec<Option<Account>> = keys.iter().map(&account).collect();
    let lamports = accounts.iter().map(|a| a.as_ref().map_or(0, |a| a.lamports)).collect();
    let tokens = accounts
        .iter()
        .enumerate()
        .filter_map(|(index, held)| token_balance(&account, index as u8, held.as_ref()?))
        .collect();
    (lamports, tokens)
}

const TOKEN_ACCOUNT_LEN: usize = 165;
/// Mint layout: mint_authority option (36), supply (8), then decimals.
const MINT_DECIMALS_OFFSET: usize = 44;

fn token_balance(account_of: &impl Fn(&Pubkey) -> Option<Account>, account_index: u8, account: &Account) -> Option<TokenBalance> {
    let program_id = account.owner;
    let is_token_program = program_id == spl_token_interface::ID || program_id == spl_token_2022_id();
    // Token-2022 accounts with extensions are longer; the base layout is the same.
    if !is_token_program || account.data.len() < TOKEN_ACCOUNT_LEN || account.data.len() == 82 {
        return None;
    }
    let data = &account.data;
    let mint = Pubkey::try_from(&data[0..32]).ok()?;
    let owner = Pubkey::try_from(&data[32..64]).ok()?;
    let amount = u64::from_le_bytes(data[64..72].try_into().ok()?);
    let decimals = *account_of(&mint)?.data.get(MINT_DECIMALS_OFFSET)?;
    Some(TokenBalance { account_index, mint, owner, program_id, amount, decimals })
}

fn spl_token_2022_id() -> Pubkey {
    Pubkey::from_str_const("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
}
