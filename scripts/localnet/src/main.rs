//! `localnet`: a local Solana ledger running payment_ledger, for development and tests.
//!
//! The Agave SVM (LiteSVM) executes every transaction, our program runs as a native builtin
//! and SPL Token as its BPF build; slots advance on a clock; standard JSON-RPC and websocket
//! subscriptions are served so `@solana/web3.js`, Anchor and the indexer use it like
//! `solana-test-validator`. The chain persists in the ledger directory (`chain.wal`, replayed at
//! start; `persistence.rs`). A new directory gets a new ledger: a 6-decimal USDC-like mint, a
//! funded treasury and the program config. Every start writes their addresses and keypairs into
//! the directory (`info.json`, `*.json`).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use axum::{
    extract::{State, WebSocketUpgrade},
    serve::ListenerExt,
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use ledger_runtime::LedgerSetup;
use serde_json::{json, Value};
use solana_keypair::Keypair;
use solana_signer::Signer;
use tokio::sync::broadcast;

use localnet::{
    chain::{ChainEvent, ChainHandle},
    dir_lock, parent_watch,
    persistence::{self, Resumed},
    rpc, ws,
};

/// Requests in one JSON-RPC batch, so one call cannot monopolise the chain thread.
const MAX_BATCH: usize = 100;

struct Options {
    bind: String,
    rpc_port: u16,
    ws_port: u16,
    ledger_dir: PathBuf,
    slot_ms: u64,
    treasury_units: u64,
    uninitialized: bool,
    exit_with_parent: Option<u32>,
}

const USAGE: &str = "usage: localnet [--rpc-port 8899] [--ws-port <rpc-port + 1>] [--bind 127.0.0.1] \
[--ledger-dir .data/localnet] [--slot-ms 50] [--treasury-units 1000000000000 (a new ledger only)] \
[--exit-with-parent <pid of the parent>] [--uninitialized (a new ledger only: no program config, \
as a cluster the program was just deployed on)]";

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        bind: "127.0.0.1".into(),
        rpc_port: 8899,
        ws_port: 0,
        ledger_dir: PathBuf::from(".data/localnet"),
        slot_ms: 50,
        treasury_units: 1_000_000 * 1_000_000,
        uninitialized: false,
        exit_with_parent: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        if flag == "--uninitialized" {
            options.uninitialized = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = |name: &str| value.parse::<u64>().map_err(|_| format!("{name} must be a whole number, got {value:?}"));
        match flag.as_str() {
            "--bind" => options.bind = value.clone(),
            "--rpc-port" => options.rpc_port = u16::try_from(number("--rpc-port")?).map_err(|_| "port out of range")?,
            "--ws-port" => options.ws_port = u16::try_from(number("--ws-port")?).map_err(|_| "port out of range")?,
            "--ledger-dir" => options.ledger_dir = PathBuf::from(&value),
            "--slot-ms" => options.slot_ms = number("--slot-ms")?,
            "--treasury-units" => options.treasury_units = number("--treasury-units")?,
            "--exit-with-parent" => {
                options.exit_with_parent = Some(u32::try_from(number("--exit-with-parent")?).map_err(|_| "pid out of range")?);
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    if options.rpc_port == 0 {
        return Err("--rpc-port must be a fixed port (0 is not supported)".into());
    }
    if options.ws_port == 0 {
        options.ws_port = options.rpc_port.checked_add(1).ok_or("--rpc-port too high for the default ws port")?;
    }
    if !(1..=10_000).contains(&options.slot_ms) {
        return Err("--slot-ms must be between 1 and 10000".into());
    }
    Ok(options)
}

fn write_keypair(path: &PathBuf, keypair: &Keypair) -> std::io::Result<()> {
    let bytes: Vec<u8> = keypair.to_bytes().to_vec();
    std::fs::write(path, serde_json::to_string(&bytes)?)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// How this start came about, for `info.json`.
struct StartInfo {
    genesis_hash: String,
    resumed: Option<Resumed>,
    slot: u64,
}

fn write_ledger_dir(options: &Options, setup: &LedgerSetup, start: &StartInfo) -> std::io::Result<Value> {
    let dir = &options.ledger_dir;
    write_keypair(&dir.join("authority.json"), &setup.authority)?;
    write_keypair(&dir.join("treasury.json"), &setup.treasury)?;
    write_keypair(&dir.join("mint-authority.json"), &setup.mint_authority)?;
    let info = json!({
        "rpcUrl": format!("http://{}:{}", options.bind, options.rpc_port),
        "wsUrl": format!("ws://{}:{}", options.bind, options.ws_port),
        "programId": payment_ledger::ID.to_string(),
        "mint": setup.mint.to_string(),
        "decimals": ledger_runtime::ledger::USDC_DECIMALS,
        "authority": setup.authority.pubkey().to_string(),
        "treasury": setup.treasury.pubkey().to_string(),
        "treasuryToken": setup.treasury_token.to_string(),
        "mintAuthority": setup.mint_authority.pubkey().to_string(),
        "genesisHash": start.genesis_hash,
        "resumed": start.resumed.is_some(),
        "replayedTransactions": start.resumed.as_ref().map_or(0, |r| r.transactions),
        "replayMs": start.resumed.as_ref().map_or(0, |r| r.replay_ms),
        "startSlot": start.slot,
    });
    // Written whole under another name and renamed, so a reader never sees half of it.
    let partial = dir.join("info.json.partial");
    std::fs::write(&partial, serde_json::to_string_pretty(&info)?)?;
    std::fs::rename(partial, dir.join("info.json"))?;
    Ok(info)
}

#[derive(Clone)]
struct App {
    chain: ChainHandle,
    events: broadcast::Sender<ChainEvent>,
}

async fn handle_post(State(app): State<App>, body: axum::body::Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return Json(json!({ "jsonrpc": "2.0", "error": { "code": -32700, "message": "Parse error" }, "id": null })).into_response();
    };
    match request {
        Value::Array(batch) if batch.is_empty() || batch.len() > MAX_BATCH => Json(json!({
            "jsonrpc": "2.0", "error": { "code": -32600, "message": format!("batch must hold 1..={MAX_BATCH} requests") }, "id": null
        }))
        .into_response(),
        Value::Array(batch) => {
            let mut replies = Vec::with_capacity(batch.len());
            for request in batch {
                replies.push(dispatch(&app.chain, request).await);
            }
            Json(Value::Array(replies)).into_response()
        }
        request => Json(dispatch(&app.chain, request).await).into_response(),
    }
}

async fn dispatch(chain: &ChainHandle, request: Value) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return json!({ "jsonrpc": "2.0", "error": { "code": -32600, "message": "Invalid request: no method" }, "id": id });
    };
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    match rpc::call(chain, method, params).await {
        Ok(result) => json!({ "jsonrpc": "2.0", "result": result, "id": id }),
        Err(error) => json!({ "jsonrpc": "2.0", "error": error.to_json(), "id": id }),
    }
}

