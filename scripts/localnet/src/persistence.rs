//! How the local ledger survives a stop, a crash or a SIGKILL: its chain is rebuilt at start by
//! replaying `chain.wal` (see `wal.rs`) through the same runtime.
//!
//! A new ledger directory gets a new genesis: a faucet key and the clock, then bootstrap (mint,
//! treasury, program config). Its log is written whole and made durable before the ledger serves
//! anything. An existing log is checked frame by frame, a torn last record (a write the previous
//! process did not finish, so never acknowledged) is cut off, and every record is applied in order:
//! each transaction re-executes at its slot and clock and must end as it did the first time;
//! each tick closes a block and opens the next slot with the clock it had. Any mismatch, or a
//! damaged record followed by intact ones, refuses the start: serving a chain that differs from
//! what clients were told would be worse than not serving.

use std::{
    path::{Path, PathBuf},
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use ledger_runtime::{Ledger, LedgerSetup};
use solana_keypair::Keypair;
use tokio::sync::broadcast;

use crate::{
    chain::{Chain, ChainEvent},
    wal::{self, Record, ScanError, WalWriter},
};

/// A chain with its log attached, ready to serve.
pub struct Opened {
    pub chain: Chain,
    pub setup: LedgerSetup,
    /// What the replay did; none when the directory had no log and a new ledger was created.
    pub resumed: Option<Resumed>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    pub transactions: usize,
    pub ticks: u64,
    /// The slot the chain is at after the replay.
    pub slot: u64,
    pub replay_ms: u128,
    /// Bytes of an unfinished last record that were cut off.
    pub torn_tail_bytes: u64,
}

#[derive(Debug)]
pub enum OpenError {
    Io { path: PathBuf, error: std::io::Error },
    Bootstrap(String),
    Scan { path: PathBuf, error: ScanError },
    /// A record that is intact but cannot be used: undecodable, out of place, or replayed with a
    /// different outcome than the one logged.
    Record { path: PathBuf, offset: u64, problem: String },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            OpenError::Bootstrap(why) => write!(f, "bootstrap of a new ledger failed: {why}"),
            OpenError::Scan { path, error } => write!(f, "{}: {error}; refusing to start", path.display()),
            OpenError::Record { path, offset, problem } => {
                write!(f, "{}: record at byte {offset}: {problem}; refusing to start", path.display())
            }
        }
    }
}

/// Replays the log in `dir`, or creates a new ledger there (bootstrapped with `treasury_units`)
/// when it has none.
pub fn open(dir: &Path, treasury_units: u64, events: broadcast::Sender<ChainEvent>) -> Result<Opened, OpenError> {
    open_with(dir, treasury_units, true, events)
}

/// `open` whose new ledger leaves the program config uninitialized when `initialize` is false.
pub fn open_with(dir: &Path, treasury_units: u64, initialize: bool, events: broadcast::Sender<ChainEvent>) -> Result<Opened, OpenError> {
    let path = dir.join(wal::FILE_NAME);
    match std::fs::read(&path) {
        Ok(bytes) => replay(&path, &bytes, events),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => create(&path, treasury_units, initialize, events),
        Err(error) => Err(OpenError::Io { path, error }),
    }
}

fn create(path: &Path, treasury_units: u64, initialize: bool, events: broadcast::Sender<ChainEvent>) -> Result<Opened, OpenError> {
    let faucet = Keypair::new();
    let unix_timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let mut ledger = Ledger::with_genesis(faucet.insecure_clone(), unix_timestamp);
    let setup = ledger.bootstrap_with(treasury_units, initialize).map_err(|failed| OpenError::Bootstrap(format!("{:?}", failed.err)))?;
    let mut records = vec![wal::encode_genesis(&faucet, unix_timestamp), wal::encode_setup(&setup)];
    records.extend(ledger.history.iter().map(wal::encode_executed));
    let log = WalWriter::create(path, &records).map_err(|error| OpenError::Io { path: path.to_path_buf(), error })?;
    let mut chain = Chain::at_genesis(ledger, events);
    chain.attach_log(log);
    chain.tick();
    Ok(Opened { chain, setup, resumed: None })
}

