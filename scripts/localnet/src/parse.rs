//! The `jsonParsed` encoding a validator serves: instructions of the programs it knows how to
//! read (System, SPL Token and Token-2022, Associated Token Account, Memo) as
//! `{program, programId, parsed, stackHeight}`, every other instruction partially decoded as
//! `{programId, accounts, data, stackHeight}`, account keys with their signer and writable
//! flags, and SPL Token accounts and mints as `{program, parsed, space}`.
//!
//! Names and shapes follow Agave's `solana-transaction-status` and `solana-account-decoder`
//! output, which the official SDKs read (`parsed.type`, `parsed.info.tokenAmount.amount`, ...).
//! Known gaps, served partially decoded or in base64 instead: Token-2022 extension
//! instructions, Token-2022 accounts with extensions, Stake, Vote, BPF loader, address lookup
//! table and Memo v4 instructions. `encode` and `rpc` use this module.

use std::sync::LazyLock;

use agave_reserved_account_keys::ReservedAccountKeys;
use anchor_lang::solana_program::pubkey::Pubkey;
use serde_json::{json, Map, Value};
use solana_message::{compiled_instruction::CompiledInstruction, VersionedMessage};
use solana_system_interface::instruction::SystemInstruction;
use spl_token_interface::instruction::{AuthorityType, TokenInstruction};

use crate::fields::{address_table_lookups, token_amount};
use ledger_runtime::history::LoadedKeys;

const SPL_TOKEN: Pubkey = Pubkey::from_str_const("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
pub const SPL_TOKEN_2022: Pubkey = Pubkey::from_str_const("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb");
const ASSOCIATED_TOKEN: Pubkey = Pubkey::from_str_const("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");
const MEMO_V1: Pubkey = Pubkey::from_str_const("Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo");
const MEMO_V3: Pubkey = Pubkey::from_str_const("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
const SYSTEM: Pubkey = Pubkey::from_str_const("11111111111111111111111111111111");

const TOKEN_ACCOUNT_LEN: usize = 165;
const MINT_LEN: usize = 82;
/// `GetAccountDataSize` extension type the Associated Token Account program asks about.
const EXTENSION_IMMUTABLE_OWNER: u16 = 7;

/// Keys no transaction may write-lock (sysvars, builtins): a validator reports them read-only
/// whatever the message header says.
static RESERVED: LazyLock<ReservedAccountKeys> = LazyLock::new(ReservedAccountKeys::new_all_activated);

/// A message as `jsonParsed`: account keys with their flags (the static ones, then those
/// `loaded` from lookup tables), parsed instructions and, for a versioned message, its lookups.
pub fn message(message: &VersionedMessage, loaded: &LoadedKeys) -> Value {
    let statics = message.static_account_keys();
    let mut account_keys: Vec<Value> = statics
        .iter()
        .enumerate()
        .map(|(index, key)| {
            json!({
                "pubkey": key.to_string(),
                "writable": message.is_maybe_writable_with_reserved_addresses(index, Some(&RESERVED.active)),
                "signer": message.is_signer(index),
                "source": "transaction",
            })
        })
        .collect();
    for (keys, writable) in [(&loaded.writable, true), (&loaded.readonly, false)] {
        for key in keys {
            account_keys.push(json!({
                "pubkey": key.to_string(),
                "writable": writable && !RESERVED.is_reserved(key),
                "signer": false,
                "source": "lookupTable",
            }));
        }
    }
    let keys: Vec<Pubkey> = statics.iter().chain(&loaded.writable).chain(&loaded.readonly).copied().collect();
    let instructions: Vec<Value> = message.instructions().iter().map(|ix| instruction(ix, &keys, None)).collect();
    let mut value = json!({
        "accountKeys": account_keys,
        "recentBlockhash": message.recent_blockhash().to_string(),
        "instructions": instructions,
    });
    if let Some(lookups) = address_table_lookups(message) {
        value["addressTableLookups"] = lookups;
    }
    value
}

/// One instruction, parsed when its program is one a validator reads, partially decoded
/// otherwise (also when its data or accounts do not parse, as a validator falls back).
pub fn instruction(ix: &CompiledInstruction, keys: &[Pubkey], stack_height: Option<u32>) -> Value {
    let Some(program_id) = keys.get(ix.program_id_index as usize) else {
        return partially_decoded(&Pubkey::default(), ix, keys, stack_height);
    };
    match parse(program_id, ix, keys) {
        Some((program, parsed)) => json!({
            "program": program,
            "programId": program_id.to_string(),
            "parsed": parsed,
            "stackHeight": stack_height,
        }),
        None => partially_decoded(program_id, ix, keys, stack_height),
    }
}

fn partially_decoded(program_id: &Pubkey, ix: &CompiledInstruction, keys: &[Pubkey], stack_height: Option<u32>) -> Value {
    json!({
        "programId": program_id.to_string(),
        "accounts": ix.accounts.iter().filter_map(|&i| keys.get(i as usize)).map(|k| k.to_string()).collect::<Vec<_>>(),
        "data": bs58::encode(&ix.data).into_string(),
        "stackHeight": stack_height,
    })
}

fn parse(program_id: &Pubkey, ix: &CompiledInstruction, keys: &[Pubkey]) -> Option<(&'static str, Value)> {
    if *program_id == MEMO_V1 || *program_id == MEMO_V3 {
        return std::str::from_utf8(&ix.data).ok().map(|memo| ("spl-memo", json!(memo)));
    }
    // Every account index must resolve, as the runtime guarantees for an executed instruction.
    if ix.accounts.iter().any(|&i| i as usize >= keys.len()) {
        return None;
    }
    let accounts = Accounts { keys, indexes: &ix.accounts };
    if *program_id == SYSTEM {
        system(&ix.data, &accounts).map(|parsed| ("system", parsed))
    } else if *program_id == SPL_TOKEN || *program_id == SPL_TOKEN_2022 {
        token(&ix.data, &accounts).map(|parsed| ("spl-token", parsed))
    } else if *program_id == ASSOCIATED_TOKEN {
        associated_token(&ix.data, &accounts).map(|parsed| ("spl-associated-token-account", parsed))
    } else {
        None
    }
}

/// An instruction's accounts, resolved to their keys by position.
struct Accounts<'a> {
    keys: &'a [Pubkey],
    indexes: &'a [u8],
}

impl Accounts<'_> {
    /// The key at `position`, as a string; `None` when the instruction has fewer accounts.
    fn at(&self, position: usize) -> Option<String> {
        self.indexes.get(position).and_then(|&i| self.keys.get(i as usize)).map(ToString::to_string)
    }

    fn len(&self) -> usize {
        self.indexes.len()
    }

    fn at_least(&self, count: usize) -> Option<()> {
        (self.len() >= count).then_some(())
    }

    fn from(&self, position: usize) -> Vec<String> {
        (position..self.len()).filter_map(|p| self.at(p)).collect()
    }
}

