//! How long a restarted local ledger takes to replay its log (`chain.wal`), by history size: a
//! ledger directory is filled with atomic record_payment transactions (one slot per 10, as under
//! load), the chain dropped, and the directory opened again, which replays every record. Then the
//! same for a log of empty slots only, the growth of an idle ledger (20 slots a second at the
//! default --slot-ms 50).
//!
//!   bash scripts/cargo.sh run --release -p localnet --example ledger_replay [-- 10000 100000]

use std::time::Instant;

use ledger_runtime::{client, LedgerSetup};
use localnet::{
    chain::{Chain, ChainEvent},
    persistence::{self, Opened},
    wal,
};
use payment_ledger::{Protocol, Rail, RecordPaymentArgs};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::{versioned::VersionedTransaction, Transaction};
use tokio::sync::broadcast;

const TRANSACTIONS_PER_SLOT: usize = 10;
const IDLE_SLOTS: u64 = 1_000_000;

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).map(|arg| arg.parse().expect("a transaction count")).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 100_000] } else { sizes };
    // CPU time beside wall time: on a shared machine the wall time mostly measures the neighbours.
    println!("{:>12} {:>10} {:>10} {:>12} {:>12} {:>14}", "transactions", "slots", "log MiB", "replay ms", "cpu ms", "tx per cpu s");
    for size in sizes {
        let dir = bench_dir(&format!("tx-{size}"));
        let (slots, bytes) = fill_with_payments(&dir, size);
        let (millis, cpu_millis, resumed) = replay(&dir);
        assert_eq!(resumed.transactions, size + bootstrap_transactions());
        println!(
            "{size:>12} {slots:>10} {:>10.1} {millis:>12.0} {cpu_millis:>12.0} {:>14.0}",
            bytes as f64 / (1 << 20) as f64,
            size as f64 * 1e3 / cpu_millis
        );
        std::fs::remove_dir_all(&dir).expect("remove bench dir");
    }

    let dir = bench_dir("idle");
    let Opened { mut chain, .. } = open(&dir);
    for _ in 0..IDLE_SLOTS {
        chain.tick();
    }
    drop(chain);
    let bytes = std::fs::metadata(dir.join(wal::FILE_NAME)).expect("log").len();
    let (millis, cpu_millis, resumed) = replay(&dir);
    println!(
        "idle: {} empty slots ({:.1} h at 50 ms), log {:.1} MiB, replayed in {millis:.0} ms ({cpu_millis:.0} ms cpu)",
        resumed.ticks,
        resumed.ticks as f64 * 0.05 / 3600.0,
        bytes as f64 / (1 << 20) as f64
    );
    std::fs::remove_dir_all(&dir).expect("remove bench dir");
}

fn bench_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ledger-replay-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench dir");
    dir
}

fn events() -> broadcast::Sender<ChainEvent> {
    broadcast::channel(16).0
}

fn open(dir: &std::path::Path) -> Opened {
    persistence::open(dir, u64::MAX / 4, events()).unwrap_or_else(|error| panic!("{error}"))
}

/// Wall and CPU milliseconds of a restart that replays the log in `dir`.
fn replay(dir: &std::path::Path) -> (f64, f64, persistence::Resumed) {
    let (started, cpu_started) = (Instant::now(), thread_cpu_ms());
    let Opened { resumed, .. } = open(dir);
    (started.elapsed().as_secs_f64() * 1e3, thread_cpu_ms() - cpu_started, resumed.expect("a replay"))
}

fn thread_cpu_ms() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(ok, 0, "clock_gettime");
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 / 1e6
}

fn bootstrap_transactions() -> usize {
    // Three airdrops, the mint, the treasury's token account, mint_to, initialize.
    7
}

/// Writes `count` payments into a new ledger in `dir`; returns the slots and log bytes.
fn fill_with_payments(dir: &std::path::Path, count: usize) -> (u64, u64) {
    let Opened { mut chain, setup, .. } = open(dir);
    let (agent, service) = (Keypair::new(), Keypair::new());
    let setup_agent = |chain: &mut Chain, setup: &LedgerSetup| {
        let airdrop = chain.ledger.airdrop_transaction(&agent.pubkey(), 1_000_000_000, chain.latest_blockhash().0);
        chain.submit(airdrop, false).expect("airdrop");
        let accounts: Vec<_> = [&agent, &service]
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
        let agent_token = ledger_runtime::address::associated_token_address(&agent.pubkey(), &setup.mint);
        let fund = spl_token_interface::instruction::transfer_checked(
            &spl_token_interface::ID,
            &setup.treasury_token,
            &setup.mint,
            &agent_token,
            &setup.treasury.pubkey(),
            &[],
            u64::MAX / 8,
            6,
        )
        .expect("transfer_checked");
        chain.submit(sign(chain, &[&setup.authority], &accounts), false).expect("token accounts");
        chain.submit(sign(chain, &[&setup.treasury], &[fund]), false).expect("funding");
    };
    setup_agent(&mut chain, &setup);
    for id in 1..=count as u64 - 3 {
        let args = RecordPaymentArgs {
            payment_id: id,
            amount: id,
            protocol: Protocol::X402,
            rail: Rail::Stablecoin,
            endpoint_hash: [7; 32],
            settlement_reference: None,
        };
        let transfer = client::Transfer::between(&agent.pubkey(), &service.pubkey(), &setup.mint);
        let ix = client::record_payment_ix(&setup.authority.pubkey(), &agent.pubkey(), &service.pubkey(), args, Some(transfer), None);
        chain.submit(sign(&chain, &[&setup.authority, &agent], &[ix]), false).expect("payment");
        if id as usize % TRANSACTIONS_PER_SLOT == 0 {
            chain.tick();
        }
    }
    let slots = chain.slot();
    drop(chain);
    (slots, std::fs::metadata(dir.join(wal::FILE_NAME)).expect("log").len())
}

fn sign(chain: &Chain, signers: &[&Keypair], instructions: &[solana_instruction::Instruction]) -> VersionedTransaction {
    let blockhash = chain.latest_blockhash().0;
    let message = Message::new_with_blockhash(instructions, Some(&signers[0].pubkey()), &blockhash);
    Transaction::new(signers, message, blockhash).into()
}
