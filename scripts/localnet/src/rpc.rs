//! Solana JSON-RPC methods over the chain. Parameters are validated here and answered with the
//! error codes a validator uses, so clients built for a real cluster behave the same.

use std::str::FromStr;

use anchor_lang::solana_program::pubkey::Pubkey;
use base64::{engine::general_purpose::STANDARD as BASE64, Engine};
use serde_json::{json, Value};
use solana_hash::Hash;
use solana_message::VersionedMessage;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

use crate::{
    chain::{Chain, ChainHandle, SubmitError, MAX_SIGNATURES_LIMIT},
    encode::{self, AccountEncoding, TxEncoding},
    fields, parse,
};

/// The validator version we answer `getVersion` with: the Agave runtime LiteSVM embeds.
const SOLANA_CORE: &str = "4.2.2";
/// Fee per signature, as on mainnet.
const LAMPORTS_PER_SIGNATURE: u64 = 5_000;
/// The largest transaction accepted on the wire (PACKET_DATA_SIZE).
const MAX_TRANSACTION_BYTES: usize = 1_232;
const MAX_AIRDROP_LAMPORTS: u64 = 1_000 * 1_000_000_000;
const MAX_MULTIPLE_ACCOUNTS: usize = 100;
const MAX_BLOCK_RANGE: u64 = 500_000;

#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError { code: -32602, message: message.into(), data: None }
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError { code: -32601, message: format!("Method not found: {method}"), data: None }
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

type RpcResult = Result<Value, RpcError>;