fn typed(kind: &str, info: Value) -> Value {
    json!({ "type": kind, "info": info })
}

fn info(fields: &[(&str, Value)]) -> Map<String, Value> {
    fields.iter().map(|(name, value)| (name.to_string(), value.clone())).collect()
}

// ---- System Program ----------------------------------------------------------------------------

fn system(data: &[u8], accounts: &Accounts) -> Option<Value> {
    let instruction: SystemInstruction = bincode::deserialize(data).ok()?;
    let a = |position| accounts.at(position).map(Value::String);
    let parsed = match instruction {
        SystemInstruction::CreateAccount { lamports, space, owner } => {
            accounts.at_least(2)?;
            typed("createAccount", json!({ "source": a(0)?, "newAccount": a(1)?, "lamports": lamports, "space": space, "owner": owner.to_string() }))
        }
        SystemInstruction::Assign { owner } => {
            accounts.at_least(1)?;
            typed("assign", json!({ "account": a(0)?, "owner": owner.to_string() }))
        }
        SystemInstruction::Transfer { lamports } => {
            accounts.at_least(2)?;
            typed("transfer", json!({ "source": a(0)?, "destination": a(1)?, "lamports": lamports }))
        }
        SystemInstruction::CreateAccountWithSeed { base, seed, lamports, space, owner } => {
            accounts.at_least(2)?;
            typed(
                "createAccountWithSeed",
                json!({ "source": a(0)?, "newAccount": a(1)?, "base": base.to_string(), "seed": seed, "lamports": lamports, "space": space, "owner": owner.to_string() }),
            )
        }
        SystemInstruction::AdvanceNonceAccount => {
            accounts.at_least(3)?;
            typed("advanceNonce", json!({ "nonceAccount": a(0)?, "recentBlockhashesSysvar": a(1)?, "nonceAuthority": a(2)? }))
        }
        SystemInstruction::WithdrawNonceAccount(lamports) => {
            accounts.at_least(5)?;
            typed(
                "withdrawFromNonce",
                json!({ "nonceAccount": a(0)?, "destination": a(1)?, "recentBlockhashesSysvar": a(2)?, "rentSysvar": a(3)?, "nonceAuthority": a(4)?, "lamports": lamports }),
            )
        }
        SystemInstruction::InitializeNonceAccount(authority) => {
            accounts.at_least(3)?;
            typed(
                "initializeNonce",
                json!({ "nonceAccount": a(0)?, "recentBlockhashesSysvar": a(1)?, "rentSysvar": a(2)?, "nonceAuthority": authority.to_string() }),
            )
        }
        SystemInstruction::AuthorizeNonceAccount(authority) => {
            accounts.at_least(2)?;
            typed("authorizeNonce", json!({ "nonceAccount": a(0)?, "nonceAuthority": a(1)?, "newAuthorized": authority.to_string() }))
        }
        SystemInstruction::UpgradeNonceAccount => {
            accounts.at_least(1)?;
            typed("upgradeNonce", json!({ "nonceAccount": a(0)? }))
        }
        SystemInstruction::Allocate { space } => {
            accounts.at_least(1)?;
            typed("allocate", json!({ "account": a(0)?, "space": space }))
        }
        SystemInstruction::AllocateWithSeed { base, seed, space, owner } => {
            accounts.at_least(2)?;
            typed("allocateWithSeed", json!({ "account": a(0)?, "base": base.to_string(), "seed": seed, "space": space, "owner": owner.to_string() }))
        }
        SystemInstruction::AssignWithSeed { base, seed, owner } => {
            accounts.at_least(2)?;
            typed("assignWithSeed", json!({ "account": a(0)?, "base": base.to_string(), "seed": seed, "owner": owner.to_string() }))
        }
        SystemInstruction::TransferWithSeed { lamports, from_seed, from_owner } => {
            accounts.at_least(3)?;
            typed(
                "transferWithSeed",
                json!({ "source": a(0)?, "sourceBase": a(1)?, "destination": a(2)?, "lamports": lamports, "sourceSeed": from_seed, "sourceOwner": from_owner.to_string() }),
            )
        }
        SystemInstruction::CreateAccountAllowPrefund { lamports, space, owner } if lamports == 0 => {
            accounts.at_least(1)?;
            typed("createAccountAllowPrefund", json!({ "newAccount": a(0)?, "space": space, "owner": owner.to_string() }))
        }
        SystemInstruction::CreateAccountAllowPrefund { lamports, space, owner } => {
            accounts.at_least(2)?;
            typed(
                "createAccountAllowPrefund",
                json!({ "newAccount": a(0)?, "source": a(1)?, "lamports": lamports, "space": space, "owner": owner.to_string() }),
            )
        }
    };
    Some(parsed)
}

