//! Ledger-side cost of a payment: how long the local ledger takes to check, (pre)flight and
//! execute `record_payment` (atomic x402: TransferChecked CPI + record + event CPI), against a
//! plain SPL Token TransferChecked in the same run. No HTTP, no client: this is the floor under
//! bench/ledger/record-payment.ts. The last rows run record_payment on a chain that writes its
//! log (`chain.wal`, as `localnet` does): what logging adds per transaction on the chain thread,
//! and what a client that waits for each reply (the log on disk, `fdatasync`) sees.
//!
//! `npm run bench:ledger` runs it; alone: `bash scripts/cargo.sh run --release -p localnet --example ledger_execute`

use std::time::{Duration, Instant};

use anchor_lang::solana_program::pubkey::Pubkey;
use ledger_runtime::{client, ledger::USDC_DECIMALS, Ledger};
use localnet::{chain::Chain, wal::WalWriter};
use payment_ledger::{Protocol, Rail, RecordPaymentArgs};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::{versioned::VersionedTransaction, Transaction};
use tokio::sync::broadcast;

const PAYMENTS: u64 = 5_000;

fn main() {
    let (events, _) = broadcast::channel(16);
    let mut ledger = Ledger::new();
    let setup = ledger.bootstrap(0).expect("bootstrap");
    let (agent, service) = (Keypair::new(), Keypair::new());
    ledger.airdrop(&agent.pubkey(), 10_000_000_000).unwrap();
    let agent_token = ledger.create_token_account(&setup.authority, &agent.pubkey(), &setup.mint).unwrap();
    let service_token = ledger.create_token_account(&setup.authority, &service.pubkey(), &setup.mint).unwrap();
    ledger.mint_to(&setup.mint_authority, &setup.mint, &agent_token, u64::MAX / 4).unwrap();
    let mut chain = Chain::new(ledger, events);
    let payment = |chain: &Chain, payment_id: u64| {
        let args = RecordPaymentArgs {
            payment_id,
            amount: 1 + payment_id,
            protocol: Protocol::X402,
            rail: Rail::Stablecoin,
            endpoint_hash: [7; 32],
            settlement_reference: None,
        };
        let transfer = client::Transfer::between(&agent.pubkey(), &service.pubkey(), &setup.mint);
        let ix = client::record_payment_ix(&setup.authority.pubkey(), &agent.pubkey(), &service.pubkey(), args, Some(transfer), None);
        sign(chain, &[&setup.authority, &agent], &[ix])
    };

    let mut rows = Vec::new();
    for preflight in [false, true] {
        // Distinct amounts per round so no transaction repeats a signature.
        let offset = if preflight { PAYMENTS } else { 0 };
        let baseline: Vec<VersionedTransaction> = (0..PAYMENTS)
            .map(|i| {
                let ix = spl_transfer(&agent.pubkey(), &agent_token, &setup.mint, &service_token, 1 + offset + i);
                sign(&chain, &[&agent], &[ix])
            })
            .collect();
        rows.push(("SPL TransferChecked (baseline)", preflight, run(&mut chain, baseline, preflight)));

        let payments: Vec<VersionedTransaction> = (1..=PAYMENTS).map(|id| payment(&chain, offset + id)).collect();
        rows.push(("record_payment (atomic x402)", preflight, run(&mut chain, payments, preflight)));
    }

    println!("ledger-side execution, {PAYMENTS} transactions per row, one thread");
    println!("{:<32} {:>9} {:>10} {:>12}", "operation", "preflight", "tx/s", "us per tx");
    for (name, preflight, elapsed) in &rows {
        let per_tx = elapsed.as_secs_f64() * 1e6 / PAYMENTS as f64;
        println!("{name:<32} {:>9} {:>10.0} {per_tx:>12.1}", if *preflight { "on" } else { "off" }, 1e6 / per_tx);
    }
    let ratio = rows[1].2.as_secs_f64() / rows[0].2.as_secs_f64();
    println!("record_payment / baseline (preflight off): {ratio:.2}x");
    logging_cost();
}

