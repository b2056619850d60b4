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

use crate::{
    chain::{ChainHandle, SubmitError, MAX_SIGNATURES_LIMIT},
    encode::{self, TxEncoding},
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
            let (slot, (hash, last_valid)) = chain.call(|c| (c.slot(), c.latest_blockhash())).await;
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
            params.require_base64_encoding(1)?;
            let (slot, account) = chain.call(move |c| (c.slot(), c.ledger.svm.get_account(&address))).await;
            Ok(with_context(slot, account.as_ref().map_or(Value::Null, encode::account)))
        }
        "getMultipleAccounts" => {
            let addresses = params.pubkeys(0)?;
            if addresses.len() > MAX_MULTIPLE_ACCOUNTS {
                return Err(RpcError::invalid_params(format!("at most {MAX_MULTIPLE_ACCOUNTS} accounts")));
            }
            params.require_base64_encoding(1)?;
            let (slot, accounts) = chain
                .call(move |c| (c.slot(), addresses.iter().map(|a| c.ledger.svm.get_account(a)).collect::<Vec<_>>()))
                .await;
            let values: Vec<Value> = accounts.iter().map(|a| a.as_ref().map_or(Value::Null, encode::account)).collect();
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
            Ok(with_context(slot, encode::token_amount(amount, decimals)))
        }
        "requestAirdrop" => {
            let address = params.pubkey(0)?;
            let lamports = params.u64(1)?;
            if lamports == 0 || lamports > MAX_AIRDROP_LAMPORTS {
                return Err(RpcError::invalid_params(format!("airdrop must be 1..={MAX_AIRDROP_LAMPORTS} lamports")));
            }
            let result = chain
                .call(move |c| {
                    let tx = c.ledger.airdrop_transaction(&address, lamports, c.latest_blockhash().0);
                    c.submit(tx, false)
                })
                .await;
            result.map(|sig| json!(sig.to_string())).map_err(submit_error)
        }
        "sendTransaction" => {
            let config = params.object(1);
            let encoding = config.get("encoding").and_then(Value::as_str).unwrap_or("base58");
            let preflight = !config.get("skipPreflight").and_then(Value::as_bool).unwrap_or(false);
            let tx = params.transaction(0, encoding)?;
            chain
                .call(move |c| c.submit(tx, preflight))
                .await
                .map(|sig| json!(sig.to_string()))
                .map_err(submit_error)
        }
        "simulateTransaction" => {
            let config = params.object(1);
            let encoding = config.get("encoding").and_then(Value::as_str).unwrap_or("base58");
            let tx = params.transaction(0, encoding)?;
            let (slot, outcome) = chain.call(move |c| (c.slot(), c.simulate(&tx))).await;
            let value = match outcome {
                Ok(info) => json!({
                    "err": null, "logs": info.meta.logs, "accounts": null,
                    "unitsConsumed": info.meta.compute_units_consumed, "returnData": null,
                }),
                Err((err, logs, units)) => json!({
                    "err": encode::error(&Some(err)), "logs": logs, "accounts": null,
                    "unitsConsumed": units, "returnData": null,
                }),
            };
            Ok(with_context(slot, value))
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

    fn require_base64_encoding(&self, index: usize) -> Result<(), RpcError> {
        match self.0.get(index).and_then(|c| c.get("encoding")).and_then(Value::as_str) {
            None | Some("base64") => Ok(()),
            Some(other) => Err(RpcError::invalid_params(format!("unsupported account encoding {other}: use base64"))),
        }
    }

    fn tx_encoding(&self, index: usize) -> Result<TxEncoding, RpcError> {
        match self.0.get(index).and_then(|c| c.get("encoding")).and_then(Value::as_str) {
            None | Some("json") => Ok(TxEncoding::Json),
            Some("base64") => Ok(TxEncoding::Base64),
            Some(other) => Err(RpcError::invalid_params(format!("unsupported transaction encoding {other}: use json or base64"))),
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
