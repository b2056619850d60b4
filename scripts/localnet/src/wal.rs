//! `chain.wal`: the local ledger's write-ahead log, the one durable copy of a chain.
//!
//! The log holds the chain's inputs, not its state: the genesis (faucet key and clock), the
//! service keys bootstrap created, every included transaction as signed bytes with the slot and
//! outcome it had, and every slot opened with the unix time its clock got. Replaying it through
//! the same runtime rebuilds the identical chain (`persistence.rs`).
//!
//! Layout: `MAGIC` (8 bytes), `VERSION` (u32 LE), then records `[u32 len][u32 crc32][payload]`
//! (little-endian; the CRC covers the payload). Records are only ever appended, each with one
//! `write(2)` before anything it describes can be observed, so a killed process leaves at most
//! one partial record at the end. A syncer thread makes written records durable
//! (`fdatasync`) behind the writer, many per call under load (group commit).

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex},
    thread::{self, JoinHandle},
};

use anchor_lang::solana_program::pubkey::Pubkey;
use ledger_runtime::{history::ExecutedTx, LedgerSetup};
use solana_keypair::Keypair;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;
use tokio::sync::watch;

pub const FILE_NAME: &str = "chain.wal";
const MAGIC: &[u8; 8] = b"APGCHAIN";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 12;
const FRAME_HEADER_LEN: usize = 8;
/// Largest payload a record may have: a transaction is at most 1,232 bytes, its error a few
/// dozen. A length field above this is damage, not data.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;

const KIND_GENESIS: u8 = 1;
const KIND_SETUP: u8 = 2;
const KIND_TRANSACTION: u8 = 3;
const KIND_TICK: u8 = 4;

/// One decoded record.
pub enum Record {
    /// Always the first: what the runtime's state at slot 0 is made of.
    Genesis { faucet: Keypair, unix_timestamp: i64 },
    /// The keys and accounts bootstrap created (written again as keypair files at every start).
    Setup(LedgerSetup),
    /// An included transaction: it executed at `slot` with `status`, and did what
    /// `effects` digests (`ExecutedTx::effects_digest`).
    Transaction { slot: u64, status: Result<(), TransactionError>, effects: [u8; 32], transaction: VersionedTransaction },
    /// Slot `slot` was opened (the one before closed into a block) with the clock at `unix_timestamp`.
    Tick { slot: u64, unix_timestamp: i64 },
}

pub fn encode_genesis(faucet: &Keypair, unix_timestamp: i64) -> Vec<u8> {
    let mut payload = vec![KIND_GENESIS];
    payload.extend_from_slice(&unix_timestamp.to_le_bytes());
    payload.extend_from_slice(&faucet.to_bytes());
    payload
}

pub fn encode_setup(setup: &LedgerSetup) -> Vec<u8> {
    let mut payload = vec![KIND_SETUP];
    for key in [&setup.authority, &setup.mint_authority, &setup.treasury] {
        payload.extend_from_slice(&key.to_bytes());
    }
    payload.extend_from_slice(setup.mint.as_ref());
    payload.extend_from_slice(setup.treasury_token.as_ref());
    payload
}

/// The record of a transaction the chain included.
pub fn encode_executed(executed: &ExecutedTx) -> Vec<u8> {
    encode_transaction(executed.slot, &executed.status, &executed.effects_digest(), &executed.transaction)
}

pub fn encode_transaction(
    slot: u64,
    status: &Result<(), TransactionError>,
    effects: &[u8; 32],
    transaction: &VersionedTransaction,
) -> Vec<u8> {
    let mut payload = vec![KIND_TRANSACTION];
    payload.extend_from_slice(&slot.to_le_bytes());
    payload.extend_from_slice(effects);
    match status {
        Ok(()) => payload.extend_from_slice(&0u16.to_le_bytes()),
        Err(error) => {
            let error = bincode::serialize(error).expect("a transaction error serializes");
            let len = u16::try_from(error.len()).expect("a transaction error is a few bytes");
            assert!(len > 0, "a serialized error is never empty");
            payload.extend_from_slice(&len.to_le_bytes());
            payload.extend_from_slice(&error);
        }
    }
    payload.extend_from_slice(&bincode::serialize(transaction).expect("a transaction serializes"));
    payload
}

pub fn encode_tick(slot: u64, unix_timestamp: i64) -> Vec<u8> {
    let mut payload = vec![KIND_TICK];
    payload.extend_from_slice(&slot.to_le_bytes());
    payload.extend_from_slice(&unix_timestamp.to_le_bytes());
    payload
}

