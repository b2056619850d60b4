//! The chain a local validator would keep: slots advancing on a clock, a blockhash per slot,
//! blocks of executed transactions, and the indexes RPC queries need. It owns the runtime and
//! lives on one thread; everything else reaches it through `ChainHandle`.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::mpsc,
    thread,
    time::{SystemTime, UNIX_EPOCH},
};

use anchor_lang::solana_program::pubkey::Pubkey;
use ledger_runtime::{history::ExecutedTx, ledger::is_included, Ledger};
use litesvm::types::{FailedTransactionMetadata, SimulatedTransactionInfo, TransactionMetadata};
use sha2::{Digest, Sha256};
use solana_hash::Hash;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;
use tokio::sync::{broadcast, oneshot, watch};

use crate::wal::{self, WalWriter};

/// A blockhash is accepted for this many slots after its own, as on mainnet.
pub const MAX_BLOCKHASH_AGE: u64 = 150;
/// Slots after which a confirmed slot counts as finalized (Tower BFT's lockout depth).
pub const FINALITY_DEPTH: u64 = 32;
/// SPL token account and mint sizes (Token-2022 accounts with extensions are longer).
const TOKEN_ACCOUNT_LEN: usize = 165;
const MINT_LEN: usize = 82;
/// Largest `limit` of `getSignaturesForAddress`, as on a validator.
pub const MAX_SIGNATURES_LIMIT: usize = 1_000;

#[derive(Debug, Clone)]
pub struct Block {
    pub slot: u64,
    pub parent_slot: u64,
    pub blockhash: Hash,
    pub previous_blockhash: Hash,
    pub block_time: i64,
    /// Indexes into the ledger history, in execution order.
    pub transactions: Vec<usize>,
}

/// What subscribers hear about: every new slot and every included transaction.
#[derive(Debug, Clone)]
pub enum ChainEvent {
    Slot { slot: u64, parent: u64, root: u64 },
    Transaction { signature: Signature, slot: u64, err: Option<TransactionError>, logs: Vec<String>, accounts: Vec<Pubkey> },
}

/// Why a submitted transaction did not land.
#[derive(Debug, Clone)]
pub enum SubmitError {
    /// Failed before inclusion (bad blockhash, duplicate, signature, fee...): nothing stored.
    Rejected(TransactionError),
    /// A signature does not verify, found by preflight (a validator answers `-32003`).
    SignatureVerification,
    /// Preflight simulation failed: nothing stored, logs returned to the caller.
    Simulation { err: TransactionError, logs: Vec<String>, units: u64 },
}

pub struct Chain {
    pub ledger: Ledger,
    slot: u64,
    genesis_hash: Hash,
    /// Recent blockhashes with the slot that produced them, oldest first.
    blockhashes: VecDeque<(Hash, u64)>,
    blocks: BTreeMap<u64, Block>,
    open_block: Vec<usize>,
    /// The clock's unix time in the open slot (the block time it will have).
    slot_unix_timestamp: i64,
    /// A replay opened slots without setting the runtime's clock yet (it is set once, before the
    /// next transaction runs, rather than for every empty slot).
    clock_behind: bool,
    by_signature: HashMap<Signature, usize>,
    by_address: HashMap<Pubkey, Vec<usize>>,
    events: broadcast::Sender<ChainEvent>,
    /// Where every included transaction and every opened slot is written before anyone can see
    /// it; none for a chain that lives in memory only (tests, benches).
    log: Option<WalWriter>,
    /// Set by `close`: the chain thread stops taking jobs.
    closed: bool,
}

/// Why a logged chain cannot be rebuilt as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayMismatch(pub String);

impl Chain {
    /// A chain in memory at slot 1: slot 0 (genesis and what the ledger already ran) closed.
    pub fn new(ledger: Ledger, events: broadcast::Sender<ChainEvent>) -> Self {
        let mut chain = Chain::at_genesis(ledger, events);
        chain.tick();
        chain
    }