/// Runs one JSON-RPC method.
pub async fn call(chain: &ChainHandle, method: &str, params: Value) -> RpcResult {
    let params = Params::new(params)?;
    match method {
        "getHealth" => Ok(json!("ok")),
        "getVersion" => Ok(json!({ "solana-core": SOLANA_CORE, "feature-set": 0 })),
        "getGenesisHash" => Ok(json!(chain.call(|c| c.genesis_hash().to_string()).await)),
        "getSlot" | "getBlockHeight" => {
            let finalized = params.commitment(0) == Some("finalized");
            Ok(json!(chain.call(move |c| if finalized { c.finalized_slot() } else { c.slot() }).await))
        }
        "getFirstAvailableBlock" => Ok(json!(0)),
        "getEpochInfo" => {
            let (slot, count) = chain.call(|c| (c.slot(), c.transaction_count())).await;
            Ok(json!({
                "absoluteSlot": slot, "blockHeight": slot, "epoch": 0, "slotIndex": slot,
                "slotsInEpoch": 432_000, "transactionCount": count,
            }))
        }
        "getLatestBlockhash" => {
            let finalized = params.commitment(0) == Some("finalized");
            let (slot, (hash, last_valid)) = chain
                .call(move |c| {
                    if finalized {
                        (c.finalized_slot(), c.finalized_blockhash())
                    } else {
                        (c.slot(), c.latest_blockhash())
                    }
                })
                .await;
            Ok(with_context(slot, json!({ "blockhash": hash.to_string(), "lastValidBlockHeight": last_valid })))
        }
        "isBlockhashValid" => {
            let hash = params.hash(0)?;
            let (slot, valid) = chain.call(move |c| (c.slot(), c.is_blockhash_valid(&hash))).await;
            Ok(with_context(slot, json!(valid)))
        }
        "getFeeForMessage" => {
            let bytes = params.encoded_bytes(0, "base64")?;
            let message: VersionedMessage =
                bincode::deserialize(&bytes).map_err(|e| RpcError::invalid_params(format!("invalid message: {e}")))?;
            let fee = message.header().num_required_signatures as u64 * LAMPORTS_PER_SIGNATURE;
            let slot = chain.call(|c| c.slot()).await;
            Ok(with_context(slot, json!(fee)))
        }
        "getMinimumBalanceForRentExemption" => {
            let len = params.u64(0)? as usize;
            if len > 10 * 1024 * 1024 {
                return Err(RpcError::invalid_params("data length above the 10 MiB account limit"));
            }
            Ok(json!(chain.call(move |c| c.ledger.svm.minimum_balance_for_rent_exemption(len)).await))
        }
        "getBalance" => {
            let address = params.pubkey(0)?;
            let (slot, lamports) = chain
                .call(move |c| (c.slot(), c.ledger.svm.get_account(&address).map_or(0, |a| a.lamports)))
                .await;
            Ok(with_context(slot, json!(lamports)))
        }
        "getAccountInfo" => {
            let address = params.pubkey(0)?;
            let encoding = params.account_encoding(1)?;
            let (slot, account) = chain.call(move |c| (c.slot(), encoded_account(c, &address, encoding))).await;
            Ok(with_context(slot, account))
        }
        "getMultipleAccounts" => {
            let addresses = params.pubkeys(0)?;
            if addresses.len() > MAX_MULTIPLE_ACCOUNTS {
                return Err(RpcError::invalid_params(format!("at most {MAX_MULTIPLE_ACCOUNTS} accounts")));
            }
            let encoding = params.account_encoding(1)?;
            let (slot, values) = chain
                .call(move |c| (c.slot(), addresses.iter().map(|a| encoded_account(c, a, encoding)).collect::<Vec<_>>()))
                .await;
            Ok(with_context(slot, json!(values)))
        }
        "getTokenAccountBalance" => {
            let address = params.pubkey(0)?;
            let (slot, balance) = chain
                .call(move |c| {
                    let read = || {
                        let account = c.ledger.svm.get_account(&address)?;
                        let amount = u64::from_le_bytes(account.data.get(64..72)?.try_into().ok()?);
                        let mint = Pubkey::try_from(account.data.get(0..32)?).ok()?;
                        let decimals = *c.ledger.svm.get_account(&mint)?.data.get(44)?;
                        Some((amount, decimals))
                    };
                    (c.slot(), read())
                })
                .await;
            let Some((amount, decimals)) = balance else {
                return Err(RpcError::invalid_params("Invalid param: could not find account"));
            };
            Ok(with_context(slot, fields::token_amount(amount, decimals)))
        }
        "getTokenAccountsByOwner" => {
            let owner = params.pubkey(0)?;
            let filter = token_account_filter(params.get(1)?)?;
            let encoding = params.account_encoding(2)?;
            let (slot, accounts) = chain
                .call(move |c| {
                    let found: Vec<Value> = c
                        .token_accounts_of(&owner)
                        .into_iter()
                        .filter(|(_, account)| filter.matches(account))
                        .map(|(address, _)| json!({ "pubkey": address.to_string(), "account": encoded_account(c, &address, encoding) }))
                        .collect();
                    (c.slot(), found)
                })
                .await;
            Ok(with_context(slot, json!(accounts)))
        }
        "requestAirdrop" => {
            let address = params.pubkey(0)?;
            let lamports = params.u64(1)?;
            if lamports == 0 || lamports > MAX_AIRDROP_LAMPORTS {
                return Err(RpcError::invalid_params(format!("airdrop must be 1..={MAX_AIRDROP_LAMPORTS} lamports")));
            }
            let (result, logged) = chain
                .call(move |c| {
                    let tx = c.ledger.airdrop_transaction(&address, lamports, c.latest_blockhash().0);
                    (c.submit(tx, false), c.log_position())
                })
                .await;
            chain.durable(logged).await;
            result.map(|sig| json!(sig.to_string())).map_err(submit_error)
        }
        "sendTransaction" => {
            let config = params.object(1);
            let encoding = config.get("encoding").and_then(Value::as_str).unwrap_or("base58");
            let preflight = !config.get("skipPreflight").and_then(Value::as_bool).unwrap_or(false);
            let tx = params.transaction(0, encoding)?;
            let (result, logged) = chain.call(move |c| (c.submit(tx, preflight), c.log_position())).await;
            // The reply says the transaction landed: it waits until the log has it on disk.
            chain.durable(logged).await;
            result.map(|sig| json!(sig.to_string())).map_err(submit_error)
        }
        "simulateTransaction" => {
            let config = params.object(1);
            let encoding = config.get("encoding").and_then(Value::as_str).unwrap_or("base58");
            let tx = params.transaction(0, encoding)?;
            let options = SimulateOptions::from_config(&config, &tx)?;
            Ok(chain.call(move |c| simulate(c, tx, options)).await)
        }
        "getSignatureStatuses" => {
            let signatures = params.signatures(0)?;
            if signatures.len() > 256 {
                return Err(RpcError::invalid_params("at most 256 signatures"));
            }
            let (slot, statuses) = chain
                .call(move |c| {
                    let slot = c.slot();
                    let finalized = c.finalized_slot();
                    let statuses: Vec<Value> = signatures
                        .iter()
                        .map(|sig| match c.transaction(sig) {
                            None => Value::Null,
                            Some(tx) => {
                                let err = tx.status.clone().err();
                                let is_final = tx.slot <= finalized;
                                json!({
                                    "slot": tx.slot,
                                    "confirmations": if is_final { Value::Null } else { json!(slot - tx.slot) },
                                    "err": encode::error(&err),
                                    "status": encode::status(&err),
                                    "confirmationStatus": if is_final { "finalized" } else { "confirmed" },
                                })
                            }
                        })
                        .collect();
                    (slot, statuses)
                })
                .await;
            Ok(with_context(slot, json!(statuses)))
        }
        "getTransaction" => {
            let signature = params.signature(0)?;
            let encoding = params.tx_encoding(1)?;
            let min_final = params.commitment(1) == Some("finalized");
            Ok(chain
                .call(move |c| {
                    let tx = c.transaction(&signature)?;
                    if min_final && tx.slot > c.finalized_slot() {
                        return None;
                    }
                    Some(encode::transaction(tx, encoding))
                })
                .await
                .unwrap_or(Value::Null))
        }
        "getSignaturesForAddress" => {
            let address = params.pubkey(0)?;
            let config = params.object(1);
            let limit = config.get("limit").map_or(Ok(MAX_SIGNATURES_LIMIT as u64), |v| {
                v.as_u64().ok_or_else(|| RpcError::invalid_params("limit must be a positive integer"))
            })? as usize;
            if limit == 0 || limit > MAX_SIGNATURES_LIMIT {
                return Err(RpcError::invalid_params(format!("limit must be 1..={MAX_SIGNATURES_LIMIT}")));
            }
            let before = optional_signature(config.get("before"))?;
            let until = optional_signature(config.get("until"))?;
            Ok(chain
                .call(move |c| {
                    let finalized = c.finalized_slot();
                    let list: Vec<Value> = c
                        .signatures_for(&address, limit, before.as_ref(), until.as_ref())
                        .into_iter()
                        .map(|tx| {
                            let err = tx.status.clone().err();
                            json!({
                                "signature": tx.transaction.signatures[0].to_string(),
                                "slot": tx.slot,
                                "err": encode::error(&err),
                                "memo": null,
                                "blockTime": tx.block_time,
                                "confirmationStatus": if tx.slot <= finalized { "finalized" } else { "confirmed" },
                            })
                        })
                        .collect();
                    json!(list)
                })
                .await)
        }
        "getBlockTime" => {
            let slot = params.u64(0)?;
            chain
                .call(move |c| c.block(slot).map(|(b, _)| b.block_time))
                .await
                .map(|t| json!(t))
                .ok_or_else(|| block_not_available(slot))
        }
        "getBlocks" => {
            let start = params.u64(0)?;
            let end = match params.optional_u64(1)? {
                Some(end) => end,
                None => chain.call(|c| c.slot()).await,
            };
            if end < start || end - start > MAX_BLOCK_RANGE {
                return Err(RpcError::invalid_params(format!("slot range must be ascending and at most {MAX_BLOCK_RANGE}")));
            }
            Ok(json!(chain.call(move |c| c.block_slots(start, end)).await))
        }
        "getBlock" => {
            let slot = params.u64(0)?;
            let config = params.object(1);
            let details = config.get("transactionDetails").and_then(Value::as_str).unwrap_or("full").to_string();
            let encoding = params.tx_encoding(1)?;
            chain
                .call(move |c| {
                    let (block, transactions) = c.block(slot)?;
                    let mut value = json!({
                        "blockhash": block.blockhash.to_string(),
                        "previousBlockhash": block.previous_blockhash.to_string(),
                        "parentSlot": block.parent_slot,
                        "blockTime": block.block_time,
                        "blockHeight": block.slot,
                        "rewards": [],
                    });
                    match details.as_str() {
                        "signatures" => {
                            value["signatures"] = transactions.iter().map(|t| json!(t.transaction.signatures[0].to_string())).collect();
                        }
                        "none" => {}
                        _ => {
                            value["transactions"] = transactions
                                .iter()
                                .map(|t| {
                                    let mut full = encode::transaction(t, encoding);
                                    full.as_object_mut().map(|o| { o.remove("slot"); o.remove("blockTime"); });
                                    full
                                })
                                .collect();
                        }
                    }
                    Some(value)
                })
                .await
                .ok_or_else(|| block_not_available(slot))
        }
        _ => Err(RpcError::method_not_found(method)),
    }
}