// ---- SPL Token and Token-2022 (base instructions) ----------------------------------------------

/// Adds the authority at `position`: a single signer under `single`, or, when more accounts
/// follow it, the multisig account under `multisig` and its signers under `signers`.
fn authority(map: &mut Map<String, Value>, accounts: &Accounts, position: usize, single: &str, multisig: &str) -> Option<()> {
    let key = accounts.at(position)?;
    if accounts.len() > position + 1 {
        map.insert(multisig.into(), json!(key));
        map.insert("signers".into(), json!(accounts.from(position + 1)));
    } else {
        map.insert(single.into(), json!(key));
    }
    Some(())
}

fn optional_key(key: Option<Pubkey>) -> Value {
    key.map_or(Value::Null, |k| json!(k.to_string()))
}

fn authority_type(kind: &AuthorityType) -> &'static str {
    match kind {
        AuthorityType::MintTokens => "mintTokens",
        AuthorityType::FreezeAccount => "freezeAccount",
        AuthorityType::AccountOwner => "accountOwner",
        AuthorityType::CloseAccount => "closeAccount",
    }
}

fn token(data: &[u8], accounts: &Accounts) -> Option<Value> {
    let instruction = TokenInstruction::unpack(data).ok()?;
    let a = |position| accounts.at(position).map(Value::String);
    let with_authority = |kind: &str, fields: Map<String, Value>, position: usize, single: &str, multisig: &str| {
        let mut fields = fields;
        authority(&mut fields, accounts, position, single, multisig)?;
        Some(typed(kind, Value::Object(fields)))
    };
    match instruction {
        TokenInstruction::InitializeMint { decimals, mint_authority, freeze_authority } => {
            accounts.at_least(2)?;
            let mut fields = info(&[("mint", a(0)?), ("decimals", json!(decimals)), ("mintAuthority", json!(mint_authority.to_string())), ("rentSysvar", a(1)?)]);
            if let Some(freeze) = Option::<Pubkey>::from(freeze_authority) {
                fields.insert("freezeAuthority".into(), json!(freeze.to_string()));
            }
            Some(typed("initializeMint", Value::Object(fields)))
        }
        TokenInstruction::InitializeMint2 { decimals, mint_authority, freeze_authority } => {
            accounts.at_least(1)?;
            let mut fields = info(&[("mint", a(0)?), ("decimals", json!(decimals)), ("mintAuthority", json!(mint_authority.to_string()))]);
            if let Some(freeze) = Option::<Pubkey>::from(freeze_authority) {
                fields.insert("freezeAuthority".into(), json!(freeze.to_string()));
            }
            Some(typed("initializeMint2", Value::Object(fields)))
        }
        TokenInstruction::InitializeAccount => {
            accounts.at_least(4)?;
            Some(typed("initializeAccount", json!({ "account": a(0)?, "mint": a(1)?, "owner": a(2)?, "rentSysvar": a(3)? })))
        }
        TokenInstruction::InitializeAccount2 { owner } => {
            accounts.at_least(3)?;
            Some(typed("initializeAccount2", json!({ "account": a(0)?, "mint": a(1)?, "owner": owner.to_string(), "rentSysvar": a(2)? })))
        }
        TokenInstruction::InitializeAccount3 { owner } => {
            accounts.at_least(2)?;
            Some(typed("initializeAccount3", json!({ "account": a(0)?, "mint": a(1)?, "owner": owner.to_string() })))
        }
        TokenInstruction::InitializeMultisig { m } => {
            accounts.at_least(3)?;
            Some(typed("initializeMultisig", json!({ "multisig": a(0)?, "rentSysvar": a(1)?, "signers": accounts.from(2), "m": m })))
        }
        TokenInstruction::InitializeMultisig2 { m } => {
            accounts.at_least(2)?;
            Some(typed("initializeMultisig2", json!({ "multisig": a(0)?, "signers": accounts.from(1), "m": m })))
        }
        #[allow(deprecated)]
        TokenInstruction::Transfer { amount } => {
            accounts.at_least(3)?;
            let fields = info(&[("source", a(0)?), ("destination", a(1)?), ("amount", json!(amount.to_string()))]);
            with_authority("transfer", fields, 2, "authority", "multisigAuthority")
        }
        TokenInstruction::Approve { amount } => {
            accounts.at_least(3)?;
            let fields = info(&[("source", a(0)?), ("delegate", a(1)?), ("amount", json!(amount.to_string()))]);
            with_authority("approve", fields, 2, "owner", "multisigOwner")
        }
        TokenInstruction::Revoke => {
            accounts.at_least(2)?;
            with_authority("revoke", info(&[("source", a(0)?)]), 1, "owner", "multisigOwner")
        }
        TokenInstruction::SetAuthority { authority_type: kind, new_authority } => {
            accounts.at_least(2)?;
            let owned = match kind {
                AuthorityType::MintTokens | AuthorityType::FreezeAccount => "mint",
                AuthorityType::AccountOwner | AuthorityType::CloseAccount => "account",
            };
            let fields = info(&[
                (owned, a(0)?),
                ("authorityType", json!(authority_type(&kind))),
                ("newAuthority", optional_key(new_authority.into())),
            ]);
            with_authority("setAuthority", fields, 1, "authority", "multisigAuthority")
        }
        TokenInstruction::MintTo { amount } => {
            accounts.at_least(3)?;
            let fields = info(&[("mint", a(0)?), ("account", a(1)?), ("amount", json!(amount.to_string()))]);
            with_authority("mintTo", fields, 2, "mintAuthority", "multisigMintAuthority")
        }
        TokenInstruction::Burn { amount } => {
            accounts.at_least(3)?;
            let fields = info(&[("account", a(0)?), ("mint", a(1)?), ("amount", json!(amount.to_string()))]);
            with_authority("burn", fields, 2, "authority", "multisigAuthority")
        }
        TokenInstruction::CloseAccount => {
            accounts.at_least(3)?;
            with_authority("closeAccount", info(&[("account", a(0)?), ("destination", a(1)?)]), 2, "owner", "multisigOwner")
        }
        TokenInstruction::FreezeAccount => {
            accounts.at_least(3)?;
            with_authority("freezeAccount", info(&[("account", a(0)?), ("mint", a(1)?)]), 2, "freezeAuthority", "multisigFreezeAuthority")
        }
        TokenInstruction::ThawAccount => {
            accounts.at_least(3)?;
            with_authority("thawAccount", info(&[("account", a(0)?), ("mint", a(1)?)]), 2, "freezeAuthority", "multisigFreezeAuthority")
        }
        TokenInstruction::TransferChecked { amount, decimals } => {
            accounts.at_least(4)?;
            let fields = info(&[("source", a(0)?), ("mint", a(1)?), ("destination", a(2)?), ("tokenAmount", token_amount(amount, decimals))]);
            with_authority("transferChecked", fields, 3, "authority", "multisigAuthority")
        }
        TokenInstruction::ApproveChecked { amount, decimals } => {
            accounts.at_least(4)?;
            let fields = info(&[("source", a(0)?), ("mint", a(1)?), ("delegate", a(2)?), ("tokenAmount", token_amount(amount, decimals))]);
            with_authority("approveChecked", fields, 3, "owner", "multisigOwner")
        }
        TokenInstruction::MintToChecked { amount, decimals } => {
            accounts.at_least(3)?;
            let fields = info(&[("mint", a(0)?), ("account", a(1)?), ("tokenAmount", token_amount(amount, decimals))]);
            with_authority("mintToChecked", fields, 2, "mintAuthority", "multisigMintAuthority")
        }
        TokenInstruction::BurnChecked { amount, decimals } => {
            accounts.at_least(3)?;
            let fields = info(&[("account", a(0)?), ("mint", a(1)?), ("tokenAmount", token_amount(amount, decimals))]);
            with_authority("burnChecked", fields, 2, "authority", "multisigAuthority")
        }
        TokenInstruction::SyncNative => {
            accounts.at_least(1)?;
            Some(typed("syncNative", json!({ "account": a(0)? })))
        }
        TokenInstruction::GetAccountDataSize => {
            accounts.at_least(1)?;
            let mut fields = info(&[("mint", a(0)?)]);
            // The extension types asked about follow the tag as u16s; only the one the
            // Associated Token Account program sends is named here.
            let extensions = &data[1..];
            if !extensions.is_empty() {
                let names = extensions
                    .chunks(2)
                    .map(|pair| match pair {
                        [lo, hi] if u16::from_le_bytes([*lo, *hi]) == EXTENSION_IMMUTABLE_OWNER => Some(json!("immutableOwner")),
                        _ => None,
                    })
                    .collect::<Option<Vec<Value>>>()?;
                fields.insert("extensionTypes".into(), Value::Array(names));
            }
            Some(typed("getAccountDataSize", Value::Object(fields)))
        }
        TokenInstruction::InitializeImmutableOwner => {
            accounts.at_least(1)?;
            Some(typed("initializeImmutableOwner", json!({ "account": a(0)? })))
        }
        TokenInstruction::AmountToUiAmount { amount } => {
            accounts.at_least(1)?;
            Some(typed("amountToUiAmount", json!({ "mint": a(0)?, "amount": amount.to_string() })))
        }
        TokenInstruction::UiAmountToAmount { ui_amount } => {
            accounts.at_least(1)?;
            Some(typed("uiAmountToAmount", json!({ "mint": a(0)?, "uiAmount": ui_amount })))
        }
    }
}