    /// The chain at slot 0, still open, holding what the ledger ran so far (its bootstrap).
    pub fn at_genesis(mut ledger: Ledger, events: broadcast::Sender<ChainEvent>) -> Self {
        // Signatures are checked here, before the runtime, as a validator's sigverify stage does:
        // that is what lets a simulation skip them (`sigVerify: false`) for one call.
        ledger.svm = ledger.svm.with_sigverify(false);
        let ledger_unix_timestamp = ledger.svm.get_sysvar::<solana_clock::Clock>().unix_timestamp;
        let genesis_hash = genesis_hash(&ledger.faucet_pubkey(), ledger.genesis_unix_timestamp());
        let mut chain = Chain {
            ledger,
            slot: 0,
            genesis_hash,
            blockhashes: VecDeque::new(),
            blocks: BTreeMap::new(),
            open_block: Vec::new(),
            slot_unix_timestamp: ledger_unix_timestamp,
            clock_behind: false,
            by_signature: HashMap::new(),
            by_address: HashMap::new(),
            events,
            log: None,
            closed: false,
        };
        for index in 0..chain.ledger.history.len() {
            chain.index(index);
            chain.open_block.push(index);
        }
        chain.blockhashes.push_back((genesis_hash, 0));
        chain
    }

    /// From now on every transaction and slot is written to `log` first. The log must already
    /// hold everything the chain did so far.
    pub fn attach_log(&mut self, log: WalWriter) {
        self.catch_up_clock();
        self.log = Some(log);
    }

    /// How far the log has been written: a reply about what happened so far waits for the log to
    /// be durable up to here (`ChainHandle::durable`).
    pub fn log_position(&self) -> u64 {
        self.log.as_ref().map_or(0, WalWriter::position)
    }

    /// How far the log is on disk; none for a chain in memory.
    pub fn log_synced(&self) -> Option<watch::Receiver<u64>> {
        self.log.as_ref().map(WalWriter::synced)
    }

    /// Makes the log durable and stops the chain: nothing is taken after this.
    pub fn close(&mut self) {
        if let Some(log) = &mut self.log {
            log.close();
        }
        self.closed = true;
    }

    /// Re-executes a logged transaction at its slot, without the checks made when it was
    /// submitted (blockhash age, duplicates, signatures: it passed them then), and requires the
    /// outcome it had and the same effects (`ExecutedTx::effects_digest`): a runtime or program
    /// that now behaves differently must not serve a past that differs from what clients saw.
    pub fn replay_transaction(
        &mut self,
        transaction: VersionedTransaction,
        slot: u64,
        status: &Result<(), TransactionError>,
        effects: &[u8; 32],
    ) -> Result<(), ReplayMismatch> {
        let signature = transaction.signatures.first().copied().unwrap_or_default();
        let mismatch = |what: String| Err(ReplayMismatch(format!("transaction {signature}: {what}")));
        if slot != self.slot {
            return mismatch(format!("logged at slot {slot}, but the replay is at slot {}", self.slot));
        }
        if self.by_signature.contains_key(&signature) {
            return mismatch("logged twice".into());
        }
        self.catch_up_clock();
        let before = self.ledger.history.len();
        if let Err(failed) = self.ledger.execute(transaction) {
            if !is_included(&failed.err) {
                return mismatch(format!("logged as {status:?}, now refused with {:?}", failed.err));
            }
        }
        let replayed = &self.ledger.history[before];
        if replayed.status != *status {
            return mismatch(format!("logged as {status:?}, replayed as {:?}", replayed.status));
        }
        if replayed.effects_digest() != *effects {
            return mismatch(format!(
                "replayed with other effects than logged (logs, balances, fee or inner instructions differ); replayed logs: {:?}",
                replayed.meta.logs
            ));
        }
        self.index(before);
        self.open_block.push(before);
        Ok(())
    }