/// Reads fixed-size fields off the front of a payload.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if self.0.len() < len {
            return Err(format!("payload ends {} bytes early", len - self.0.len()));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn keypair(&mut self) -> Result<Keypair, String> {
        Keypair::try_from(self.take(64)?).map_err(|e| format!("bad keypair: {e}"))
    }

    fn pubkey(&mut self) -> Result<Pubkey, String> {
        Ok(Pubkey::try_from(self.take(32)?).expect("32 bytes"))
    }

    fn end(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} unexpected bytes after the record", self.0.len()))
        }
    }
}

impl Record {
    pub fn decode(payload: &[u8]) -> Result<Record, String> {
        let (&kind, body) = payload.split_first().ok_or("empty payload")?;
        let mut fields = Fields(body);
        let record = match kind {
            KIND_GENESIS => {
                let unix_timestamp = fields.i64()?;
                Record::Genesis { unix_timestamp, faucet: fields.keypair()? }
            }
            KIND_SETUP => {
                let (authority, mint_authority, treasury) = (fields.keypair()?, fields.keypair()?, fields.keypair()?);
                let (mint, treasury_token) = (fields.pubkey()?, fields.pubkey()?);
                Record::Setup(LedgerSetup { authority, mint_authority, mint, treasury, treasury_token })
            }
            KIND_TRANSACTION => {
                let slot = fields.u64()?;
                let effects = fields.take(32)?.try_into().expect("32 bytes");
                let error_len = u16::from_le_bytes(fields.take(2)?.try_into().expect("2 bytes")) as usize;
                let status = match error_len {
                    0 => Ok(()),
                    len => Err(bincode::deserialize(fields.take(len)?).map_err(|e| format!("bad transaction error: {e}"))?),
                };
                let transaction = bincode::deserialize(fields.0).map_err(|e| format!("bad transaction: {e}"))?;
                fields = Fields(&[]);
                Record::Transaction { slot, status, effects, transaction }
            }
            KIND_TICK => Record::Tick { slot: fields.u64()?, unix_timestamp: fields.i64()? },
            other => return Err(format!("unknown record kind {other}")),
        };
        fields.end()?;
        Ok(record)
    }
}

fn header() -> [u8; HEADER_LEN as usize] {
    let mut header = [0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..].copy_from_slice(&VERSION.to_le_bytes());
    header
}

fn frame(payload: &[u8]) -> Vec<u8> {
    assert!(!payload.is_empty() && payload.len() <= MAX_PAYLOAD_BYTES, "record payload of {} bytes", payload.len());
    let mut framed = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
    framed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    framed.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    framed.extend_from_slice(payload);
    framed
}

// ---- reading ---------------------------------------------------------------------------------

/// A whole log, checked: every record's frame is intact up to `valid_len`.
#[derive(Debug)]
pub struct Scan<'a> {
    /// Each record's payload with the file offset of its frame.
    pub records: Vec<(u64, &'a [u8])>,
    /// Where the last intact record ends; the file is cut here when a torn tail follows.
    pub valid_len: u64,
    /// Bytes after `valid_len` that hold no intact record: a write the process did not finish.
    pub torn_tail_bytes: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ScanError {
    NotALog(String),
    /// A damaged record with intact records after it: the log is corrupt, not merely cut short.
    Corrupt { offset: u64, problem: String, next_intact: u64 },
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::NotALog(why) => write!(f, "not a ledger log: {why}"),
            ScanError::Corrupt { offset, problem, next_intact } => write!(
                f,
                "corrupt record at byte {offset} ({problem}) followed by an intact record at byte {next_intact}"
            ),
        }
    }
}

/// The payload of the frame at `offset` and where the next frame starts.
fn frame_at(bytes: &[u8], offset: usize) -> Result<(&[u8], usize), String> {
    let Some(head) = bytes.get(offset..offset + FRAME_HEADER_LEN) else {
        return Err(format!("{} bytes, shorter than a record header", bytes.len() - offset));
    };
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
    if len == 0 || len > MAX_PAYLOAD_BYTES {
        return Err(format!("length {len} out of range"));
    }
    let start = offset + FRAME_HEADER_LEN;
    let Some(payload) = bytes.get(start..start + len) else {
        return Err(format!("length {len} runs past the end of the file"));
    };
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch".into());
    }
    Ok((payload, start + len))
}