fn with_context(slot: u64, value: Value) -> Value {
    json!({ "context": { "slot": slot, "apiVersion": SOLANA_CORE }, "value": value })
}

fn block_not_available(slot: u64) -> RpcError {
    RpcError { code: -32004, message: format!("Block not available for slot {slot}"), data: None }
}

fn submit_error(error: SubmitError) -> RpcError {
    match error {
        SubmitError::SignatureVerification => {
            RpcError { code: -32003, message: "Transaction signature verification failure".into(), data: None }
        }
        SubmitError::Rejected(err) => RpcError {
            code: -32002,
            message: format!("Transaction rejected: {err}"),
            data: Some(json!({ "err": encode::error(&Some(err)), "logs": [], "accounts": null, "unitsConsumed": 0, "returnData": null })),
        },
        SubmitError::Simulation { err, logs, units } => RpcError {
            code: -32002,
            message: format!("Transaction simulation failed: {err}"),
            data: Some(json!({ "err": encode::error(&Some(err)), "logs": logs, "accounts": null, "unitsConsumed": units, "returnData": null })),
        },
    }
}

fn account_encoding(encoding: Option<&Value>) -> Result<AccountEncoding, RpcError> {
    match encoding.and_then(Value::as_str) {
        None | Some("base64") => Ok(AccountEncoding::Base64),
        Some("jsonParsed") => Ok(AccountEncoding::JsonParsed),
        Some(other) => Err(RpcError::invalid_params(format!("unsupported account encoding {other}: use base64 or jsonParsed"))),
    }
}

/// `getTokenAccountsByOwner`'s required filter: one mint, or one token program.
enum TokenAccountFilter {
    Mint(Pubkey),
    Program(Pubkey),
}

impl TokenAccountFilter {
    fn matches(&self, account: &solana_account::Account) -> bool {
        match self {
            TokenAccountFilter::Mint(mint) => account.data.get(0..32) == Some(mint.as_ref()),
            TokenAccountFilter::Program(program) => account.owner == *program,
        }
    }
}

fn token_account_filter(value: &Value) -> Result<TokenAccountFilter, RpcError> {
    let key = |text: &Value| {
        text.as_str()
            .and_then(|t| t.parse::<Pubkey>().ok())
            .ok_or_else(|| RpcError::invalid_params("Invalid param: not a base58 public key"))
    };
    match (value.get("mint"), value.get("programId")) {
        (Some(mint), None) => Ok(TokenAccountFilter::Mint(key(mint)?)),
        (None, Some(program)) => {
            let program = key(program)?;
            if program != spl_token_interface::ID && program != parse::SPL_TOKEN_2022 {
                return Err(RpcError::invalid_params("Invalid param: unrecognized Token program id"));
            }
            Ok(TokenAccountFilter::Program(program))
        }
        _ => Err(RpcError::invalid_params("Invalid param: expected one of mint or programId")),
    }
}

