//! `ledger-load`: real payment traffic for a running local ledger, fast enough for reliability
//! tests and benches (tens of thousands of events in seconds). Every payment is a signed
//! `record_payment` sent over JSON-RPC and executed by the program; a share of them run under
//! invocations two levels deep, so payment trees have depths 0 to 2.
//!
//! ```text
//! ledger-load --ledger-dir DIR [--payments 20000] [--agents 16] [--services 4]
//!             [--invocation-every 10] [--preflight]
//! ```
//! Reads `info.json` and the authority and mint-authority keypairs the ledger wrote to DIR and
//! prints one JSON summary line (counts, signatures, slot range).

use std::{collections::HashMap, path::PathBuf, str::FromStr, time::Instant};

use anchor_lang::solana_program::pubkey::Pubkey;
use base64::{engine::general_purpose::STANDARD as BASE64, Engine};
use ledger_runtime::{
    address::{associated_token_address, invocation_address},
    client::{open_invocation_ix, record_payment_ix, Transfer},
    ledger::USDC_DECIMALS,
};
use payment_ledger::{OpenInvocationArgs, Protocol, Rail, RecordPaymentArgs};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use solana_hash::Hash;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::Transaction;

const USAGE: &str = "usage: ledger-load --ledger-dir DIR [--payments 20000] [--agents 16] [--services 4] \
[--invocation-every 10] [--preflight]";
/// Fetch a fresh blockhash this often (a blockhash lives 150 slots).
const BLOCKHASH_EVERY: usize = 200;

struct Options {
    ledger_dir: PathBuf,
    payments: u64,
    agents: usize,
    services: usize,
    invocation_every: u64,
    preflight: bool,
}

fn parse() -> Result<Options, String> {
    let mut options = Options {
        ledger_dir: PathBuf::new(),
        payments: 20_000,
        agents: 16,
        services: 4,
        invocation_every: 10,
        preflight: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--preflight" {
            options.preflight = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = || value.parse::<u64>().map_err(|_| format!("{flag} must be a whole number\n{USAGE}"));
        match flag.as_str() {
            "--ledger-dir" => options.ledger_dir = PathBuf::from(&value),
            "--payments" => options.payments = number()?,
            "--agents" => options.agents = number()?.clamp(1, 1_000) as usize,
            "--services" => options.services = number()?.clamp(1, 100) as usize,
            "--invocation-every" => options.invocation_every = number()?,
            _ => return Err(format!("unknown option {flag}\n{USAGE}")),
        }
    }
    if options.ledger_dir.as_os_str().is_empty() {
        return Err(USAGE.into());
    }
    Ok(options)
}

struct Rpc {
    url: String,
    agent: ureq::Agent,
}

impl Rpc {
    fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let reply: Value = self
            .agent
            .post(&self.url)
            .send_json(body)
            .map_err(|e| format!("{method}: {e}"))?
            .into_json()
            .map_err(|e| format!("{method}: {e}"))?;
        match reply.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(reply["result"].clone()),
        }
    }

    fn blockhash(&self) -> Result<Hash, String> {
        let result = self.call("getLatestBlockhash", json!([]))?;
        Hash::from_str(result["value"]["blockhash"].as_str().unwrap_or_default()).map_err(|e| e.to_string())
    }

    fn send(&self, instructions: &[solana_instruction::Instruction], signers: &[&Keypair], blockhash: Hash, preflight: bool) -> Result<Signature, String> {
        let message = Message::new_with_blockhash(instructions, Some(&signers[0].pubkey()), &blockhash);
        let tx = Transaction::new(signers, message, blockhash);
        let wire = bincode::serialize(&tx).map_err(|e| e.to_string())?;
        let config = json!({ "encoding": "base64", "skipPreflight": !preflight });
        let result = self.call("sendTransaction", json!([BASE64.encode(wire), config]))?;
        Signature::from_str(result.as_str().unwrap_or_default()).map_err(|e| e.to_string())
    }
}