    /// Re-opens a logged slot with the clock it had.
    pub fn replay_tick(&mut self, slot: u64, unix_timestamp: i64) -> Result<(), ReplayMismatch> {
        if slot != self.slot + 1 {
            return Err(ReplayMismatch(format!("tick to slot {slot} logged after slot {}", self.slot)));
        }
        self.open_next_slot(unix_timestamp);
        self.clock_behind = true;
        Ok(())
    }

    pub fn slot(&self) -> u64 {
        self.slot
    }

    pub fn genesis_hash(&self) -> Hash {
        self.genesis_hash
    }

    /// The newest slot every transaction of which is final.
    pub fn finalized_slot(&self) -> u64 {
        self.slot.saturating_sub(FINALITY_DEPTH)
    }

    pub fn latest_blockhash(&self) -> (Hash, u64) {
        let (hash, slot) = *self.blockhashes.back().expect("at least the genesis blockhash");
        (hash, slot + MAX_BLOCKHASH_AGE)
    }

    /// The blockhash of the newest finalized slot, with its last valid block height.
    pub fn finalized_blockhash(&self) -> (Hash, u64) {
        let finalized = self.finalized_slot();
        let (hash, slot) = self
            .blockhashes
            .iter()
            .rev()
            .find(|(_, slot)| *slot <= finalized)
            .or(self.blockhashes.front())
            .copied()
            .expect("at least the genesis blockhash");
        (hash, slot + MAX_BLOCKHASH_AGE)
    }

    pub fn is_blockhash_valid(&self, hash: &Hash) -> bool {
        self.blockhashes.iter().any(|(known, _)| known == hash)
    }

    /// Closes the open slot into a block and opens the next one with a fresh blockhash, the
    /// clock at the current unix time.
    pub fn tick(&mut self) {
        self.tick_at(unix_now());
    }

    /// `tick` with the clock set to `unix_timestamp`.
    pub fn tick_at(&mut self, unix_timestamp: i64) {
        if let Some(log) = &mut self.log {
            log.append(&wal::encode_tick(self.slot + 1, unix_timestamp));
        }
        self.advance(unix_timestamp);
    }

    fn advance(&mut self, unix_timestamp: i64) {
        self.open_next_slot(unix_timestamp);
        self.set_clock();
    }

    fn catch_up_clock(&mut self) {
        if self.clock_behind {
            self.set_clock();
            self.clock_behind = false;
        }
    }

    fn open_next_slot(&mut self, unix_timestamp: i64) {
        let (previous_blockhash, _) = *self.blockhashes.back().expect("genesis blockhash");
        let closing = self.slot;
        let blockhash = Hash::new_from_array(
            Sha256::new()
                .chain_update(previous_blockhash.as_ref())
                .chain_update(closing.to_le_bytes())
                .finalize()
                .into(),
        );
        self.blocks.insert(
            closing,
            Block {
                slot: closing,
                parent_slot: closing.saturating_sub(1),
                blockhash,
                previous_blockhash,
                block_time: self.slot_unix_timestamp,
                transactions: std::mem::take(&mut self.open_block),
            },
        );
        self.slot = closing + 1;
        self.blockhashes.push_back((blockhash, closing + 1));
        while self.blockhashes.len() as u64 > MAX_BLOCKHASH_AGE + 1 {
            self.blockhashes.pop_front();
        }
        self.slot_unix_timestamp = unix_timestamp;
        let _ = self.events.send(ChainEvent::Slot {
            slot: self.slot,
            parent: closing,
            root: self.finalized_slot(),
        });
    }

    /// Sets the Clock to the open slot and SlotHashes to the newest closed slots (at most 512,
    /// newest first), as a bank does when it opens a slot: the Address Lookup Table program
    /// derives a table's address from a recent slot found there, and a table's freshly extended
    /// addresses become usable once their slot is past.
    fn set_clock(&mut self) {
        let mut clock = self.ledger.svm.get_sysvar::<solana_clock::Clock>();
        clock.slot = self.slot;
        clock.unix_timestamp = self.slot_unix_timestamp;
        self.ledger.svm.set_sysvar(&clock);
        let recent: Vec<(u64, Hash)> = self
            .blocks
            .values()
            .rev()
            .take(solana_slot_hashes::MAX_ENTRIES)
            .map(|block| (block.slot, block.blockhash))
            .collect();
        self.ledger.svm.set_sysvar(&solana_slot_hashes::SlotHashes::new(&recent));
    }