/// An account as `getAccountInfo` shows it, null when it does not exist.
fn encoded_account(chain: &Chain, address: &Pubkey, encoding: AccountEncoding) -> Value {
    chain.ledger.svm.get_account(address).map_or(Value::Null, |account| {
        encode::account_as(&account, encoding, |mint| {
            chain.ledger.svm.get_account(mint).and_then(|m| parse::mint_decimals(&m.data))
        })
    })
}

/// `simulateTransaction`'s options, checked as a validator checks them.
struct SimulateOptions {
    sig_verify: bool,
    replace_recent_blockhash: bool,
    inner_instructions: bool,
    /// Accounts to return as they are after the simulation.
    accounts: Option<(Vec<Pubkey>, AccountEncoding)>,
}

impl SimulateOptions {
    fn from_config(config: &serde_json::Map<String, Value>, tx: &VersionedTransaction) -> Result<Self, RpcError> {
        let flag = |name: &str| {
            config.get(name).filter(|v| !v.is_null()).map_or(Ok(false), |v| {
                v.as_bool().ok_or_else(|| RpcError::invalid_params(format!("{name} must be a boolean")))
            })
        };
        let sig_verify = flag("sigVerify")?;
        let replace_recent_blockhash = flag("replaceRecentBlockhash")?;
        if sig_verify && replace_recent_blockhash {
            return Err(RpcError::invalid_params("sigVerify may not be used with replaceRecentBlockhash"));
        }
        let accounts = match config.get("accounts").filter(|v| !v.is_null()) {
            None => None,
            Some(accounts) => {
                let encoding = account_encoding(accounts.get("encoding"))?;
                let addresses = Params(vec![accounts.get("addresses").cloned().unwrap_or(Value::Null)]).pubkeys(0)?;
                let limit = tx.message.static_account_keys().len()
                    + tx.message.address_table_lookups().map_or(0, |lookups| {
                        lookups.iter().map(|l| l.writable_indexes.len() + l.readonly_indexes.len()).sum()
                    });
                if addresses.len() > limit {
                    return Err(RpcError::invalid_params(format!("Too many accounts provided; max {limit}")));
                }
                Some((addresses, encoding))
            }
        };
        Ok(SimulateOptions { sig_verify, replace_recent_blockhash, inner_instructions: flag("innerInstructions")?, accounts })
    }
}

/// Runs a simulation on the chain thread and answers with a validator's result fields.
fn simulate(chain: &Chain, mut tx: VersionedTransaction, options: SimulateOptions) -> Value {
    let mut replacement = Value::Null;
    if options.replace_recent_blockhash {
        let (hash, last_valid) = chain.latest_blockhash();
        tx.message.set_recent_blockhash(hash);
        replacement = json!({ "blockhash": hash.to_string(), "lastValidBlockHeight": last_valid });
    }
    let loaded = ledger_runtime::history::loaded_keys(&chain.ledger.svm, &tx.message).unwrap_or_default();
    let keys: Vec<Pubkey> =
        tx.message.static_account_keys().iter().chain(&loaded.writable).chain(&loaded.readonly).copied().collect();
    let (pre_balances, pre_tokens) = ledger_runtime::history::balances(&chain.ledger.svm, &keys);
    let (err, meta, post_accounts) = match chain.simulate(&tx, options.sig_verify) {
        Ok(info) => (None, info.meta, Some(info.post_accounts)),
        Err(failed) => (Some(failed.err), failed.meta, None),
    };
    // Refused before running (signature, blockhash, duplicate): nothing executed to report.
    let executed = post_accounts.is_some() || matches!(err, Some(TransactionError::InstructionError(..)));
    let mut value = json!({
        "err": encode::error(&err),
        "logs": meta.logs,
        "accounts": null,
        "unitsConsumed": meta.compute_units_consumed,
        "returnData": encode::return_data(&meta.return_data.program_id, &meta.return_data.data),
        "innerInstructions": null,
        "replacementBlockhash": replacement,
        "fee": if executed { json!(meta.fee) } else { Value::Null },
        "preBalances": null,
        "postBalances": null,
        "preTokenBalances": null,
        "postTokenBalances": null,
        "loadedAddresses": encode::loaded_addresses(&loaded),
    });
    if options.inner_instructions && executed {
        value["innerInstructions"] = encode::inner_instructions(&meta.inner_instructions, &keys, true);
    }
    if let Some((addresses, encoding)) = &options.accounts {
        value["accounts"] = match &post_accounts {
            // A failed simulation has no post-state: one null per requested account.
            None => json!(vec![Value::Null; addresses.len()]),
            Some(post) => {
                let after = |address: &Pubkey| post.iter().find(|(key, _)| key == address).map(|(_, a)| solana_account::Account::from(a.clone()));
                let decimals_of = |mint: &Pubkey| {
                    after(mint).or_else(|| chain.ledger.svm.get_account(mint)).and_then(|m| parse::mint_decimals(&m.data))
                };
                json!(addresses
                    .iter()
                    .map(|address| after(address).map_or(Value::Null, |a| encode::account_as(&a, *encoding, decimals_of)))
                    .collect::<Vec<_>>())
            }
        };
    }
    if let Some(post) = &post_accounts {
        let (post_balances, post_tokens) = ledger_runtime::history::balances_in(&keys, |key| {
            post.iter()
                .find(|(address, _)| address == key)
                .map(|(_, account)| solana_account::Account::from(account.clone()))
                .or_else(|| chain.ledger.svm.get_account(key))
        });
        value["preBalances"] = json!(pre_balances);
        value["postBalances"] = json!(post_balances);
        value["preTokenBalances"] = encode::token_balances(&pre_tokens);
        value["postTokenBalances"] = encode::token_balances(&post_tokens);
    }
    with_context(chain.slot(), value)
}