fn read_keypair(path: PathBuf) -> Result<Keypair, String> {
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes: Vec<u8> = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Keypair::try_from(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() {
    if let Err(message) = run() {
        eprintln!("ledger-load: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let options = parse()?;
    let info_text = std::fs::read_to_string(options.ledger_dir.join("info.json")).map_err(|e| format!("info.json: {e}"))?;
    let info: Value = serde_json::from_str(&info_text).map_err(|e| e.to_string())?;
    let pubkey = |field: &str| Pubkey::from_str(info[field].as_str().unwrap_or_default()).map_err(|_| format!("info.json: bad {field}"));
    let mint = pubkey("mint")?;
    let authority = read_keypair(options.ledger_dir.join("authority.json"))?;
    let mint_authority = read_keypair(options.ledger_dir.join("mint-authority.json"))?;
    let rpc = Rpc { url: info["rpcUrl"].as_str().unwrap_or_default().to_string(), agent: ureq::AgentBuilder::new().build() };

    // Wallets: agents funded with USDC, services with token accounts.
    let agents: Vec<Keypair> = (0..options.agents).map(|_| Keypair::new()).collect();
    let services: Vec<Keypair> = (0..options.services).map(|_| Keypair::new()).collect();
    let mut blockhash = rpc.blockhash()?;
    for owner in agents.iter().chain(&services) {
        let create = spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent(
            &authority.pubkey(),
            &owner.pubkey(),
            &mint,
            &spl_token_interface::ID,
        );
        rpc.send(&[create], &[&authority], blockhash, true)?;
    }
    for agent in &agents {
        let fund = spl_token_interface::instruction::mint_to_checked(
            &spl_token_interface::ID,
            &mint,
            &associated_token_address(&agent.pubkey(), &mint),
            &mint_authority.pubkey(),
            &[],
            u64::MAX / 1_000_000,
            USDC_DECIMALS,
        )
        .map_err(|e| e.to_string())?;
        rpc.send(&[fund], &[&mint_authority], blockhash, true)?;
    }

    let started = Instant::now();
    let mut next_id: HashMap<Pubkey, u64> = HashMap::new();
    let (mut first_slot, mut sent, mut invocations) = (None, 0u64, 0u64);
    let mut signatures = Vec::with_capacity(options.payments as usize);
    // The last transaction sent, payment or invocation opening: `lastSlot` is its slot, so a
    // backfill up to `lastSlot` sees everything this load wrote (an opening sent after the last
    // payment can land in a later slot).
    let mut last_sent = None;
    // The open invocation chain: (invocation account, sub-agent index, depth of its payments).
    let mut open: Option<(Pubkey, usize, u8)> = None;
    for n in 0..options.payments {
        if n as usize % BLOCKHASH_EVERY == 0 {
            blockhash = rpc.blockhash()?;
        }
        let (payer_index, invocation) = match open {
            Some((invocation, sub_agent, _)) if n % 3 != 0 => (sub_agent, Some(invocation)),
            _ => ((n as usize) % agents.len(), None),
        };
        let payer = &agents[payer_index];
        let service = &services[(n as usize) % services.len()];
        let id = next_id.entry(payer.pubkey()).or_insert(0);
        *id += 1;
        let card = n % 5 == 4;
        let endpoint = format!("api{}.example.com/v1/resource/{}", n % services.len() as u64, n % 7);
        let args = RecordPaymentArgs {
            payment_id: *id,
            amount: 1_000 + (n % 997) * 10,
            protocol: if n % 2 == 0 { Protocol::X402 } else { Protocol::Mpp },
            rail: if card { Rail::Card } else { Rail::Stablecoin },
            endpoint_hash: Sha256::digest(endpoint.as_bytes()).into(),
            settlement_reference: None,
        };
        let transfer = (!card).then(|| Transfer::between(&payer.pubkey(), &service.pubkey(), &mint));
        let ix = record_payment_ix(&authority.pubkey(), &payer.pubkey(), &service.pubkey(), args, transfer, invocation);
        let signature = rpc.send(&[ix], &[&authority, payer], blockhash, options.preflight)?;
        signatures.push(signature);
        last_sent = Some(signature);
        sent += 1;
        if first_slot.is_none() {
            first_slot = Some(rpc.call("getSignatureStatuses", json!([[signature.to_string()]]))?["value"][0]["slot"].clone());
        }

        // Every `invocation_every` payments, the payer invokes the next agent with a budget under
        // this payment (depth +1, at most 2), so trees grow from real parents.
        let depth = open.map_or(0, |(_, _, depth)| depth);
        if options.invocation_every > 0 && n % options.invocation_every == options.invocation_every - 1 {
            let (sub_agent, depth) = if depth < 2 { ((payer_index + 1) % agents.len(), depth + 1) } else { ((payer_index + 1) % agents.len(), 0) };
            if depth == 0 {
                open = None;
                continue;
            }
            let parent_signature: [u8; 64] = signature.into();
            let args = OpenInvocationArgs { parent_signature, sub_agent: agents[sub_agent].pubkey(), budget: u64::MAX / 4 };
            let ix = open_invocation_ix(&authority.pubkey(), &payer.pubkey(), args);
            last_sent = Some(rpc.send(&[ix], &[&authority, payer], blockhash, options.preflight)?);
            invocations += 1;
            open = Some((invocation_address(&parent_signature, &agents[sub_agent].pubkey()), sub_agent, depth));
        }
    }
    let elapsed = started.elapsed();
    let last_slot = match last_sent {
        Some(last) => rpc.call("getSignatureStatuses", json!([[last.to_string()]]))?["value"][0]["slot"].clone(),
        None => Value::Null,
    };
    println!(
        "{}",
        json!({
            "payments": sent,
            "invocations": invocations,
            "agents": agents.len(),
            "services": services.len(),
            "firstSlot": first_slot,
            "lastSlot": last_slot,
            "firstSignature": signatures.first().map(|s| s.to_string()),
            "lastSignature": signatures.last().map(|s| s.to_string()),
            "seconds": elapsed.as_secs_f64(),
            "paymentsPerSecond": sent as f64 / elapsed.as_secs_f64().max(1e-9),
        })
    );
    Ok(())
}
