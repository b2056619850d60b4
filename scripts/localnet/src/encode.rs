//! Solana JSON-RPC encodings of accounts, transactions, statuses and errors: the `json` and
//! `base64` encodings web3.js, Anchor and our indexer read, and `jsonParsed` (through `parse`)
//! the official x402 and MPP SDKs read.

use anchor_lang::solana_program::pubkey::Pubkey;
use base64::{engine::general_purpose::STANDARD as BASE64, Engine};
use ledger_runtime::history::{ExecutedTx, LoadedKeys, TokenBalance};
use serde_json::{json, Value};
use solana_account::Account;
use solana_message::{inner_instruction::InnerInstructionsList, VersionedMessage};
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

use crate::{
    fields::{address_table_lookups, token_amount},
    parse,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AccountEncoding {
    Base64,
    /// SPL Token accounts and mints parsed, anything else in base64, as a validator answers.
    JsonParsed,
}

pub fn account(account: &Account) -> Value {
    account_as(account, AccountEncoding::Base64, |_| None)
}

/// An account in `encoding`; `decimals_of` finds a mint's decimals for a parsed token account.
pub fn account_as(account: &Account, encoding: AccountEncoding, decimals_of: impl Fn(&Pubkey) -> Option<u8>) -> Value {
    let parsed = match encoding {
        AccountEncoding::JsonParsed => parse::account_data(&account.owner, &account.data, decimals_of),
        AccountEncoding::Base64 => None,
    };
    json!({
        "lamports": account.lamports,
        "owner": account.owner.to_string(),
        "data": parsed.unwrap_or_else(|| json!([BASE64.encode(&account.data), "base64"])),
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

pub fn token_balances(balances: &[TokenBalance]) -> Value {
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
    if let Some(lookups) = address_table_lookups(message) {
        value["addressTableLookups"] = lookups;
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

/// Inner instructions by the index of the instruction that made them, empty lists left out;
/// parsed for `jsonParsed`, compiled (`programIdIndex`, account indexes) otherwise.
pub fn inner_instructions(list: &InnerInstructionsList, keys: &[Pubkey], parsed: bool) -> Value {
    list.iter()
        .enumerate()
        .filter(|(_, inner)| !inner.is_empty())
        .map(|(index, inner)| {
            let instructions: Vec<Value> = inner
                .iter()
                .map(|ix| {
                    let stack_height = Some(u32::from(ix.stack_height));
                    if parsed {
                        parse::instruction(&ix.instruction, keys, stack_height)
                    } else {
                        json!({
                            "programIdIndex": ix.instruction.program_id_index,
                            "accounts": ix.instruction.accounts,
                            "data": bs58::encode(&ix.instruction.data).into_string(),
                            "stackHeight": stack_height,
                        })
                    }
                })
                .collect();
            json!({ "index": index, "instructions": instructions })
        })
        .collect()
}

/// What a program returned, or null when nothing was.
pub fn return_data(program_id: &Pubkey, data: &[u8]) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    json!({ "programId": program_id.to_string(), "data": [BASE64.encode(data), "base64"] })
}

pub fn meta(executed: &ExecutedTx, encoding: TxEncoding) -> Value {
    let err = executed.status.clone().err();
    let parsed = encoding == TxEncoding::JsonParsed;
    let mut meta = json!({
        "err": error(&err),
        "status": status(&err),
        "fee": executed.meta.fee,
        "preBalances": executed.pre_balances,
        "postBalances": executed.post_balances,
        "innerInstructions": inner_instructions(&executed.meta.inner_instructions, &executed.account_keys, parsed),
        "logMessages": executed.meta.logs,
        "preTokenBalances": token_balances(&executed.pre_token_balances),
        "postTokenBalances": token_balances(&executed.post_token_balances),
        "rewards": [],
        "computeUnitsConsumed": executed.meta.compute_units_consumed,
        "returnData": return_data(&executed.meta.return_data.program_id, &executed.meta.return_data.data),
    });
    // `jsonParsed` shows looked-up addresses among the account keys instead.
    if !parsed {
        meta["loadedAddresses"] = loaded_addresses(&executed.loaded);
    }
    meta
}

/// `loadedAddresses`: what a v0 message's lookups resolved to, writable then read-only.
pub fn loaded_addresses(loaded: &LoadedKeys) -> Value {
    let text = |keys: &[Pubkey]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    json!({ "writable": text(&loaded.writable), "readonly": text(&loaded.readonly) })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxEncoding {
    Json,
    JsonParsed,
    Base64,
}

pub fn transaction(executed: &ExecutedTx, encoding: TxEncoding) -> Value {
    let tx = &executed.transaction;
    let body = match encoding {
        TxEncoding::Json => json!({
            "signatures": tx.signatures.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "message": message(&tx.message),
        }),
        TxEncoding::JsonParsed => json!({
            "signatures": tx.signatures.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "message": parse::message(&tx.message, &executed.loaded),
        }),
        TxEncoding::Base64 => json!([BASE64.encode(bincode::serialize(tx).unwrap_or_default()), "base64"]),
    };
    json!({
        "slot": executed.slot,
        "blockTime": executed.block_time,
        "transaction": body,
        "meta": meta(executed, encoding),
        "version": version(tx),
    })
}