fn optional_signature(value: Option<&Value>) -> Result<Option<Signature>, RpcError> {
    value
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_str()
                .and_then(|s| Signature::from_str(s).ok())
                .ok_or_else(|| RpcError::invalid_params("Invalid param: not a signature"))
        })
        .transpose()
}

/// Positional parameters with typed accessors that fail with `-32602`.
struct Params(Vec<Value>);

impl Params {
    fn new(params: Value) -> Result<Self, RpcError> {
        match params {
            Value::Null => Ok(Params(Vec::new())),
            Value::Array(values) => Ok(Params(values)),
            _ => Err(RpcError::invalid_params("params must be an array")),
        }
    }

    fn get(&self, index: usize) -> Result<&Value, RpcError> {
        self.0.get(index).ok_or_else(|| RpcError::invalid_params(format!("missing parameter {index}")))
    }

    fn str(&self, index: usize) -> Result<&str, RpcError> {
        self.get(index)?.as_str().ok_or_else(|| RpcError::invalid_params(format!("parameter {index} must be a string")))
    }

    fn u64(&self, index: usize) -> Result<u64, RpcError> {
        self.get(index)?.as_u64().ok_or_else(|| RpcError::invalid_params(format!("parameter {index} must be a non-negative integer")))
    }

    fn optional_u64(&self, index: usize) -> Result<Option<u64>, RpcError> {
        match self.0.get(index) {
            None | Some(Value::Null) | Some(Value::Object(_)) => Ok(None),
            Some(_) => self.u64(index).map(Some),
        }
    }

    fn object(&self, index: usize) -> serde_json::Map<String, Value> {
        self.0.get(index).and_then(Value::as_object).cloned().unwrap_or_default()
    }

    fn commitment(&self, index: usize) -> Option<&str> {
        self.0.get(index)?.get("commitment")?.as_str()
    }

    fn pubkey(&self, index: usize) -> Result<Pubkey, RpcError> {
        Pubkey::from_str(self.str(index)?).map_err(|_| RpcError::invalid_params("Invalid param: Invalid"))
    }

    fn pubkeys(&self, index: usize) -> Result<Vec<Pubkey>, RpcError> {
        self.list(index, "Invalid param: Invalid")
    }

    /// An array parameter whose every entry parses from a string.
    fn list<T: FromStr>(&self, index: usize, invalid: &str) -> Result<Vec<T>, RpcError> {
        let list = self.get(index)?.as_array().ok_or_else(|| RpcError::invalid_params(format!("parameter {index} must be an array")))?;
        list.iter()
            .map(|v| v.as_str().and_then(|s| T::from_str(s).ok()).ok_or_else(|| RpcError::invalid_params(invalid)))
            .collect()
    }

    fn hash(&self, index: usize) -> Result<Hash, RpcError> {
        Hash::from_str(self.str(index)?).map_err(|_| RpcError::invalid_params("Invalid param: not a blockhash"))
    }

    fn signature(&self, index: usize) -> Result<Signature, RpcError> {
        Signature::from_str(self.str(index)?).map_err(|_| RpcError::invalid_params("Invalid param: not a signature"))
    }

    fn signatures(&self, index: usize) -> Result<Vec<Signature>, RpcError> {
        self.list(index, "Invalid param: not a signature")
    }

    fn account_encoding(&self, index: usize) -> Result<AccountEncoding, RpcError> {
        account_encoding(self.0.get(index).and_then(|c| c.get("encoding")))
    }

    fn tx_encoding(&self, index: usize) -> Result<TxEncoding, RpcError> {
        match self.0.get(index).and_then(|c| c.get("encoding")).and_then(Value::as_str) {
            None | Some("json") => Ok(TxEncoding::Json),
            Some("jsonParsed") => Ok(TxEncoding::JsonParsed),
            Some("base64") => Ok(TxEncoding::Base64),
            Some(other) => {
                Err(RpcError::invalid_params(format!("unsupported transaction encoding {other}: use json, jsonParsed or base64")))
            }
        }
    }

    fn encoded_bytes(&self, index: usize, encoding: &str) -> Result<Vec<u8>, RpcError> {
        let text = self.str(index)?;
        let bytes = match encoding {
            "base64" => BASE64.decode(text).map_err(|e| RpcError::invalid_params(format!("invalid base64: {e}")))?,
            "base58" => bs58::decode(text).into_vec().map_err(|e| RpcError::invalid_params(format!("invalid base58: {e}")))?,
            other => return Err(RpcError::invalid_params(format!("unsupported encoding {other}"))),
        };
        if bytes.len() > MAX_TRANSACTION_BYTES {
            return Err(RpcError::invalid_params(format!("{} bytes is above the {MAX_TRANSACTION_BYTES}-byte limit", bytes.len())));
        }
        Ok(bytes)
    }