    /// Runs `tx` against the current state without keeping anything, after the checks a bank
    /// makes before executing: signatures (only when `sig_verify`, as `simulateTransaction`
    /// defaults to not checking them), blockhash age, and the status cache.
    pub fn simulate(&self, tx: &VersionedTransaction, sig_verify: bool) -> Result<SimulatedTransactionInfo, FailedTransactionMetadata> {
        let refused = |err| Err(FailedTransactionMetadata { err, meta: TransactionMetadata::default() });
        if sig_verify && !signatures_verify(tx) {
            return refused(TransactionError::SignatureFailure);
        }
        if !self.is_blockhash_valid(tx.message.recent_blockhash()) {
            return refused(TransactionError::BlockhashNotFound);
        }
        if tx.signatures.first().is_some_and(|signature| self.by_signature.contains_key(signature)) {
            return refused(TransactionError::AlreadyProcessed);
        }
        self.ledger.svm.simulate_transaction(tx.clone())
    }

    /// Checks what a validator checks before executing, optionally simulates, then executes
    /// in the open slot.
    pub fn submit(&mut self, tx: VersionedTransaction, preflight: bool) -> Result<Signature, SubmitError> {
        let signature = *tx.signatures.first().ok_or(SubmitError::Rejected(TransactionError::MissingSignatureForFee))?;
        if self.by_signature.contains_key(&signature) {
            return Err(SubmitError::Rejected(TransactionError::AlreadyProcessed));
        }
        if !self.is_blockhash_valid(tx.message.recent_blockhash()) {
            return Err(SubmitError::Rejected(TransactionError::BlockhashNotFound));
        }
        if !signatures_verify(&tx) {
            return Err(if preflight {
                SubmitError::SignatureVerification
            } else {
                SubmitError::Rejected(TransactionError::SignatureFailure)
            });
        }
        if preflight {
            if let Err(failed) = self.simulate(&tx, false) {
                return Err(SubmitError::Simulation {
                    err: failed.err,
                    logs: failed.meta.logs,
                    units: failed.meta.compute_units_consumed,
                });
            }
        }
        let before = self.ledger.history.len();
        match self.ledger.execute(tx) {
            Ok(_) => {}
            Err(failed) if !is_included(&failed.err) => return Err(SubmitError::Rejected(failed.err)),
            Err(_) => {}
        }
        for index in before..self.ledger.history.len() {
            self.write_to_log(index);
            self.index(index);
            self.open_block.push(index);
            self.announce(index);
        }
        Ok(signature)
    }

    fn write_to_log(&mut self, index: usize) {
        if let Some(log) = &mut self.log {
            let executed = &self.ledger.history[index];
            log.append(&wal::encode_executed(executed));
        }
    }

    fn index(&mut self, index: usize) {
        let executed = &self.ledger.history[index];
        self.by_signature.insert(executed.transaction.signatures[0], index);
        for key in &executed.account_keys {
            self.by_address.entry(*key).or_default().push(index);
        }
    }

    fn announce(&self, index: usize) {
        let executed = &self.ledger.history[index];
        let _ = self.events.send(ChainEvent::Transaction {
            signature: executed.transaction.signatures[0],
            slot: executed.slot,
            err: executed.status.clone().err(),
            logs: executed.meta.logs.clone(),
            accounts: executed.account_keys.clone(),
        });
    }

    pub fn transaction(&self, signature: &Signature) -> Option<&ExecutedTx> {
        self.by_signature.get(signature).map(|&index| &self.ledger.history[index])
    }