/// record_payment (preflight on, as sendTransaction defaults) on two identical chains, one in
/// memory and one writing `chain.wal` as `localnet` does, in alternating batches so that the
/// load of a shared machine falls on both alike.
fn logging_cost() {
    const ROUNDS: u64 = 5;
    const BATCH: u64 = PAYMENTS / ROUNDS;
    let dir = std::env::temp_dir().join(format!("ledger-execute-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let mut memory = PaymentWorld::new();
    let mut logged = PaymentWorld::new();
    logged.chain.attach_log(WalWriter::create(&dir.join("chain.wal"), &[]).expect("bench log"));
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let (mut in_memory, mut written, mut on_disk) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        let batch = memory.payments(BATCH);
        in_memory += run(&mut memory.chain, batch, true);
        let batch = logged.payments(BATCH);
        written += run(&mut logged.chain, batch, true);
        // One client in sequence: each reply waits until the log is on disk, as sendTransaction does.
        let batch = logged.payments(BATCH);
        let mut synced = logged.chain.log_synced().expect("a logged chain");
        let start = Instant::now();
        for tx in batch {
            logged.chain.submit(tx, true).expect("payment lands");
            let position = logged.chain.log_position();
            runtime.block_on(synced.wait_for(|on_disk| *on_disk >= position)).expect("syncer alive");
        }
        on_disk += start.elapsed();
    }
    drop(logged);
    std::fs::remove_dir_all(&dir).expect("remove bench dir");
    let per_tx = |total: Duration| total.as_secs_f64() * 1e6 / PAYMENTS as f64;
    println!("record_payment, preflight on, {PAYMENTS} per row in alternating batches of {BATCH}");
    println!("{:<44} {:>10} {:>12}", "chain", "tx/s", "us per tx");
    for (name, total) in [("in memory", in_memory), ("writing chain.wal", written), ("writing chain.wal, each reply on disk", on_disk)] {
        println!("{name:<44} {:>10.0} {:>12.1}", 1e6 / per_tx(total), per_tx(total));
    }
    println!(
        "the log adds {:.1} us per transaction on the chain thread; waiting for fdatasync, {:.1} us per reply",
        per_tx(written) - per_tx(in_memory),
        per_tx(on_disk) - per_tx(in_memory)
    );
}

/// A chain with a funded agent paying a service through record_payment.
struct PaymentWorld {
    chain: Chain,
    setup: ledger_runtime::LedgerSetup,
    agent: Keypair,
    service: Keypair,
    next_id: u64,
}

impl PaymentWorld {
    fn new() -> PaymentWorld {
        let mut ledger = Ledger::new();
        let setup = ledger.bootstrap(0).expect("bootstrap");
        let (agent, service) = (Keypair::new(), Keypair::new());
        ledger.airdrop(&agent.pubkey(), 10_000_000_000).unwrap();
        let agent_token = ledger.create_token_account(&setup.authority, &agent.pubkey(), &setup.mint).unwrap();
        ledger.create_token_account(&setup.authority, &service.pubkey(), &setup.mint).unwrap();
        ledger.mint_to(&setup.mint_authority, &setup.mint, &agent_token, u64::MAX / 4).unwrap();
        let chain = Chain::new(ledger, broadcast::channel(16).0);
        PaymentWorld { chain, setup, agent, service, next_id: 0 }
    }

    fn payments(&mut self, count: u64) -> Vec<VersionedTransaction> {
        (0..count)
            .map(|_| {
                self.next_id += 1;
                let args = RecordPaymentArgs {
                    payment_id: self.next_id,
                    amount: self.next_id,
                    protocol: Protocol::X402,
                    rail: Rail::Stablecoin,
                    endpoint_hash: [7; 32],
                    settlement_reference: None,
                };
                let (authority, agent, service) = (&self.setup.authority, &self.agent, &self.service);
                let transfer = client::Transfer::between(&agent.pubkey(), &service.pubkey(), &self.setup.mint);
                let ix = client::record_payment_ix(&authority.pubkey(), &agent.pubkey(), &service.pubkey(), args, Some(transfer), None);
                sign(&self.chain, &[authority, agent], &[ix])
            })
            .collect()
    }
}

fn run(chain: &mut Chain, transactions: Vec<VersionedTransaction>, preflight: bool) -> Duration {
    let start = Instant::now();
    for (i, tx) in transactions.into_iter().enumerate() {
        chain.submit(tx, preflight).unwrap_or_else(|e| panic!("transaction {i} failed: {e:?}"));
    }
    start.elapsed()
}

fn sign(chain: &Chain, signers: &[&Keypair], instructions: &[solana_instruction::Instruction]) -> VersionedTransaction {
    let blockhash = chain.latest_blockhash().0;
    let message = Message::new_with_blockhash(instructions, Some(&signers[0].pubkey()), &blockhash);
    Transaction::new(signers, message, blockhash).into()
}

fn spl_transfer(owner: &Pubkey, from: &Pubkey, mint: &Pubkey, to: &Pubkey, units: u64) -> solana_instruction::Instruction {
    spl_token_interface::instruction::transfer_checked(&spl_token_interface::ID, from, mint, to, owner, &[], units, USDC_DECIMALS)
        .expect("valid transfer_checked")
}