    fn transaction(&self, index: usize, encoding: &str) -> Result<VersionedTransaction, RpcError> {
        let bytes = self.encoded_bytes(index, encoding)?;
        let tx: VersionedTransaction =
            bincode::deserialize(&bytes).map_err(|e| RpcError::invalid_params(format!("failed to deserialize transaction: {e}")))?;
        if tx.signatures.is_empty() || tx.sanitize().is_err() {
            return Err(RpcError::invalid_params("transaction is not sanitary"));
        }
        Ok(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger_runtime::Ledger;
    use solana_hash::Hash;
    use solana_instruction::Instruction;
    use solana_keypair::Keypair;
    use solana_message::{v0, VersionedMessage};
    use solana_signer::Signer;
    use tokio::sync::broadcast;

    const COMPUTE_BUDGET: Pubkey = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
    const MEMO: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
    const PRICE: u64 = 12_345;

    /// A running chain with an agent holding tokens, a payee's token account and a sponsor that
    /// holds only SOL and pays fees for the agent, as an x402 facilitator does.
    struct Local {
        chain: ChainHandle,
        mint: Pubkey,
        agent: Keypair,
        agent_token: Pubkey,
        payee_token: Pubkey,
        sponsor: Keypair,
    }

    fn local() -> Local {
        let (ready, setup) = std::sync::mpsc::channel();
        let chain = ChainHandle::spawn(move || {
            let (events, _) = broadcast::channel(1_024);
            let mut ledger = Ledger::new();
            let setup = ledger.bootstrap(0).expect("bootstrap");
            let (agent, payee, sponsor) = (Keypair::new(), Keypair::new(), Keypair::new());
            ledger.airdrop(&sponsor.pubkey(), 1_000_000_000).expect("fund the sponsor");
            let agent_token = ledger.create_token_account(&setup.authority, &agent.pubkey(), &setup.mint).expect("agent account");
            let payee_token = ledger.create_token_account(&setup.authority, &payee.pubkey(), &setup.mint).expect("payee account");
            ledger.mint_to(&setup.mint_authority, &setup.mint, &agent_token, 1_000_000).expect("fund the agent");
            ready.send((setup.mint, agent, agent_token, payee_token, sponsor)).expect("report");
            Chain::new(ledger, events)
        });
        let (mint, agent, agent_token, payee_token, sponsor) = setup.recv().expect("chain ready");
        Local { chain, mint, agent, agent_token, payee_token, sponsor }
    }

    impl Local {
        async fn call(&self, method: &str, params: Value) -> RpcResult {
            call(&self.chain, method, params).await
        }

        async fn blockhash(&self) -> Hash {
            self.chain.call(|c| c.latest_blockhash().0).await
        }

        /// The x402 `exact` layout: compute limit, compute price, TransferChecked, memo; the
        /// sponsor pays fees and has not signed yet.
        fn payment(&self, blockhash: Hash) -> VersionedTransaction {
            let mut limit = vec![2];
            limit.extend_from_slice(&20_000u32.to_le_bytes());
            let mut price = vec![3];
            price.extend_from_slice(&1u64.to_le_bytes());
            let transfer = spl_token_interface::instruction::transfer_checked(
                &spl_token_interface::ID,
                &self.agent_token,
                &self.mint,
                &self.payee_token,
                &self.agent.pubkey(),
                &[],
                PRICE,
                6,
            )
            .unwrap();
            let instructions = [
                Instruction::new_with_bytes(COMPUTE_BUDGET, &limit, vec![]),
                Instruction::new_with_bytes(COMPUTE_BUDGET, &price, vec![]),
                transfer,
                Instruction::new_with_bytes(MEMO, b"0123456789abcdef0123456789abcdef", vec![]),
            ];
            let message = VersionedMessage::V0(v0::Message::try_compile(&self.sponsor.pubkey(), &instructions, &[], blockhash).unwrap());
            let agent_signature = self.agent.sign_message(&message.serialize());
            VersionedTransaction { signatures: vec![Signature::default(), agent_signature], message }
        }

        fn co_sign(&self, mut tx: VersionedTransaction) -> VersionedTransaction {
            tx.signatures[0] = self.sponsor.sign_message(&tx.message.serialize());
            tx
        }
    }

    fn wire(tx: &VersionedTransaction) -> Value {
        json!(BASE64.encode(bincode::serialize(tx).unwrap()))
    }

    fn token_amounts(balances: &Value) -> Vec<(u64, String)> {
        balances
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["accountIndex"].as_u64().unwrap(), b["uiTokenAmount"]["amount"].as_str().unwrap().to_string()))
            .collect()
    }