/// GET answers websocket upgrades (subscriptions) and plain health checks on the same path.
async fn handle_get(
    State(app): State<App>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    match upgrade {
        Ok(upgrade) => upgrade.on_upgrade(move |socket| ws::serve(socket, app.chain, app.events)),
        Err(_) => "ok".into_response(),
    }
}

#[tokio::main]
async fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };

    if let Some(parent) = options.exit_with_parent {
        if let Err(message) = parent_watch::exit_with_parent(parent) {
            eprintln!("localnet: --exit-with-parent: {message}");
            std::process::exit(1);
        }
    }
    if let Err(error) = std::fs::create_dir_all(&options.ledger_dir) {
        eprintln!("cannot create ledger dir {}: {error}", options.ledger_dir.display());
        std::process::exit(1);
    }
    // Held until the process ends.
    let _lock = match dir_lock::lock(&options.ledger_dir) {
        Ok(lock) => lock,
        Err(message) => {
            eprintln!("localnet: {message}");
            std::process::exit(1);
        }
    };

    let (events, _) = broadcast::channel::<ChainEvent>(4_096);
    let chain_events = events.clone();
    let treasury_units = options.treasury_units;
    let initialize = !options.uninitialized;
    let ledger_dir = options.ledger_dir.clone();
    let opened = ChainHandle::try_spawn(move || {
        let opened = persistence::open_with(&ledger_dir, treasury_units, initialize, chain_events)?;
        let start = StartInfo { genesis_hash: opened.chain.genesis_hash().to_string(), resumed: opened.resumed, slot: opened.chain.slot() };
        Ok::<_, persistence::OpenError>((opened.chain, (opened.setup, start)))
    });
    let (chain, (setup, start)) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            eprintln!("localnet: {error}");
            std::process::exit(1);
        }
    };
    if let Some(resumed) = &start.resumed {
        eprintln!(
            "localnet: resumed {}: {} transactions and {} slots replayed in {} ms, at slot {}",
            options.ledger_dir.display(),
            resumed.transactions,
            resumed.ticks,
            resumed.replay_ms,
            resumed.slot
        );
    }
    let info = match write_ledger_dir(&options, &setup, &start) {
        Ok(info) => info,
        Err(error) => {
            eprintln!("cannot write ledger dir {}: {error}", options.ledger_dir.display());
            std::process::exit(1);
        }
    };

    let app = App { chain: chain.clone(), events };
    let router = Router::new()
        .route("/", get(handle_get).post(handle_post))
        .route("/health", get(|| async { "ok" }))
        .with_state(app);
    let mut listeners = Vec::new();
    for port in [options.rpc_port, options.ws_port] {
        let address: SocketAddr = match format!("{}:{port}", options.bind).parse() {
            Ok(address) => address,
            Err(_) => {
                eprintln!("invalid --bind address {}", options.bind);
                std::process::exit(2);
            }
        };
        match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => listeners.push(listener),
            Err(error) => {
                eprintln!("cannot listen on {address}: {error}");
                std::process::exit(1);
            }
        }
    }
    for listener in listeners {
        let router = router.clone();
        // Without TCP_NODELAY a notification sent right after a reply waits ~40 ms (Nagle).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move { axum::serve(listener, router).await });
    }

    let ticker = chain.clone();
    let slot_ms = options.slot_ms;
    let ticking = tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_millis(slot_ms));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            ticker.call(|c| c.tick()).await;
        }
    });

    eprintln!("{}", serde_json::to_string_pretty(&info).unwrap_or_default());
    println!("localnet ready {}", info["rpcUrl"].as_str().unwrap_or_default());

    shutdown_signal().await;
    eprintln!("localnet stopping");
    ticking.abort();
    // Every record is already written; this makes the log durable and stops the chain.
    chain.close().await;
    eprintln!("localnet stopped, log synced");
    std::process::exit(0);
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