    pub fn block(&self, slot: u64) -> Option<(&Block, Vec<&ExecutedTx>)> {
        let block = self.blocks.get(&slot)?;
        let transactions = block.transactions.iter().map(|&i| &self.ledger.history[i]).collect();
        Some((block, transactions))
    }

    pub fn block_slots(&self, start: u64, end: u64) -> Vec<u64> {
        self.blocks.range(start..=end).map(|(slot, _)| *slot).collect()
    }

    /// Newest first, as `getSignaturesForAddress` answers; `before` and `until` exclusive.
    pub fn signatures_for(
        &self,
        address: &Pubkey,
        limit: usize,
        before: Option<&Signature>,
        until: Option<&Signature>,
    ) -> Vec<&ExecutedTx> {
        let Some(indexes) = self.by_address.get(address) else {
            return Vec::new();
        };
        let start = before
            .and_then(|sig| self.by_signature.get(sig))
            .map_or(indexes.len(), |stop| indexes.partition_point(|i| i < stop));
        let stop_at = until.and_then(|sig| self.by_signature.get(sig)).copied();
        indexes[..start]
            .iter()
            .rev()
            .take_while(|&&i| stop_at.is_none_or(|stop| i > stop))
            .take(limit)
            .map(|&i| &self.ledger.history[i])
            .collect()
    }

    /// Every SPL Token or Token-2022 account whose owner field is `owner`, by address. A scan of
    /// the accounts (a validator keeps a secondary index; a local ledger holds few accounts).
    pub fn token_accounts_of(&self, owner: &Pubkey) -> Vec<(Pubkey, solana_account::Account)> {
        use solana_account::ReadableAccount;
        let token_programs = [spl_token_interface::ID, Pubkey::from_str_const("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")];
        let mut found: Vec<(Pubkey, solana_account::Account)> = self
            .ledger
            .svm
            .accounts_db()
            .inner
            .iter()
            .filter(|(_, account)| {
                token_programs.contains(account.owner())
                    && account.data().len() >= TOKEN_ACCOUNT_LEN
                    && account.data().len() != MINT_LEN
                    // Token-2022 with extensions: the account-type byte after the base layout says account (2), not mint (1).
                    && account.data().get(TOKEN_ACCOUNT_LEN).is_none_or(|kind| *kind == 2)
                    && account.data().get(32..64) == Some(owner.as_ref())
            })
            .map(|(address, account)| (*address, solana_account::Account::from(account.clone())))
            .collect();
        found.sort_by_key(|(address, _)| *address);
        found
    }

    pub fn transaction_count(&self) -> usize {
        self.ledger.history.len()
    }
}

/// Unique per ledger: two ledgers (or a ledger and a database made with another one) are told
/// apart by it, as clusters are.
pub fn genesis_hash(faucet: &Pubkey, unix_timestamp: i64) -> Hash {
    Hash::new_from_array(
        Sha256::new()
            .chain_update(b"agent-payment-gateway localnet genesis")
            .chain_update(faucet.as_ref())
            .chain_update(unix_timestamp.to_le_bytes())
            .finalize()
            .into(),
    )
}