    #[tokio::test]
    async fn a_partially_signed_transaction_simulates_without_signature_checks_by_default() {
        let local = local();
        let tx = local.payment(local.blockhash().await);
        let result = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "commitment": "confirmed" }])).await.unwrap();
        let value = &result["value"];
        assert_eq!(value["err"], Value::Null, "logs: {}", value["logs"]);
        assert!(value["unitsConsumed"].as_u64().unwrap() > 0);
        assert_eq!(value["fee"], json!(2 * LAMPORTS_PER_SIGNATURE + 1), "two signatures and a 1-lamport priority fee");
        assert_eq!(value["replacementBlockhash"], Value::Null);
        assert_eq!(value["innerInstructions"], Value::Null, "only given when asked for");
        let agent_index = tx.message.static_account_keys().iter().position(|k| *k == local.agent_token).unwrap() as u64;
        assert!(token_amounts(&value["preTokenBalances"]).contains(&(agent_index, "1000000".into())));
        assert!(token_amounts(&value["postTokenBalances"]).contains(&(agent_index, (1_000_000 - PRICE).to_string())));
        let balance = local.call("getTokenAccountBalance", json!([local.agent_token.to_string()])).await.unwrap();
        assert_eq!(balance["value"]["amount"], "1000000", "a simulation changes nothing");
    }

    #[tokio::test]
    async fn asking_for_signature_verification_fails_the_simulation_of_a_partially_signed_transaction() {
        let local = local();
        let tx = local.payment(local.blockhash().await);
        let result = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "sigVerify": true }])).await.unwrap();
        assert_eq!(result["value"]["err"], json!("SignatureFailure"));
        assert_eq!(result["value"]["logs"], json!([]));
        let signed = local.co_sign(tx);
        let result = local.call("simulateTransaction", json!([wire(&signed), { "encoding": "base64", "sigVerify": true }])).await.unwrap();
        assert_eq!(result["value"]["err"], Value::Null);
    }

    #[tokio::test]
    async fn signature_verification_with_blockhash_replacement_is_an_invalid_request() {
        let local = local();
        let tx = local.payment(local.blockhash().await);
        let error = local
            .call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "sigVerify": true, "replaceRecentBlockhash": true }]))
            .await
            .unwrap_err();
        assert_eq!(error.code, -32602);
        assert_eq!(error.message, "sigVerify may not be used with replaceRecentBlockhash");
    }

    #[tokio::test]
    async fn an_unknown_blockhash_fails_simulation_unless_replaced_and_the_replacement_is_reported() {
        let local = local();
        let tx = local.payment(Hash::new_from_array([7; 32]));
        let result = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64" }])).await.unwrap();
        assert_eq!(result["value"]["err"], json!("BlockhashNotFound"));
        assert_eq!(result["value"]["fee"], Value::Null, "refused before it ran");

        let replaced = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "replaceRecentBlockhash": true }])).await.unwrap();
        assert_eq!(replaced["value"]["err"], Value::Null);
        let latest = local.call("getLatestBlockhash", json!([])).await.unwrap();
        assert_eq!(replaced["value"]["replacementBlockhash"], latest["value"]);
    }

    #[tokio::test]
    async fn inner_instructions_come_back_parsed_when_asked_for() {
        let local = local();
        let wallet = Pubkey::new_unique();
        let create = spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent(
            &local.sponsor.pubkey(),
            &wallet,
            &local.mint,
            &spl_token_interface::ID,
        );
        let blockhash = local.blockhash().await;
        let message = VersionedMessage::V0(v0::Message::try_compile(&local.sponsor.pubkey(), &[create], &[], blockhash).unwrap());
        let tx = VersionedTransaction::try_new(message, &[&local.sponsor]).unwrap();
        let result = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "innerInstructions": true }])).await.unwrap();
        let inner = &result["value"]["innerInstructions"];
        assert_eq!(inner[0]["index"], 0);
        let kinds: Vec<(&str, &str)> = inner[0]["instructions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ix| (ix["program"].as_str().unwrap_or("?"), ix["parsed"]["type"].as_str().unwrap_or("?")))
            .collect();
        assert_eq!(
            kinds,
            [("spl-token", "getAccountDataSize"), ("system", "createAccount"), ("spl-token", "initializeImmutableOwner"), ("spl-token", "initializeAccount3")]
        );
        assert_eq!(inner[0]["instructions"][0]["parsed"]["info"]["extensionTypes"], json!(["immutableOwner"]));
        assert!(inner[0]["instructions"].as_array().unwrap().iter().all(|ix| ix["stackHeight"] == 2));
    }

    #[tokio::test]
    async fn simulation_returns_requested_accounts_as_they_are_afterwards() {
        let local = local();
        let tx = local.payment(local.blockhash().await);
        let accounts = json!({ "addresses": [local.payee_token.to_string()], "encoding": "jsonParsed" });
        let result = local.call("simulateTransaction", json!([wire(&tx), { "encoding": "base64", "accounts": accounts }])).await.unwrap();
        let payee = &result["value"]["accounts"][0];
        assert_eq!(payee["data"]["parsed"]["info"]["tokenAmount"]["amount"], PRICE.to_string());
    }

    #[tokio::test]
    async fn send_transaction_preflight_refuses_a_missing_signature_as_a_validator_does() {
        let local = local();
        let tx = local.payment(local.blockhash().await);
        let error = local.call("sendTransaction", json!([wire(&tx), { "encoding": "base64" }])).await.unwrap_err();
        assert_eq!((error.code, error.message.as_str()), (-32003, "Transaction signature verification failure"));
        let error = local.call("sendTransaction", json!([wire(&tx), { "encoding": "base64", "skipPreflight": true }])).await.unwrap_err();
        assert_eq!(error.code, -32002, "never included");
        assert_eq!(error.data.unwrap()["err"], json!("SignatureFailure"));
    }

    #[tokio::test]
    async fn a_settled_payment_reads_back_as_json_parsed() {
        let local = local();
        let tx = local.co_sign(local.payment(local.blockhash().await));
        let signature = local.call("sendTransaction", json!([wire(&tx), { "encoding": "base64", "skipPreflight": true }])).await.unwrap();
        let config = json!({ "commitment": "confirmed", "encoding": "jsonParsed", "maxSupportedTransactionVersion": 0 });
        let result = local.call("getTransaction", json!([signature, config])).await.unwrap();
        assert_eq!(result["version"], 0);
        let message = &result["transaction"]["message"];
        let key = |pubkey: &Pubkey| message["accountKeys"].as_array().unwrap().iter().find(|k| k["pubkey"] == pubkey.to_string()).unwrap().clone();
        assert_eq!(key(&local.sponsor.pubkey()), json!({ "pubkey": local.sponsor.pubkey().to_string(), "signer": true, "writable": true, "source": "transaction" }));
        assert_eq!((key(&local.agent.pubkey())["signer"].clone(), key(&local.agent.pubkey())["writable"].clone()), (json!(true), json!(false)));
        assert_eq!(key(&local.mint)["writable"], false);
        let instructions = message["instructions"].as_array().unwrap();
        assert_eq!(instructions[0]["programId"], COMPUTE_BUDGET.to_string());
        assert!(instructions[0].get("parsed").is_none());
        assert_eq!(instructions[2]["parsed"]["type"], "transferChecked");
        assert_eq!(instructions[2]["parsed"]["info"]["tokenAmount"]["amount"], PRICE.to_string());
        assert_eq!(instructions[3], json!({ "program": "spl-memo", "programId": MEMO.to_string(), "parsed": "0123456789abcdef0123456789abcdef", "stackHeight": null }));
        let meta = &result["meta"];
        assert_eq!(meta["err"], Value::Null);
        assert_eq!(meta["innerInstructions"], json!([]));
        assert!(meta.get("loadedAddresses").is_none(), "jsonParsed lists looked-up keys among the account keys");
        let post = token_amounts(&meta["postTokenBalances"]);
        let payee_index = tx.message.static_account_keys().iter().position(|k| *k == local.payee_token).unwrap() as u64;
        assert!(post.contains(&(payee_index, PRICE.to_string())));
    }

    #[tokio::test]
    async fn token_accounts_read_as_json_parsed_and_other_accounts_fall_back_to_base64() {
        let local = local();
        let token = local.call("getAccountInfo", json!([local.agent_token.to_string(), { "encoding": "jsonParsed" }])).await.unwrap();
        assert_eq!(token["value"]["data"]["program"], "spl-token");
        assert_eq!(token["value"]["data"]["parsed"]["info"]["owner"], local.agent.pubkey().to_string());
        assert_eq!(token["value"]["data"]["parsed"]["info"]["tokenAmount"]["amount"], "1000000");
        let mint = local.call("getMultipleAccounts", json!([[local.mint.to_string()], { "encoding": "jsonParsed" }])).await.unwrap();
        assert_eq!(mint["value"][0]["data"]["parsed"]["info"]["decimals"], 6);
        let wallet = local.call("getAccountInfo", json!([local.sponsor.pubkey().to_string(), { "encoding": "jsonParsed" }])).await.unwrap();
        assert_eq!(wallet["value"]["data"], json!(["", "base64"]));
    }

    #[tokio::test]
    async fn token_accounts_by_owner_lists_every_account_of_the_owner_by_mint_or_program() {
        let local = local();
        let owner = local.agent.pubkey().to_string();
        let by_mint = local.call("getTokenAccountsByOwner", json!([owner, { "mint": local.mint.to_string() }, { "encoding": "jsonParsed" }])).await.unwrap();
        let listed = by_mint["value"].as_array().unwrap();
        assert_eq!(listed.len(), 1, "the payee's account in the same mint is not the agent's");
        assert_eq!(listed[0]["pubkey"], local.agent_token.to_string());
        assert_eq!(listed[0]["account"]["data"]["parsed"]["info"]["tokenAmount"]["amount"], "1000000");
        let by_program = local.call("getTokenAccountsByOwner", json!([owner, { "programId": spl_token_interface::ID.to_string() }])).await.unwrap();
        assert_eq!(by_program["value"][0]["pubkey"], local.agent_token.to_string());
        let other_mint = local.call("getTokenAccountsByOwner", json!([owner, { "mint": Pubkey::new_unique().to_string() }])).await.unwrap();
        assert_eq!(other_mint["value"], json!([]));
        let unfiltered = local.call("getTokenAccountsByOwner", json!([owner, {}])).await.unwrap_err();
        assert_eq!(unfiltered.code, -32602);
    }

    #[tokio::test]
    async fn the_finalized_blockhash_is_the_one_32_slots_back() {
        let local = local();
        local
            .chain
            .call(|c| {
                for _ in 0..40 {
                    c.tick();
                }
            })
            .await;
        let latest = local.call("getLatestBlockhash", json!([{ "commitment": "confirmed" }])).await.unwrap();
        let finalized = local.call("getLatestBlockhash", json!([{ "commitment": "finalized" }])).await.unwrap();
        assert_eq!(latest["context"]["slot"].as_u64().unwrap() - finalized["context"]["slot"].as_u64().unwrap(), 32);
        assert_eq!(
            latest["value"]["lastValidBlockHeight"].as_u64().unwrap() - finalized["value"]["lastValidBlockHeight"].as_u64().unwrap(),
            32
        );
        let valid = local.call("isBlockhashValid", json!([finalized["value"]["blockhash"]])).await.unwrap();
        assert_eq!(valid["value"], true);
    }
}
