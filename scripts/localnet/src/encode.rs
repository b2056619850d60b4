//! Solana JSON-RPC encodings of accounts, transactions, statuses and errors (the `json` and
//! `base64` encodings web3.js, Anchor and our indexer read).

use base64::{engine::general_purpose::STANDARD as BASE64, Engine};
use ledger_runtime::history::{ExecutedTx, TokenBalance};
use serde_json::{json, Value};
use solana_account::Account;
use solana_message::VersionedMessage;
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

pub fn account(account: &Account) -> Value {
    json!({
        "lamports": account.lamports,
        "owner": account.owner.to_string(),
        "data": [BASE64.encode(&account.data), "base64"],
        "executable": account.executable,
        "rentEpoch": account.rent_epoch,
        "space": account.data.len(),
    })
}

pub fn error(err: &Option<TransactionError>) -> Value {
    match err {
        None => Value::Null,
        Some(err) => serde_json::to_value(err).unwrap_or_else(|_| json!(format!("{err:?}"))),
    }
}

pub fn status(err: &Option<TransactionError>) -> Value {
    match err {
        None => json!({ "Ok": null }),
        Some(_) => json!({ "Err": error(err) }),
    }
}

pub fn token_amount(amount: u64, decimals: u8) -> Value {
    let text = decimal_string(amount, decimals);
    json!({
        "amount": amount.to_string(),
        "decimals": decimals,
        // uiAmount is a float by the RPC's definition; uiAmountString is exact.
        "uiAmount": text.parse::<f64>().ok(),
        "uiAmountString": text,
    })
}

/// `1234500` with 6 decimals is `"1.2345"`: exact, no float on the way.
pub fn decimal_string(amount: u64, decimals: u8) -> String {
    let scale = 10u64.pow(decimals as u32);
    let (whole, fraction) = (amount / scale, amount % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0width$}", width = decimals as usize);
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

fn token_balances(balances: &[TokenBalance]) -> Value {
    balances
        .iter()
        .map(|b| {
            json!({
                "accountIndex": b.account_index,
                "mint": b.mint.to_string(),
                "owner": b.owner.to_string(),
                "programId": b.program_id.to_string(),
                "uiTokenAmount": token_amount(b.amount, b.decimals),
            })
        })
        .collect()
}

pub fn message(message: &VersionedMessage) -> Value {
    let header = message.header();
    let instructions: Vec<Value> = message
        .instructions()
        .iter()
        .map(|ix| {
            json!({
                "programIdIndex": ix.program_id_index,
                "accounts": ix.accounts,
                "data": bs58::encode(&ix.data).into_string(),
                "stackHeight": null,
            })
        })
        .collect();
    let mut value = json!({
        "header": {
            "numRequiredSignatures": header.num_required_signatures,
            "numReadonlySignedAccounts": header.num_readonly_signed_accounts,
            "numReadonlyUnsignedAccounts": header.num_readonly_unsigned_accounts,
        },
        "accountKeys": message.static_account_keys().iter().map(|k| k.to_string()).collect::<Vec<_>>(),
        "recentBlockhash": message.recent_blockhash().to_string(),
        "instructions": instructions,
    });
    if let Some(lookups) = message.address_table_lookups() {
        value["addressTableLookups"] = lookups
            .iter()
            .map(|l| {
                json!({
                    "accountKey": l.account_key.to_string(),
                    "writableIndexes": l.writable_indexes,
                    "readonlyIndexes": l.readonly_indexes,
                })
            })
            .collect();
    }
    value
}

pub fn version(tx: &VersionedTransaction) -> Value {
    match tx.message {
        VersionedMessage::Legacy(_) => json!("legacy"),
        VersionedMessage::V0(_) => json!(0),
        _ => json!(1),
    }
}

pub fn meta(executed: &ExecutedTx) -> Value {
    let err = executed.status.clone().err();
    let inner: Vec<Value> = executed
        .meta
        .inner_instructions
        .iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .map(|(index, list)| {
            json!({
                "index": index,
                "instructions": list.iter().map(|inner| json!({
                    "programIdIndex": inner.instruction.program_id_index,
                    "accounts": inner.instruction.accounts,
                    "data": bs58::encode(&inner.instruction.data).into_string(),
                    "stackHeight": inner.stack_height,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let return_data = &executed.meta.return_data;
    json!({
        "err": error(&err),
        "status": status(&err),
        "fee": executed.meta.fee,
        "preBalances": executed.pre_balances,
        "postBalances": executed.post_balances,
        "innerInstructions": inner,
        "logMessages": executed.meta.logs,
        "preTokenBalances": token_balances(&executed.pre_token_balances),
        "postTokenBalances": token_balances(&executed.post_token_balances),
        "rewards": [],
        "loadedAddresses": { "writable": [], "readonly": [] },
        "computeUnitsConsumed": executed.meta.compute_units_consumed,
        "returnData": if return_data.data.is_empty() { Value::Null } else {
            json!({ "programId": return_data.program_id.to_string(), "data": [BASE64.encode(&return_data.data), "base64"] })
        },
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TxEncoding {
    Json,
    Base64,
}

pub fn transaction(executed: &ExecutedTx, encoding: TxEncoding) -> Value {
    let tx = &executed.transaction;
    let body = match encoding {
        TxEncoding::Json => json!({
            "signatures": tx.signatures.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "message": message(&tx.message),
        }),
        TxEncoding::Base64 => json!([BASE64.encode(bincode::serialize(tx).unwrap_or_default()), "base64"]),
    };
    json!({
        "slot": executed.slot,
        "blockTime": executed.block_time,
        "transaction": body,
        "meta": meta(executed),
        "version": version(tx),
    })
}

#[cfg(test)]
mod tests {
    use super::decimal_string;

    #[test]
    fn decimal_strings_are_exact() {
        assert_eq!(decimal_string(0, 6), "0");
        assert_eq!(decimal_string(1, 6), "0.000001");
        assert_eq!(decimal_string(1_234_500, 6), "1.2345");
        assert_eq!(decimal_string(u64::MAX, 6), "18446744073709.551615");
        assert_eq!(decimal_string(42, 0), "42");
    }
}