// ---- Associated Token Account --------------------------------------------------------------------

fn associated_token(data: &[u8], accounts: &Accounts) -> Option<Value> {
    let a = |position| accounts.at(position).map(Value::String);
    let create = |kind: &str| {
        accounts.at_least(6)?;
        Some(typed(
            kind,
            json!({ "source": a(0)?, "account": a(1)?, "wallet": a(2)?, "mint": a(3)?, "systemProgram": a(4)?, "tokenProgram": a(5)? }),
        ))
    };
    match data {
        // The original instruction carried no data.
        [] | [0] => create("create"),
        [1] => create("createIdempotent"),
        [2] => {
            accounts.at_least(7)?;
            Some(typed(
                "recoverNested",
                json!({
                    "nestedSource": a(0)?, "nestedMint": a(1)?, "destination": a(2)?, "nestedOwner": a(3)?,
                    "ownerMint": a(4)?, "wallet": a(5)?, "tokenProgram": a(6)?,
                }),
            ))
        }
        _ => None,
    }
}

// ---- accounts ----------------------------------------------------------------------------------

/// An SPL Token account or mint as `jsonParsed` data (`{program, parsed, space}`), or `None`
/// for anything else, which a validator then serves in base64. `decimals_of` finds a mint's
/// decimals for a token account's amount.
pub fn account_data(owner: &Pubkey, data: &[u8], decimals_of: impl Fn(&Pubkey) -> Option<u8>) -> Option<Value> {
    let program = if *owner == SPL_TOKEN {
        "spl-token"
    } else if *owner == SPL_TOKEN_2022 {
        "spl-token-2022"
    } else {
        return None;
    };
    let parsed = match data.len() {
        TOKEN_ACCOUNT_LEN => token_account(data, &decimals_of)?,
        MINT_LEN => mint(data)?,
        _ => return None,
    };
    Some(json!({ "program": program, "parsed": parsed, "space": data.len() }))
}