/// Whether every required signature is present and signs the message.
pub fn signatures_verify(tx: &VersionedTransaction) -> bool {
    tx.verify_with_results().iter().all(|valid| *valid)
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

type Job = Box<dyn FnOnce(&mut Chain) + Send>;

/// Cheap to clone; every call runs on the chain's own thread, in arrival order.
#[derive(Clone)]
pub struct ChainHandle {
    jobs: mpsc::Sender<Job>,
    /// How far the chain's log is durable; none for a chain in memory.
    synced: Option<watch::Receiver<u64>>,
}

impl ChainHandle {
    /// Starts the chain thread; `make` builds the chain there (LiteSVM stays on one thread).
    pub fn spawn(make: impl FnOnce() -> Chain + Send + 'static) -> ChainHandle {
        match Self::try_spawn(move || Ok::<_, std::convert::Infallible>((make(), ()))) {
            Ok((handle, ())) => handle,
            Err(never) => match never {},
        }
    }

    /// Starts the chain thread and waits until `make` has built the chain there, or failed.
    /// `make` also hands back whatever else it produced (such as the service keys).
    pub fn try_spawn<T: Send + 'static, E: Send + 'static>(
        make: impl FnOnce() -> Result<(Chain, T), E> + Send + 'static,
    ) -> Result<(ChainHandle, T), E> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (built, outcome) = mpsc::channel();
        thread::Builder::new()
            .name("chain".into())
            .spawn(move || {
                let mut chain = match make() {
                    Ok((chain, made)) => {
                        let synced = chain.log_synced();
                        let _ = built.send(Ok((made, synced)));
                        chain
                    }
                    Err(error) => {
                        let _ = built.send(Err(error));
                        return;
                    }
                };
                while let Ok(job) = inbox.recv() {
                    job(&mut chain);
                    if chain.closed {
                        return;
                    }
                }
            })
            .expect("spawn chain thread");
        let (made, synced) = outcome.recv().expect("the chain thread reports how the chain was built")?;
        Ok((ChainHandle { jobs, synced }, made))
    }

    pub async fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut Chain) -> R + Send + 'static) -> R {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |chain| {
            let _ = reply.send(f(chain));
        });
        self.jobs.send(job).expect("chain thread alive");
        answer.await.expect("chain thread answered")
    }

    /// Waits until the log is durable up to `position` (a `Chain::log_position`): a client told
    /// that its transaction landed can rely on it surviving a power loss too. Returns at once
    /// for a chain in memory.
    pub async fn durable(&self, position: u64) {
        if let Some(synced) = &self.synced {
            // The syncer only ends after a final sync at shutdown; nothing is left to wait for then.
            let _ = synced.clone().wait_for(|synced| *synced >= position).await;
        }
    }

    /// Makes the log durable and ends the chain thread; jobs sent later are not run.
    pub async fn close(&self) {
        self.call(Chain::close).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use solana_keypair::Keypair;
    use solana_message::Message;
    use solana_signer::Signer;
    use solana_transaction::Transaction;

    fn chain() -> Chain {
        let (events, _) = broadcast::channel(1_024);
        Chain::new(Ledger::new(), events)
    }

    fn funded(chain: &mut Chain) -> Keypair {
        let key = Keypair::new();
        let tx = chain.ledger.airdrop_transaction(&key.pubkey(), 10_000_000_000, chain.latest_blockhash().0);
        chain.submit(tx, true).expect("airdrop lands");
        key
    }

    fn transfer(from: &Keypair, lamports: u64, blockhash: Hash) -> VersionedTransaction {
        let to = Pubkey::new_unique();
        let ix = anchor_lang::solana_program::system_instruction::transfer(&from.pubkey(), &to, lamports);
        Transaction::new(&[from], Message::new_with_blockhash(&[ix], Some(&from.pubkey()), &blockhash), blockhash).into()
    }

    #[test]
    fn a_signature_lands_once() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let tx = transfer(&payer, 1_000_000, chain.latest_blockhash().0);
        chain.submit(tx.clone(), true).unwrap();
        assert!(matches!(chain.submit(tx, false), Err(SubmitError::Rejected(TransactionError::AlreadyProcessed))));
    }

    #[test]
    fn a_blockhash_expires_after_150_slots() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let (old, last_valid) = chain.latest_blockhash();
        assert_eq!(last_valid, chain.slot() + MAX_BLOCKHASH_AGE);
        for _ in 0..MAX_BLOCKHASH_AGE {
            chain.tick();
        }
        chain.submit(transfer(&payer, 1_000_000, old), true).expect("still valid at its 150th slot");
        chain.tick();
        let late = transfer(&payer, 2_000_000, old);
        assert!(matches!(chain.submit(late, true), Err(SubmitError::Rejected(TransactionError::BlockhashNotFound))));
    }

    #[test]
    fn a_failing_transaction_is_refused_by_preflight_and_included_without_it() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let count = chain.transaction_count();
        // More lamports than the payer has: the System Program fails the instruction.
        let broke = transfer(&payer, 50_000_000_000, chain.latest_blockhash().0);
        assert!(matches!(chain.submit(broke.clone(), true), Err(SubmitError::Simulation { .. })));
        assert_eq!(chain.transaction_count(), count, "preflight failures leave no trace");
        let signature = chain.submit(broke, false).expect("included with its error");
        assert!(chain.transaction(&signature).unwrap().status.is_err());
    }

    /// `transfer` with its signature replaced by one over other bytes.
    fn forged(from: &Keypair, blockhash: Hash) -> VersionedTransaction {
        let mut tx = transfer(from, 1_000_000, blockhash);
        tx.signatures[0] = from.sign_message(b"not this message");
        tx
    }

    #[test]
    fn a_bad_signature_is_refused_before_execution_and_only_a_simulation_may_skip_the_check() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let count = chain.transaction_count();
        let tx = forged(&payer, chain.latest_blockhash().0);
        assert!(matches!(chain.submit(tx.clone(), true), Err(SubmitError::SignatureVerification)));
        assert!(matches!(chain.submit(tx.clone(), false), Err(SubmitError::Rejected(TransactionError::SignatureFailure))));
        assert_eq!(chain.transaction_count(), count, "nothing included");
        assert_eq!(chain.simulate(&tx, true).unwrap_err().err, TransactionError::SignatureFailure);
        chain.simulate(&tx, false).expect("runs when signatures are not checked");
    }

    #[test]
    fn a_simulation_refuses_what_a_bank_refuses_before_running() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let unknown = transfer(&payer, 1_000_000, Hash::new_from_array([9; 32]));
        assert_eq!(chain.simulate(&unknown, false).unwrap_err().err, TransactionError::BlockhashNotFound);
        let tx = transfer(&payer, 1_000_000, chain.latest_blockhash().0);
        chain.submit(tx.clone(), true).unwrap();
        assert_eq!(chain.simulate(&tx, false).unwrap_err().err, TransactionError::AlreadyProcessed);
    }

    #[test]
    fn the_finalized_blockhash_trails_the_latest_by_the_finality_depth() {
        let mut chain = chain();
        assert_eq!(chain.finalized_blockhash(), chain.blockhashes.front().map(|(h, s)| (*h, s + MAX_BLOCKHASH_AGE)).unwrap());
        for _ in 0..FINALITY_DEPTH + 5 {
            chain.tick();
        }
        let (latest, latest_valid) = chain.latest_blockhash();
        let (finalized, finalized_valid) = chain.finalized_blockhash();
        assert_ne!(latest, finalized);
        assert_eq!(latest_valid - finalized_valid, FINALITY_DEPTH);
        assert!(chain.is_blockhash_valid(&finalized));
    }

    #[test]
    fn signatures_for_an_address_page_newest_first() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let mut sent = Vec::new();
        for lamports in 1..=5u64 {
            let tx = transfer(&payer, 1_000_000 * lamports, chain.latest_blockhash().0);
            sent.push(chain.submit(tx, true).unwrap());
            chain.tick();
        }
        let page = |limit, before: Option<&Signature>, until: Option<&Signature>| -> Vec<Signature> {
            chain
                .signatures_for(&payer.pubkey(), limit, before, until)
                .iter()
                .map(|tx| tx.transaction.signatures[0])
                .collect()
        };
        let all = page(10, None, None);
        assert_eq!(all.len(), 6, "the airdrop and five transfers");
        assert_eq!(all[..5], sent.iter().rev().copied().collect::<Vec<_>>()[..]);
        assert_eq!(page(2, None, None), vec![sent[4], sent[3]]);
        assert_eq!(page(2, Some(&sent[3]), None), vec![sent[2], sent[1]]);
        assert_eq!(page(10, None, Some(&sent[1])), vec![sent[4], sent[3], sent[2]]);
    }

    /// A lookup table made by the Address Lookup Table program, holding `addresses`, usable
    /// from the next slot on.
    fn lookup_table(chain: &mut Chain, authority: &Keypair, addresses: Vec<Pubkey>) -> Pubkey {
        use solana_address_lookup_table_interface::instruction::{create_lookup_table, extend_lookup_table};
        chain.tick();
        let recent_slot = chain.slot() - 1;
        let (create, table) = create_lookup_table(authority.pubkey(), authority.pubkey(), recent_slot);
        let extend = extend_lookup_table(table, authority.pubkey(), Some(authority.pubkey()), addresses);
        let blockhash = chain.latest_blockhash().0;
        let tx = Transaction::new(&[authority], Message::new_with_blockhash(&[create, extend], Some(&authority.pubkey()), &blockhash), blockhash);
        let signature = chain.submit(tx.into(), true).expect("the table is created from a slot in SlotHashes");
        assert!(chain.transaction(&signature).unwrap().status.is_ok());
        chain.tick();
        table
    }

    #[test]
    fn addresses_loaded_from_a_lookup_table_are_reported_and_indexed() {
        use solana_address_lookup_table_interface::state::AddressLookupTable;
        use solana_message::{v0, AddressLookupTableAccount, VersionedMessage};
        let mut chain = chain();
        let payer = funded(&mut chain);
        let (hidden, read_only) = (Pubkey::new_unique(), Pubkey::new_unique());
        let table = lookup_table(&mut chain, &payer, vec![hidden, read_only]);
        let account = chain.ledger.svm.get_account(&table).unwrap();
        let addresses = AddressLookupTable::deserialize(&account.data).unwrap().addresses.to_vec();
        let mut ix = anchor_lang::solana_program::system_instruction::transfer(&payer.pubkey(), &hidden, 5_000_000);
        ix.accounts.push(anchor_lang::solana_program::instruction::AccountMeta::new_readonly(read_only, false));
        let blockhash = chain.latest_blockhash().0;
        let message = v0::Message::try_compile(&payer.pubkey(), &[ix], &[AddressLookupTableAccount { key: table, addresses }], blockhash).unwrap();
        assert_eq!(message.account_keys.len(), 2, "only the payer and the program are static");
        let tx = VersionedTransaction::try_new(VersionedMessage::V0(message), &[&payer]).unwrap();
        let signature = chain.submit(tx, true).expect("lands");
        let executed = chain.transaction(&signature).unwrap();
        assert_eq!(executed.status, Ok(()));
        assert_eq!(executed.loaded.writable, vec![hidden]);
        assert_eq!(executed.loaded.readonly, vec![read_only]);
        let system = anchor_lang::solana_program::system_program::ID;
        assert_eq!(executed.account_keys, vec![payer.pubkey(), system, hidden, read_only]);
        assert_eq!(executed.post_balances[2], 5_000_000, "balances cover looked-up accounts");
        let found: Vec<Signature> = chain.signatures_for(&hidden, 10, None, None).iter().map(|t| t.transaction.signatures[0]).collect();
        assert_eq!(found, vec![signature], "a looked-up address has the transaction in its history");
    }

    #[test]
    fn blocks_hold_their_transactions_and_finalize_32_slots_later() {
        let mut chain = chain();
        let payer = funded(&mut chain);
        let slot = chain.slot();
        let signature = chain.submit(transfer(&payer, 1_000_000, chain.latest_blockhash().0), true).unwrap();
        assert!(chain.block(slot).is_none(), "the open slot is not a block yet");
        chain.tick();
        let (block, transactions) = chain.block(slot).expect("closed into a block");
        assert_eq!(transactions.last().unwrap().transaction.signatures[0], signature);
        assert_eq!(block.parent_slot, slot - 1);
        assert_eq!(chain.block(slot - 1).unwrap().0.blockhash, block.previous_blockhash);
        assert!(slot > chain.finalized_slot());
        for _ in 0..FINALITY_DEPTH {
            chain.tick();
        }
        assert!(slot <= chain.finalized_slot());
    }
}