fn replay(path: &Path, bytes: &[u8], events: broadcast::Sender<ChainEvent>) -> Result<Opened, OpenError> {
    let started = Instant::now();
    let scan = wal::scan(bytes).map_err(|error| OpenError::Scan { path: path.to_path_buf(), error })?;
    let refuse = |offset: u64, problem: String| OpenError::Record { path: path.to_path_buf(), offset, problem };
    let decode = |&(offset, payload): &(u64, &[u8])| Record::decode(payload).map_err(|problem| refuse(offset, problem));
    let Some(first) = scan.records.first() else {
        return Err(refuse(wal::HEADER_LEN, "no genesis record".into()));
    };
    let Record::Genesis { faucet, unix_timestamp } = decode(first)? else {
        return Err(refuse(first.0, "the log does not start with a genesis record".into()));
    };
    let mut chain = Chain::at_genesis(Ledger::with_genesis(faucet, unix_timestamp), events);
    let mut setup = None;
    let mut ticks = 0;
    for entry in &scan.records[1..] {
        let offset = entry.0;
        match decode(entry)? {
            Record::Genesis { .. } => return Err(refuse(offset, "a second genesis".into())),
            Record::Setup(_) if setup.is_some() => return Err(refuse(offset, "a second setup".into())),
            Record::Setup(logged) => setup = Some(logged),
            Record::Transaction { slot, status, effects, transaction } => {
                chain.replay_transaction(transaction, slot, &status, &effects).map_err(|mismatch| refuse(offset, mismatch.0))?;
            }
            Record::Tick { slot, unix_timestamp } => {
                chain.replay_tick(slot, unix_timestamp).map_err(|mismatch| refuse(offset, mismatch.0))?;
                ticks += 1;
            }
        }
    }
    let setup = setup.ok_or_else(|| refuse(scan.valid_len, "the log has no setup record".into()))?;
    if scan.torn_tail_bytes > 0 {
        eprintln!(
            "localnet: {}: cut off {} bytes after byte {}: a record the previous run did not finish writing (never acknowledged)",
            path.display(),
            scan.torn_tail_bytes,
            scan.valid_len
        );
    }
    let log = WalWriter::open(path, scan.valid_len).map_err(|error| OpenError::Io { path: path.to_path_buf(), error })?;
    chain.attach_log(log);
    let resumed = Resumed {
        transactions: chain.transaction_count(),
        ticks,
        slot: chain.slot(),
        replay_ms: started.elapsed().as_millis(),
        torn_tail_bytes: scan.torn_tail_bytes,
    };
    Ok(Opened { chain, setup, resumed: Some(resumed) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::SubmitError;
    use anchor_lang::solana_program::pubkey::Pubkey;
    use ledger_runtime::{client, ledger::USDC_DECIMALS};
    use payment_ledger::{Protocol, Rail, RecordPaymentArgs};
    use solana_hash::Hash;
    use solana_instruction::Instruction;
    use solana_message::Message;
    use solana_signature::Signature;
    use solana_signer::Signer;
    use solana_transaction::{versioned::VersionedTransaction, Transaction};
    use solana_transaction_error::TransactionError;

    /// A ledger directory removed when the test ends.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("localnet-persistence-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        fn log(&self) -> PathBuf {
            self.0.join(wal::FILE_NAME)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn events() -> broadcast::Sender<ChainEvent> {
        broadcast::channel(16).0
    }

    fn open_dir(dir: &Dir) -> Result<Opened, OpenError> {
        open(&dir.0, 1_000_000 * 1_000_000, events())
    }

    fn sign(chain: &Chain, signers: &[&Keypair], instructions: &[Instruction]) -> VersionedTransaction {
        let blockhash = chain.latest_blockhash().0;
        Transaction::new(signers, Message::new_with_blockhash(instructions, Some(&signers[0].pubkey()), &blockhash), blockhash).into()
    }

    /// Payment traffic over several slots: wallets funded, token accounts, atomic payments, and
    /// one payment included with an error (above the payer's balance, sent without preflight).
    fn traffic(chain: &mut Chain, setup: &LedgerSetup) -> Vec<Signature> {
        // Each slot a minute after the last, so a replay that took its clock from anywhere but
        // the log would show in block times and in the payments' `recorded_at`.
        let mut minutes = 0;
        let mut tick = |chain: &mut Chain| {
            minutes += 1;
            chain.tick_at(chain.ledger.genesis_unix_timestamp() + 60 * minutes);
        };
        let (agent, service) = (Keypair::new(), Keypair::new());
        let mut sent = Vec::new();
        let airdrop = chain.ledger.airdrop_transaction(&agent.pubkey(), 2_000_000_000, chain.latest_blockhash().0);
        sent.push(chain.submit(airdrop, true).unwrap());
        tick(chain);
        let accounts: Vec<Instruction> = [&agent, &service]
            .iter()
            .map(|owner| {
                spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent(
                    &setup.authority.pubkey(),
                    &owner.pubkey(),
                    &setup.mint,
                    &spl_token_interface::ID,
                )
            })
            .collect();
        sent.push(chain.submit(sign(chain, &[&setup.authority], &accounts), true).unwrap());
        let agent_token = ledger_runtime::address::associated_token_address(&agent.pubkey(), &setup.mint);
        let fund = spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &setup.treasury_token,
            &setup.mint,
            &agent_token,
            &setup.treasury.pubkey(),
            &[],
            1_000_000,
            USDC_DECIMALS,
        )
        .unwrap();
        sent.push(chain.submit(sign(chain, &[&setup.treasury], &[fund]), true).unwrap());
        tick(chain);
        for (payment_id, amount) in [(1, 250_000), (2, 300_000), (3, 5_000_000), (4, 100_000)] {
            let args = RecordPaymentArgs {
                payment_id,
                amount,
                protocol: Protocol::X402,
                rail: Rail::Stablecoin,
                endpoint_hash: [7; 32],
                settlement_reference: None,
            };
            let transfer = client::Transfer::between(&agent.pubkey(), &service.pubkey(), &setup.mint);
            let ix = client::record_payment_ix(&setup.authority.pubkey(), &agent.pubkey(), &service.pubkey(), args, Some(transfer), None);
            sent.push(chain.submit(sign(chain, &[&setup.authority, &agent], &[ix]), false).unwrap());
            tick(chain);
        }
        assert!(chain.transaction(&sent[5]).unwrap().status.is_err(), "payment 3 is above the balance: included, failed");

        // A version 0 transfer whose destination is loaded from a lookup table made the slot before.
        use solana_address_lookup_table_interface::{instruction as alt, state::AddressLookupTable};
        let service_token = ledger_runtime::address::associated_token_address(&service.pubkey(), &setup.mint);
        let (create, table) = alt::create_lookup_table(agent.pubkey(), agent.pubkey(), chain.slot() - 1);
        let extend = alt::extend_lookup_table(table, agent.pubkey(), Some(agent.pubkey()), vec![service_token]);
        sent.push(chain.submit(sign(chain, &[&agent], &[create, extend]), true).unwrap());
        tick(chain);
        let addresses = AddressLookupTable::deserialize(&chain.ledger.svm.get_account(&table).unwrap().data).unwrap().addresses.to_vec();
        let pay = spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &agent_token,
            &setup.mint,
            &service_token,
            &agent.pubkey(),
            &[],
            1_000,
            USDC_DECIMALS,
        )
        .unwrap();
        let tables = [solana_message::AddressLookupTableAccount { key: table, addresses }];
        let message = solana_message::v0::Message::try_compile(&agent.pubkey(), &[pay], &tables, chain.latest_blockhash().0).unwrap();
        let v0 = VersionedTransaction::try_new(solana_message::VersionedMessage::V0(message), &[&agent]).unwrap();
        sent.push(chain.submit(v0, true).unwrap());
        assert_eq!(chain.transaction(sent.last().unwrap()).unwrap().loaded.writable, vec![service_token]);
        tick(chain);
        sent
    }

    /// Everything a client can read from a chain, for comparing two of them.
    fn observable(chain: &Chain) -> String {
        let mut out = format!("slot {} latest {:?} finalized {:?}\n", chain.slot(), chain.latest_blockhash(), chain.finalized_blockhash());
        let mut touched = std::collections::BTreeSet::new();
        for slot in 0..chain.slot() {
            let (block, transactions) = chain.block(slot).expect("every closed slot is a block");
            out += &format!(
                "block {} parent {} hash {} previous {} time {} valid {}\n",
                block.slot,
                block.parent_slot,
                block.blockhash,
                block.previous_blockhash,
                block.block_time,
                chain.is_blockhash_valid(&block.blockhash)
            );
            for tx in transactions {
                touched.extend(tx.account_keys.iter().copied());
                out += &format!(
                    "  tx {} slot {} time {} status {:?} fee {} units {} logs {:?} loaded {:?} balances {:?} {:?} tokens {:?} {:?}\n",
                    tx.transaction.signatures[0],
                    tx.slot,
                    tx.block_time,
                    tx.status,
                    tx.meta.fee,
                    tx.meta.compute_units_consumed,
                    tx.meta.logs,
                    tx.loaded,
                    tx.pre_balances,
                    tx.post_balances,
                    tx.pre_token_balances,
                    tx.post_token_balances
                );
            }
        }
        for key in touched {
            let history: Vec<Signature> =
                chain.signatures_for(&key, 1_000, None, None).iter().map(|tx| tx.transaction.signatures[0]).collect();
            out += &format!("account {key} {:?} signatures {history:?}\n", chain.ledger.svm.get_account(&key));
        }
        out
    }

    #[test]
    fn a_replayed_chain_equals_the_original() {
        let dir = Dir::new("equal");
        let Opened { mut chain, setup, resumed } = open_dir(&dir).unwrap();
        assert!(resumed.is_none(), "a new directory gets a new ledger");
        traffic(&mut chain, &setup);
        let original = observable(&chain);
        let (genesis, count) = (chain.genesis_hash(), chain.transaction_count());
        drop(chain);

        let Opened { chain, setup: replayed_setup, resumed } = open_dir(&dir).unwrap();
        let resumed = resumed.expect("the log is replayed");
        assert_eq!((resumed.transactions, resumed.slot, resumed.torn_tail_bytes), (count, chain.slot(), 0));
        assert_eq!(chain.genesis_hash(), genesis);
        assert_eq!((replayed_setup.mint, replayed_setup.authority.pubkey()), (setup.mint, setup.authority.pubkey()));
        assert_eq!(observable(&chain), original);
    }

    #[test]
    fn two_ledgers_have_different_genesis_hashes() {
        let (first, second) = (Dir::new("genesis-a"), Dir::new("genesis-b"));
        assert_ne!(open_dir(&first).unwrap().chain.genesis_hash(), open_dir(&second).unwrap().chain.genesis_hash());
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_the_rest_replays() {
        let dir = Dir::new("torn");
        let Opened { mut chain, setup, .. } = open_dir(&dir).unwrap();
        traffic(&mut chain, &setup);
        let complete = observable(&chain);
        let payer = Keypair::new();
        let airdrop = chain.ledger.airdrop_transaction(&payer.pubkey(), 1_000_000, chain.latest_blockhash().0);
        let unfinished = chain.submit(airdrop, true).unwrap();
        drop(chain);
        // The process died inside its last write: half of the airdrop's record reached the file.
        let log = std::fs::read(dir.log()).unwrap();
        let record_len = wal::encode_transaction(0, &Ok(()), &[0; 32], &VersionedTransaction::default()).len();
        let cut = log.len() - 40;
        assert!(cut > log.len() - record_len);
        std::fs::write(dir.log(), &log[..cut]).unwrap();

        let Opened { chain, resumed, .. } = open_dir(&dir).unwrap();
        assert!(resumed.unwrap().torn_tail_bytes > 0);
        assert!(chain.transaction(&unfinished).is_none(), "never acknowledged, so not there");
        assert_eq!(observable(&chain), complete);
        drop(chain);
        let cut_len = std::fs::metadata(dir.log()).unwrap().len();
        assert!(cut_len < cut as u64, "the torn bytes are gone from the file");
        let Opened { resumed, .. } = open_dir(&dir).unwrap();
        assert_eq!(resumed.unwrap().torn_tail_bytes, 0);
    }

    #[test]
    fn a_damaged_record_followed_by_intact_ones_refuses_the_start() {
        let dir = Dir::new("corrupt");
        let Opened { mut chain, setup, .. } = open_dir(&dir).unwrap();
        traffic(&mut chain, &setup);
        drop(chain);
        let mut log = std::fs::read(dir.log()).unwrap();
        let middle = log.len() / 2;
        log[middle] ^= 0x01;
        std::fs::write(dir.log(), &log).unwrap();
        let error = open_dir(&dir).err().expect("refused");
        assert!(matches!(error, OpenError::Scan { error: ScanError::Corrupt { .. }, .. }), "{error}");
        assert!(error.to_string().contains("refusing to start"), "{error}");
        assert_eq!(std::fs::read(dir.log()).unwrap(), log, "a refused log is left as it was");
    }

    /// Replaces the log record of `executed` with `forged`, with a valid checksum: only the replay
    /// can tell.
    fn forge_record(dir: &Dir, executed: &ledger_runtime::history::ExecutedTx, forged: &[u8]) {
        let log = std::fs::read(dir.log()).unwrap();
        let scan = wal::scan(&log).unwrap();
        let logged = wal::encode_executed(executed);
        let (offset, _) = *scan.records.iter().find(|(_, payload)| *payload == logged.as_slice()).expect("the record");
        let mut rewritten = log[..offset as usize].to_vec();
        rewritten.extend_from_slice(&(forged.len() as u32).to_le_bytes());
        rewritten.extend_from_slice(&crc32fast::hash(forged).to_le_bytes());
        rewritten.extend_from_slice(forged);
        rewritten.extend_from_slice(&log[offset as usize + 8 + logged.len()..]);
        std::fs::write(dir.log(), rewritten).unwrap();
    }

    #[test]
    fn a_transaction_that_replays_to_another_outcome_refuses_the_start() {
        let dir = Dir::new("mismatch");
        let Opened { mut chain, setup, .. } = open_dir(&dir).unwrap();
        let sent = traffic(&mut chain, &setup);
        let failed = chain.transaction(&sent[5]).unwrap().clone();
        drop(chain);
        forge_record(&dir, &failed, &wal::encode_transaction(failed.slot, &Ok(()), &failed.effects_digest(), &failed.transaction));

        let message = open_dir(&dir).err().expect("refused").to_string();
        assert!(message.contains(&failed.transaction.signatures[0].to_string()) && message.contains("replayed as Err"), "{message}");
    }

    #[test]
    fn a_transaction_that_replays_with_other_effects_refuses_the_start() {
        let dir = Dir::new("effects");
        let Opened { mut chain, setup, .. } = open_dir(&dir).unwrap();
        let sent = traffic(&mut chain, &setup);
        let payment = chain.transaction(&sent[4]).unwrap().clone();
        drop(chain);
        // What a program that now moves another amount, or logs otherwise, would look like.
        let mut other = payment.clone();
        other.post_token_balances[0].amount += 1;
        forge_record(&dir, &payment, &wal::encode_executed(&other));

        let message = open_dir(&dir).err().expect("refused").to_string();
        assert!(message.contains(&payment.transaction.signatures[0].to_string()) && message.contains("other effects"), "{message}");
    }

    #[test]
    fn a_restarted_chain_continues_its_slots_keeps_recent_blockhashes_and_refuses_old_signatures() {
        let dir = Dir::new("continue");
        let Opened { mut chain, setup, .. } = open_dir(&dir).unwrap();
        let sent = traffic(&mut chain, &setup);
        let (slot, (blockhash, last_valid)) = (chain.slot(), chain.latest_blockhash());
        let payer = Keypair::new();
        let fund = chain.ledger.airdrop_transaction(&payer.pubkey(), 1_000_000_000, blockhash);
        chain.submit(fund, true).unwrap();
        let old = chain.transaction(&sent[6]).unwrap().transaction.clone();
        drop(chain);

        let Opened { mut chain, .. } = open_dir(&dir).unwrap();
        assert_eq!(chain.slot(), slot, "no slot is handed out twice");
        assert_eq!(chain.latest_blockhash(), (blockhash, last_valid));
        chain.tick();
        assert_eq!(chain.slot(), slot + 1);
        let to = Pubkey::new_unique();
        let ix = solana_system_interface::instruction::transfer(&payer.pubkey(), &to, 1_000_000);
        let tx = Transaction::new(&[&payer], Message::new_with_blockhash(&[ix], Some(&payer.pubkey()), &blockhash), blockhash);
        chain.submit(tx.into(), true).expect("a blockhash handed out before the restart is still valid");
        assert!(matches!(chain.submit(old, false), Err(SubmitError::Rejected(TransactionError::AlreadyProcessed))));
        let fresh: Hash = chain.latest_blockhash().0;
        assert_ne!(fresh, blockhash);
    }
}