fn key_at(data: &[u8], offset: usize) -> Option<Pubkey> {
    Pubkey::try_from(data.get(offset..offset + 32)?).ok()
}

fn u64_at(data: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(offset..offset + 8)?.try_into().ok()?))
}

/// A `COption<Pubkey>`: a 4-byte tag (0 none, 1 some) then the key.
fn optional_key_at(data: &[u8], offset: usize) -> Option<Option<Pubkey>> {
    match data.get(offset..offset + 4)? {
        [0, 0, 0, 0] => Some(None),
        [1, 0, 0, 0] => Some(Some(key_at(data, offset + 4)?)),
        _ => None,
    }
}

/// `COption<u64>`: a 4-byte tag then the amount.
fn optional_u64_at(data: &[u8], offset: usize) -> Option<Option<u64>> {
    match data.get(offset..offset + 4)? {
        [0, 0, 0, 0] => Some(None),
        [1, 0, 0, 0] => Some(Some(u64_at(data, offset + 4)?)),
        _ => None,
    }
}

/// Token account layout: mint 0, owner 32, amount 64, delegate 72, state 108, is_native 109,
/// delegated_amount 121, close_authority 129.
fn token_account(data: &[u8], decimals_of: &impl Fn(&Pubkey) -> Option<u8>) -> Option<Value> {
    let mint = key_at(data, 0)?;
    let owner = key_at(data, 32)?;
    let amount = u64_at(data, 64)?;
    let delegate = optional_key_at(data, 72)?;
    let state = match data.get(108)? {
        1 => "initialized",
        2 => "frozen",
        // An uninitialized account is not parsed by a validator either.
        _ => return None,
    };
    let native_reserve = optional_u64_at(data, 109)?;
    let delegated_amount = u64_at(data, 121)?;
    let close_authority = optional_key_at(data, 129)?;
    let decimals = decimals_of(&mint)?;
    let mut fields = info(&[
        ("isNative", json!(native_reserve.is_some())),
        ("mint", json!(mint.to_string())),
        ("owner", json!(owner.to_string())),
        ("state", json!(state)),
        ("tokenAmount", token_amount(amount, decimals)),
    ]);
    if let Some(delegate) = delegate {
        fields.insert("delegate".into(), json!(delegate.to_string()));
        fields.insert("delegatedAmount".into(), token_amount(delegated_amount, decimals));
    }
    if let Some(reserve) = native_reserve {
        fields.insert("rentExemptReserve".into(), token_amount(reserve, decimals));
    }
    if let Some(close) = close_authority {
        fields.insert("closeAuthority".into(), json!(close.to_string()));
    }
    Some(typed("account", Value::Object(fields)))
}

