//! `Ledger`: LiteSVM with payment_ledger registered as a builtin, plus the few SPL helpers a
//! payment needs (a 6-decimal mint, associated token accounts, mint_to). Every helper submits a
//! real, signed transaction; nothing writes account state behind the runtime's back.

use anchor_lang::{
    solana_program::{program_pack::Pack, pubkey::Pubkey},
    InstructionData, ToAccountMetas,
};
use litesvm::{
    types::{FailedTransactionMetadata, TransactionMetadata},
    LiteSVM,
};
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_message::Message;
use solana_program_runtime::{declare_process_instruction, solana_sbpf::program::BuiltinFunctionDefinition};
use solana_signer::Signer;
use solana_transaction::Transaction;

use crate::{
    address::{associated_token_address, config_address, event_authority_address},
    history::{self, ExecutedTx},
    native,
};
use solana_transaction::versioned::VersionedTransaction;
use solana_transaction_error::TransactionError;

/// Compute units charged per native invocation of payment_ledger. Native code is not metered;
/// this flat charge stands in for the SBF cost so fees and CU limits stay meaningful. Measured
/// SBF builds of comparable Anchor instructions use 15k-40k units.
pub const NATIVE_INVOCATION_UNITS: u64 = 20_000;

pub const USDC_DECIMALS: u8 = 6;

declare_process_instruction!(PaymentLedgerBuiltin, NATIVE_INVOCATION_UNITS, |invoke_context| {
    native::run_native(payment_ledger::process_instruction, invoke_context)
});

pub type TxResult = Result<Executed, FailedTransactionMetadata>;

/// A transaction the runtime executed successfully, with the keys its instructions index into.
#[derive(Debug, Clone)]
pub struct Executed {
    pub meta: TransactionMetadata,
    pub account_keys: Vec<Pubkey>,
}

impl Executed {
    pub fn events<E: anchor_lang::AnchorDeserialize + anchor_lang::Discriminator>(&self) -> Vec<E> {
        crate::events::emitted_events(&self.meta, &self.account_keys)
    }
}

/// What `Ledger::bootstrap` created: the service keys and the settlement mint.
pub struct LedgerSetup {
    pub authority: Keypair,
    pub mint_authority: Keypair,
    pub mint: Pubkey,
    pub treasury: Keypair,
    pub treasury_token: Pubkey,
}

pub struct Ledger {
    pub svm: LiteSVM,
    /// Every transaction this ledger included, in execution order.
    pub history: Vec<ExecutedTx>,
    /// Funded at creation (the ledger's genesis); airdrops are transfers from it.
    faucet: Keypair,
    /// The clock's unix time at slot 0.
    genesis_unix_timestamp: i64,
}