/// Checks every frame of a log. A damaged frame with no intact record anywhere after it is a
/// torn tail (reported, for the caller to cut); one with an intact record after it is corruption.
pub fn scan(bytes: &[u8]) -> Result<Scan<'_>, ScanError> {
    if bytes.len() < HEADER_LEN as usize {
        return Err(ScanError::NotALog(format!("{} bytes, shorter than the header", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(ScanError::NotALog("wrong magic bytes".into()));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(ScanError::NotALog(format!("format version {version}, this build reads {VERSION}")));
    }
    let mut records = Vec::new();
    let mut offset = HEADER_LEN as usize;
    while offset < bytes.len() {
        match frame_at(bytes, offset) {
            Ok((payload, next)) => {
                records.push((offset as u64, payload));
                offset = next;
            }
            Err(problem) => {
                // Any intact record later in the file means this one was damaged in place.
                if let Some(next_intact) = (offset + 1..bytes.len()).find(|&at| frame_at(bytes, at).is_ok()) {
                    return Err(ScanError::Corrupt { offset: offset as u64, problem, next_intact: next_intact as u64 });
                }
                return Ok(Scan { records, valid_len: offset as u64, torn_tail_bytes: (bytes.len() - offset) as u64 });
            }
        }
    }
    Ok(Scan { records, valid_len: offset as u64, torn_tail_bytes: 0 })
}

// ---- writing ---------------------------------------------------------------------------------

/// Ends the process: a log that could not be written (or synced) must not be served from, and a
/// restart replays exactly what the log holds.
fn fatal(what: &str, path: &Path, error: std::io::Error) -> ! {
    eprintln!("localnet: {what} {} failed: {error}; stopping so that nothing unlogged is served", path.display());
    std::process::exit(70);
}

#[derive(Default)]
struct SyncState {
    /// Bytes written to the file (the syncer's target).
    written: u64,
    closing: bool,
}

struct Syncer {
    state: Mutex<SyncState>,
    wake: Condvar,
}

/// Appends records; one per `append`, each a single `write(2)`.
pub struct WalWriter {
    path: PathBuf,
    file: File,
    end: u64,
    syncer: Arc<Syncer>,
    synced: watch::Receiver<u64>,
    sync_thread: Option<JoinHandle<()>>,
}

impl WalWriter {
    /// Writes a new log holding `records` next to `path`, makes it durable and only then moves it
    /// to `path`, so a crash during creation leaves no log rather than half of one.
    pub fn create(path: &Path, records: &[Vec<u8>]) -> std::io::Result<WalWriter> {
        let partial = path.with_extension("wal.partial");
        let mut file = OpenOptions::new().create(true).truncate(true).write(true).open(&partial)?;
        let mut bytes = header().to_vec();
        for record in records {
            bytes.extend_from_slice(&frame(record));
        }
        file.write_all(&bytes)?;
        file.sync_all()?;
        restrict_to_owner(&partial)?;
        std::fs::rename(&partial, path)?;
        sync_directory(path)?;
        drop(file);
        Self::open(path, bytes.len() as u64)
    }

    /// Continues a log whose intact records end at `valid_len`; anything after it is cut off.
    pub fn open(path: &Path, valid_len: u64) -> std::io::Result<WalWriter> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        if file.metadata()?.len() != valid_len {
            file.set_len(valid_len)?;
            file.sync_all()?;
        }
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(valid_len))?;
        let syncer = Arc::new(Syncer { state: Mutex::new(SyncState { written: valid_len, closing: false }), wake: Condvar::new() });
        let (synced_tx, synced) = watch::channel(valid_len);
        let sync_file = file.try_clone()?;
        let sync_path = path.to_path_buf();
        let shared = syncer.clone();
        let sync_thread = thread::Builder::new()
            .name("wal-sync".into())
            .spawn(move || sync_loop(&shared, &sync_file, &sync_path, &synced_tx, valid_len))?;
        Ok(WalWriter { path: path.to_path_buf(), file, end: valid_len, syncer, synced, sync_thread: Some(sync_thread) })
    }

    /// Appends one record. Returns once the kernel holds it (a killed process cannot lose it);
    /// `synced()` tells when it is on disk.
    pub fn append(&mut self, payload: &[u8]) {
        let framed = frame(payload);
        if let Err(error) = self.file.write_all(&framed) {
            fatal("writing", &self.path, error);
        }
        self.end += framed.len() as u64;
        let mut state = self.syncer.state.lock().expect("syncer state");
        state.written = self.end;
        self.syncer.wake.notify_one();
    }

    /// Bytes written so far: a reply about a record waits until `synced()` reaches this.
    pub fn position(&self) -> u64 {
        self.end
    }

    /// How far the log is durable, updated by the syncer after each `fdatasync`.
    pub fn synced(&self) -> watch::Receiver<u64> {
        self.synced.clone()
    }

    /// Makes everything written durable and stops the syncer; the writer takes no more records.
    pub fn close(&mut self) {
        {
            let mut state = self.syncer.state.lock().expect("syncer state");
            state.closing = true;
            self.syncer.wake.notify_one();
        }
        if let Some(thread) = self.sync_thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for WalWriter {
    fn drop(&mut self) {
        self.close();
    }
}

fn sync_loop(syncer: &Syncer, file: &File, path: &Path, synced_tx: &watch::Sender<u64>, mut synced: u64) {
    loop {
        let (target, closing) = {
            let mut state = syncer.state.lock().expect("syncer state");
            while state.written == synced && !state.closing {
                state = syncer.wake.wait(state).expect("syncer state");
            }
            (state.written, state.closing)
        };
        if target != synced {
            // A failed fdatasync cannot be retried safely (the kernel may have dropped the pages).
            if let Err(error) = file.sync_data() {
                fatal("syncing", path, error);
            }
            synced = target;
            synced_tx.send_replace(synced);
        }
        if closing {
            return;
        }
    }
}

fn restrict_to_owner(path: &Path) -> std::io::Result<()> {
    // The log holds the service keys (as the keypair files do).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Makes a rename in `path`'s directory durable.
fn sync_directory(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use solana_signer::Signer;

    fn log_of(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = header().to_vec();
        for payload in payloads {
            bytes.extend_from_slice(&frame(payload));
        }
        bytes
    }

    fn ticks(count: u64) -> Vec<Vec<u8>> {
        (1..=count).map(|slot| encode_tick(slot, 1_700_000_000 + slot as i64)).collect()
    }

    #[test]
    fn every_record_kind_reads_back_as_written() {
        let faucet = Keypair::new();
        let Record::Genesis { faucet: read, unix_timestamp } = Record::decode(&encode_genesis(&faucet, 42)).unwrap() else { panic!() };
        assert_eq!((read.pubkey(), unix_timestamp), (faucet.pubkey(), 42));
        let Record::Tick { slot, unix_timestamp } = Record::decode(&encode_tick(7, -3)).unwrap() else { panic!() };
        assert_eq!((slot, unix_timestamp), (7, -3));
        let tx = VersionedTransaction::default();
        let failed = Err(TransactionError::InstructionError(1, solana_instruction::error::InstructionError::Custom(6008)));
        let encoded = encode_transaction(9, &failed, &[5; 32], &tx);
        let Record::Transaction { slot, status, effects, transaction } = Record::decode(&encoded).unwrap() else { panic!() };
        assert_eq!((slot, status, effects, transaction), (9, failed, [5; 32], tx));
    }

    #[test]
    fn a_log_cut_inside_its_last_record_scans_as_a_torn_tail() {
        let bytes = log_of(&ticks(3));
        for cut in 1..(FRAME_HEADER_LEN + 17) {
            let scan = scan(&bytes[..bytes.len() - cut]).unwrap();
            assert_eq!(scan.records.len(), 2, "cut {cut} bytes");
            assert_eq!(scan.valid_len + scan.torn_tail_bytes, (bytes.len() - cut) as u64);
        }
        assert_eq!(scan(&bytes).unwrap().torn_tail_bytes, 0);
    }

    #[test]
    fn zeroes_after_the_last_record_are_a_torn_tail() {
        let mut bytes = log_of(&ticks(2));
        let end = bytes.len() as u64;
        bytes.extend_from_slice(&[0; 4096]);
        let scan = scan(&bytes).unwrap();
        assert_eq!((scan.records.len(), scan.valid_len, scan.torn_tail_bytes), (2, end, 4096));
    }

    #[test]
    fn a_damaged_record_before_intact_ones_is_corruption() {
        let mut bytes = log_of(&ticks(3));
        let second = HEADER_LEN as usize + FRAME_HEADER_LEN + 17;
        bytes[second + FRAME_HEADER_LEN + 3] ^= 0x40;
        let third = second + FRAME_HEADER_LEN + 17;
        assert_eq!(
            scan(&bytes).unwrap_err(),
            ScanError::Corrupt { offset: second as u64, problem: "checksum mismatch".into(), next_intact: third as u64 }
        );
    }

    #[test]
    fn a_file_of_another_format_is_refused() {
        assert!(matches!(scan(b"APGCHAIN\x02\0\0\0"), Err(ScanError::NotALog(_))));
        assert!(matches!(scan(b"something else entirely"), Err(ScanError::NotALog(_))));
    }
}