/// Mint layout: mint_authority 0, supply 36, decimals 44, is_initialized 45, freeze_authority 46.
fn mint(data: &[u8]) -> Option<Value> {
    if *data.get(45)? != 1 {
        return None;
    }
    Some(typed(
        "mint",
        json!({
            "mintAuthority": optional_key(optional_key_at(data, 0)?),
            "supply": u64_at(data, 36)?.to_string(),
            "decimals": data.get(44)?,
            "isInitialized": true,
            "freezeAuthority": optional_key(optional_key_at(data, 46)?),
        }),
    ))
}

/// The decimals byte of a mint's data.
pub fn mint_decimals(data: &[u8]) -> Option<u8> {
    (data.len() >= MINT_LEN).then(|| data[44])
}

#[cfg(test)]
mod tests {
    use super::*;
    use solana_instruction::{AccountMeta, Instruction};
    use solana_message::{v0, Message};

    const RENT_SYSVAR: Pubkey = Pubkey::from_str_const("SysvarRent111111111111111111111111111111111");

    fn keys(n: usize) -> Vec<Pubkey> {
        (0..n).map(|_| Pubkey::new_unique()).collect()
    }

    fn only_instruction(ix: Instruction, payer: &Pubkey) -> Value {
        let message = Message::new(&[ix], Some(payer));
        instruction(&message.instructions[0], &message.account_keys, None)
    }