/// Lamports the faucet starts with: 500,000 SOL (LiteSVM's own pool holds 1,000,000).
const FAUCET_LAMPORTS: u64 = 500_000 * 1_000_000_000;

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// A fresh runtime with mainnet features, SPL programs, sysvars and payment_ledger, its
    /// genesis at the current wall-clock time with a new faucet.
    pub fn new() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64);
        Self::with_genesis(Keypair::new(), now)
    }

    /// The runtime a given genesis produces: the same `faucet` and `unix_timestamp` always give
    /// the same state, which is what lets a persisted ledger be rebuilt by replaying its
    /// transactions.
    pub fn with_genesis(faucet: Keypair, unix_timestamp: i64) -> Self {
        native::install_syscall_stubs();
        // Blockhash expiry and duplicate-signature refusal are enforced by the caller that owns
        // the slot clock (the local ledger); LiteSVM alone keeps a single blockhash.
        let mut svm = LiteSVM::new()
            .with_transaction_history(0)
            .with_blockhash_check(false);
        svm.add_builtin(
            payment_ledger::ID,
            <PaymentLedgerBuiltin as BuiltinFunctionDefinition<_>>::register,
        );
        let mut clock = svm.get_sysvar::<solana_clock::Clock>();
        clock.slot = 0;
        clock.unix_timestamp = unix_timestamp;
        svm.set_sysvar(&clock);
        svm.airdrop(&faucet.pubkey(), FAUCET_LAMPORTS).expect("genesis funding of the faucet");
        Ledger { svm, history: Vec::new(), faucet, genesis_unix_timestamp: unix_timestamp }
    }

    pub fn faucet_pubkey(&self) -> Pubkey {
        self.faucet.pubkey()
    }

    pub fn genesis_unix_timestamp(&self) -> i64 {
        self.genesis_unix_timestamp
    }

    /// Creates the settlement mint, funds a treasury with `treasury_units` of it and initializes
    /// the program's config.
    pub fn bootstrap(&mut self, treasury_units: u64) -> Result<LedgerSetup, FailedTransactionMetadata> {
        self.bootstrap_with(treasury_units, true)
    }

    /// `bootstrap` that leaves the program config for the operator to create when `initialize`
    /// is false: a cluster as a new deployment finds it (`npm run admin -- init-cluster`).
    pub fn bootstrap_with(&mut self, treasury_units: u64, initialize: bool) -> Result<LedgerSetup, FailedTransactionMetadata> {
        let authority = Keypair::new();
        let mint_authority = Keypair::new();
        let treasury = Keypair::new();
        for key in [&authority, &mint_authority, &treasury] {
            self.airdrop(&key.pubkey(), 100_000_000_000)?;
        }
        let mint = self.create_mint(&mint_authority, USDC_DECIMALS)?;
        let treasury_token = self.create_token_account(&authority, &treasury.pubkey(), &mint)?;
        if treasury_units > 0 {
            self.mint_to(&mint_authority, &mint, &treasury_token, treasury_units)?;
        }
        if initialize {
            self.initialize(&authority, &mint, &treasury.pubkey())?;
        }
        Ok(LedgerSetup { authority, mint_authority, mint, treasury, treasury_token })
    }

    /// A system transfer from the runtime's faucet, recorded like any other transaction.
    pub fn airdrop(&mut self, to: &Pubkey, lamports: u64) -> TxResult {
        let tx = self.airdrop_transaction(to, lamports, self.svm.latest_blockhash());
        self.execute(tx)
    }

    /// The signed faucet transfer behind an airdrop, for a caller that submits it itself.
    pub fn airdrop_transaction(&self, to: &Pubkey, lamports: u64, blockhash: solana_hash::Hash) -> VersionedTransaction {
        let faucet = &self.faucet;
        let ix = solana_system_interface::instruction::transfer(&faucet.pubkey(), to, lamports);
        let message = Message::new_with_blockhash(&[ix], Some(&faucet.pubkey()), &blockhash);
        Transaction::new(&[faucet], message, blockhash).into()
    }

    /// Executes a signed transaction and records it in `history` when it is included: on
    /// success, and on failures that still charge the fee (an instruction error), as a
    /// validator would put them in a block.
    pub fn execute(&mut self, transaction: VersionedTransaction) -> TxResult {
        // A lookup that does not resolve makes the runtime refuse the transaction unrecorded.
        let loaded = history::loaded_keys(&self.svm, &transaction.message).unwrap_or_default();
        let account_keys: Vec<Pubkey> = transaction
            .message
            .static_account_keys()
            .iter()
            .chain(&loaded.writable)
            .chain(&loaded.readonly)
            .copied()
            .collect();
        let (pre_balances, pre_token_balances) = history::balances(&self.svm, &account_keys);
        let clock = self.svm.get_sysvar::<solana_clock::Clock>();
        let result = self.svm.send_transaction(transaction.clone());
        let (status, meta) = match &result {
            Ok(meta) => (Ok(()), meta.clone()),
            Err(failed) if is_included(&failed.err) => (Err(failed.err.clone()), failed.meta.clone()),
            Err(failed) => return Err(failed.clone()),
        };
        let (post_balances, post_token_balances) = history::balances(&self.svm, &account_keys);
        self.history.push(ExecutedTx {
            transaction,
            account_keys: account_keys.clone(),
            loaded,
            slot: clock.slot,
            block_time: clock.unix_timestamp,
            status,
            meta,
            pre_balances,
            post_balances,
            pre_token_balances,
            post_token_balances,
        });
        let meta = result?;
        Ok(Executed { meta, account_keys })
    }

    /// Signs with `signers` (the first pays fees) and executes.
    pub fn send(&mut self, instructions: &[Instruction], signers: &[&Keypair]) -> TxResult {
        let payer = signers.first().expect("a transaction needs a fee payer").pubkey();
        let message = Message::new_with_blockhash(instructions, Some(&payer), &self.svm.latest_blockhash());
        let tx = Transaction::new(signers, message, self.svm.latest_blockhash());
        self.execute(tx.into())
    }

    pub fn create_mint(&mut self, authority: &Keypair, decimals: u8) -> Result<Pubkey, FailedTransactionMetadata> {
        let mint = Keypair::new();
        let space = spl_token_interface::state::Mint::LEN;
        let lamports = self.svm.minimum_balance_for_rent_exemption(space);
        let create = solana_system_interface::instruction::create_account(
            &authority.pubkey(),
            &mint.pubkey(),
            lamports,
            space as u64,
            &spl_token_interface::ID,
        );
        let init = spl_token_interface::instruction::initialize_mint2(
            &spl_token_interface::ID,
            &mint.pubkey(),
            &authority.pubkey(),
            None,
            decimals,
        )
        .expect("valid initialize_mint2");
        self.send(&[create, init], &[authority, &mint])?;
        Ok(mint.pubkey())
    }

    /// The associated token account of `owner` for `mint`, created if missing (paid by `payer`).
    pub fn create_token_account(
        &mut self,
        payer: &Keypair,
        owner: &Pubkey,
        mint: &Pubkey,
    ) -> Result<Pubkey, FailedTransactionMetadata> {
        let create = spl_associated_token_account_interface::instruction::create_associated_token_account_idempotent(
            &payer.pubkey(),
            owner,
            mint,
            &spl_token_interface::ID,
        );
        self.send(&[create], &[payer])?;
        Ok(associated_token_address(owner, mint))
    }

    pub fn mint_to(
        &mut self,
        authority: &Keypair,
        mint: &Pubkey,
        to: &Pubkey,
        units: u64,
    ) -> TxResult {
        let ix = spl_token_interface::instruction::mint_to_checked(
            &spl_token_interface::ID,
            mint,
            to,
            &authority.pubkey(),
            &[],
            units,
            USDC_DECIMALS,
        )
        .expect("valid mint_to_checked");
        self.send(&[ix], &[authority])
    }

    pub fn token_balance(&self, token_account: &Pubkey) -> Option<u64> {
        let account = self.svm.get_account(token_account)?;
        // Token account layout: mint (32), owner (32), amount (u64 LE) at offset 64.
        let bytes: [u8; 8] = account.data.get(64..72)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes))
    }

    pub fn initialize(&mut self, authority: &Keypair, mint: &Pubkey, treasury: &Pubkey) -> TxResult {
        let accounts = payment_ledger::accounts::Initialize {
            authority: authority.pubkey(),
            config: config_address(),
            settlement_mint: *mint,
            system_program: solana_system_interface::program::ID,
            event_authority: event_authority_address(),
            program: payment_ledger::ID,
        };
        let data = payment_ledger::instruction::Initialize {
            args: payment_ledger::InitializeArgs { treasury: *treasury },
        };
        let ix = Instruction::new_with_bytes(payment_ledger::ID, &data.data(), accounts.to_account_metas(None));
        self.send(&[ix], &[authority])
    }
}

/// Whether a failed transaction is still part of the chain: execution errors are (the fee is
/// charged and the status recorded); errors found before execution are not.
pub fn is_included(error: &TransactionError) -> bool {
    matches!(
        error,
        TransactionError::InstructionError(..)
            | TransactionError::InsufficientFundsForRent { .. }
            | TransactionError::ProgramExecutionTemporarilyRestricted { .. }
    )
}