    #[test]
    fn a_transfer_checked_reads_as_the_validator_parses_it() {
        let [source, mint, destination, owner] = keys(4).try_into().unwrap();
        let ix = spl_token_interface::instruction::transfer_checked(&SPL_TOKEN, &source, &mint, &destination, &owner, &[], 12_345, 6).unwrap();
        assert_eq!(
            only_instruction(ix, &owner),
            json!({
                "program": "spl-token",
                "programId": SPL_TOKEN.to_string(),
                "parsed": { "type": "transferChecked", "info": {
                    "source": source.to_string(), "mint": mint.to_string(), "destination": destination.to_string(),
                    "authority": owner.to_string(),
                    "tokenAmount": { "amount": "12345", "decimals": 6, "uiAmount": 0.012345, "uiAmountString": "0.012345" },
                } },
                "stackHeight": null,
            })
        );
    }

    #[test]
    fn a_multisig_authority_lists_its_signers() {
        let [source, destination, multisig, a, b] = keys(5).try_into().unwrap();
        let ix = spl_token_interface::instruction::transfer(&SPL_TOKEN, &source, &destination, &multisig, &[&a, &b], 7).unwrap();
        let parsed = only_instruction(ix, &a);
        assert_eq!(parsed["parsed"]["info"]["multisigAuthority"], json!(multisig.to_string()));
        assert_eq!(parsed["parsed"]["info"]["signers"], json!([a.to_string(), b.to_string()]));
        assert!(parsed["parsed"]["info"].get("authority").is_none());
    }

    #[test]
    fn token_2022_instructions_are_named_spl_token_too() {
        let [account, mint, owner] = keys(3).try_into().unwrap();
        let mut data = vec![18];
        data.extend_from_slice(owner.as_ref());
        let ix = Instruction::new_with_bytes(SPL_TOKEN_2022, &data, vec![AccountMeta::new(account, false), AccountMeta::new_readonly(mint, false)]);
        let parsed = only_instruction(ix, &owner);
        assert_eq!(parsed["program"], "spl-token");
        assert_eq!(parsed["programId"], SPL_TOKEN_2022.to_string());
        assert_eq!(parsed["parsed"]["type"], "initializeAccount3");
    }

    #[test]
    fn an_idempotent_associated_account_creation_names_its_six_accounts() {
        let [payer, wallet, mint] = keys(3).try_into().unwrap();
        let ix = spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent(&payer, &wallet, &mint, &SPL_TOKEN);
        let ata = spl_associated_token_account_interface::address::get_associated_token_address(&wallet, &mint);
        let parsed = only_instruction(ix, &payer);
        assert_eq!(parsed["program"], "spl-associated-token-account");
        assert_eq!(
            parsed["parsed"],
            json!({ "type": "createIdempotent", "info": {
                "source": payer.to_string(), "account": ata.to_string(), "wallet": wallet.to_string(), "mint": mint.to_string(),
                "systemProgram": SYSTEM.to_string(), "tokenProgram": SPL_TOKEN.to_string(),
            } })
        );
    }

    #[test]
    fn a_memo_parses_to_its_text_and_invalid_utf8_stays_encoded() {
        let payer = Pubkey::new_unique();
        let memo = Instruction::new_with_bytes(MEMO_V3, b"order 42", vec![]);
        assert_eq!(only_instruction(memo, &payer)["parsed"], json!("order 42"));
        let binary = Instruction::new_with_bytes(MEMO_V3, &[0xff, 0xfe], vec![]);
        let decoded = only_instruction(binary, &payer);
        assert!(decoded.get("parsed").is_none());
        assert_eq!(decoded["data"], bs58::encode([0xff, 0xfe]).into_string());
    }

    #[test]
    fn a_system_transfer_parses_and_compute_budget_stays_partially_decoded() {
        let [from, to] = keys(2).try_into().unwrap();
        let transfer = solana_system_interface::instruction::transfer(&from, &to, 5_000);
        assert_eq!(
            only_instruction(transfer, &from)["parsed"],
            json!({ "type": "transfer", "info": { "source": from.to_string(), "destination": to.to_string(), "lamports": 5_000 } })
        );
        let budget_program = Pubkey::from_str_const("ComputeBudget111111111111111111111111111111");
        // SetComputeUnitLimit(20_000): a validator has no parser for the Compute Budget program.
        let limit = Instruction::new_with_bytes(budget_program, &[2, 0x20, 0x4e, 0, 0], vec![]);
        assert_eq!(
            only_instruction(limit, &from),
            json!({ "programId": budget_program.to_string(), "accounts": [], "data": bs58::encode([2, 0x20, 0x4e, 0, 0]).into_string(), "stackHeight": null })
        );
    }

    #[test]
    fn an_instruction_with_too_few_accounts_falls_back_to_partially_decoded() {
        let [source, mint, destination, owner] = keys(4).try_into().unwrap();
        let mut ix = spl_token_interface::instruction::transfer_checked(&SPL_TOKEN, &source, &mint, &destination, &owner, &[], 1, 6).unwrap();
        ix.accounts.truncate(3);
        let decoded = only_instruction(ix, &owner);
        assert!(decoded.get("parsed").is_none());
        assert_eq!(decoded["accounts"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn account_keys_carry_signer_and_writable_with_programs_and_sysvars_read_only() {
        let [payer, authority, destination] = keys(3).try_into().unwrap();
        let ix = Instruction::new_with_bytes(
            SPL_TOKEN,
            &[],
            vec![
                AccountMeta::new(destination, false),
                AccountMeta::new_readonly(authority, true),
                // A sysvar marked writable is still reported read-only.
                AccountMeta::new(RENT_SYSVAR, false),
            ],
        );
        let blockhash = solana_hash::Hash::new_from_array([7; 32]);
        let message = VersionedMessage::V0(v0::Message::try_compile(&payer, &[ix], &[], blockhash).unwrap());
        let parsed = super::message(&message, &LoadedKeys::default());
        let flags: Vec<(String, bool, bool)> = parsed["accountKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k["pubkey"].as_str().unwrap().to_string(), k["signer"].as_bool().unwrap(), k["writable"].as_bool().unwrap()))
            .collect();
        let flag = |key: &Pubkey| flags.iter().find(|(k, ..)| *k == key.to_string()).map(|(_, s, w)| (*s, *w)).unwrap();
        assert_eq!(flag(&payer), (true, true));
        assert_eq!(flag(&authority), (true, false));
        assert_eq!(flag(&destination), (false, true));
        assert_eq!(flag(&RENT_SYSVAR), (false, false));
        assert_eq!(flag(&SPL_TOKEN), (false, false));
        assert_eq!(parsed["recentBlockhash"], blockhash.to_string());
        assert_eq!(parsed["addressTableLookups"], json!([]));
        assert!(parsed["accountKeys"].as_array().unwrap().iter().all(|k| k["source"] == "transaction"));
    }

    #[test]
    fn token_accounts_and_mints_parse_and_other_data_does_not() {
        let mint_key = Pubkey::new_unique();
        let owner = Pubkey::new_unique();
        let mut mint_data = vec![0u8; MINT_LEN];
        mint_data[0] = 1;
        mint_data[4..36].copy_from_slice(owner.as_ref());
        mint_data[36..44].copy_from_slice(&1_000_000u64.to_le_bytes());
        mint_data[44] = 6;
        mint_data[45] = 1;
        assert_eq!(
            account_data(&SPL_TOKEN, &mint_data, |_| None).unwrap(),
            json!({ "program": "spl-token", "space": 82, "parsed": { "type": "mint", "info": {
                "mintAuthority": owner.to_string(), "supply": "1000000", "decimals": 6, "isInitialized": true, "freezeAuthority": null,
            } } })
        );

        let mut account = vec![0u8; TOKEN_ACCOUNT_LEN];
        account[0..32].copy_from_slice(mint_key.as_ref());
        account[32..64].copy_from_slice(owner.as_ref());
        account[64..72].copy_from_slice(&2_500_000u64.to_le_bytes());
        account[108] = 1;
        let decimals = |key: &Pubkey| (*key == mint_key).then_some(6);
        let parsed = account_data(&SPL_TOKEN, &account, decimals).unwrap();
        assert_eq!(
            parsed["parsed"],
            json!({ "type": "account", "info": {
                "isNative": false, "mint": mint_key.to_string(), "owner": owner.to_string(), "state": "initialized",
                "tokenAmount": { "amount": "2500000", "decimals": 6, "uiAmount": 2.5, "uiAmountString": "2.5" },
            } })
        );
        assert!(account_data(&SYSTEM, &account, decimals).is_none(), "not a token program's account");
        assert!(account_data(&SPL_TOKEN, &account[..100], decimals).is_none(), "not a token layout");
    }
}
