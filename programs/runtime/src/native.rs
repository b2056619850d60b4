//! Running a host-compiled Solana program as a builtin of a real runtime.
//!
//! A program built for the host calls syscalls through `solana_sysvar::program_stubs` (CPI,
//! sysvars, logs, return data). By default those stubs do nothing useful. Here they are wired
//! into the `InvokeContext` of the instruction being executed, so that a native program:
//! - receives its accounts in the exact SBF input layout (serialized by the runtime, then
//!   deserialized by `solana_program_entrypoint::deserialize`, as on-chain);
//! - can CPI into real on-chain programs (SPL Token runs as its BPF build inside LiteSVM) and into
//!   itself (Anchor's `emit_cpi!`), with account changes flowing both ways;
//! - reads sysvars from the runtime's sysvar cache and logs into the transaction's log collector.
//!
//! This is the mechanism `solana-program-test` uses for native programs, reimplemented against
//! LiteSVM so that the ledger stays a light, synchronous, in-process runtime.
//!
//! Known differences from SBF execution (documented in docs/ledger.md, section "How the native
//! builtin works"): no compute-unit metering of the native code itself, no memory-alignment or
//! ABI-region checks, and the heap is the host's.

use std::{
    cell::Cell,
    collections::HashSet,
    panic::{catch_unwind, AssertUnwindSafe},
    sync::Once,
};

use anchor_lang::solana_program::{
    account_info::AccountInfo, entrypoint::ProcessInstruction, program_error::ProgramError,
    pubkey::Pubkey,
};
use solana_instruction::{error::InstructionError, Instruction};
use solana_program_runtime::{
    invoke_context::InvokeContext, serialization::serialize_parameters, stable_log,
};
use solana_svm_log_collector::ic_msg;
use solana_transaction_context::instruction_accounts::BorrowedInstructionAccount;
use solana_svm_timings::ExecuteTimings;
use serde::de::DeserializeOwned;
use solana_program_runtime::solana_sbpf::vm::ContextObject;
use solana_sysvar::{
    clock::Clock, epoch_rewards::EpochRewards, epoch_schedule::EpochSchedule,
    last_restart_slot::LastRestartSlot, program_stubs, rent::Rent,
};

const SUCCESS: u64 = 0;
const UNSUPPORTED_SYSVAR: u64 = solana_instruction::error::UNSUPPORTED_SYSVAR;
/// solana_sysvar's code for a range past the end of the sysvar (not exported by it).
const OFFSET_LENGTH_EXCEEDS_SYSVAR: u64 = 1;

thread_local! {
    /// The `InvokeContext` of the native instruction running on this thread, as an address.
    /// Every instruction of one transaction (including CPIs) shares one context, so nested
    /// native calls see the same value; it is cleared when the outermost call returns.
    static ACTIVE_CONTEXT: Cell<usize> = const { Cell::new(0) };
}

/// Restores the previous active context when a native call returns (or unwinds).
struct ActiveContext {
    previous: usize,
}

impl ActiveContext {
    fn enter(invoke_context: &mut InvokeContext) -> Self {
        let address = invoke_context as *mut InvokeContext as usize;
        let previous = ACTIVE_CONTEXT.with(|cell| cell.replace(address));
        ActiveContext { previous }
    }
}

impl Drop for ActiveContext {
    fn drop(&mut self) {
        ACTIVE_CONTEXT.with(|cell| cell.set(self.previous));
    }
}

/// The context a syscall stub acts on.
///
/// Stubs are only ever reached from program code running inside `run_native`, which holds the
/// context alive and exclusively borrowed for the whole call, so re-borrowing it here is sound
/// in the same way the runtime's own syscalls re-enter the context.
fn active_context<'a>() -> &'a mut InvokeContext<'static, 'static> {
    let address = ACTIVE_CONTEXT.with(Cell::get);
    assert!(address != 0, "a syscall stub ran outside a native program invocation");
    unsafe { &mut *(address as *mut InvokeContext<'static, 'static>) }
}

/// Installs the stubs process-wide. Idempotent; every entry point of this crate calls it.
pub fn install_syscall_stubs() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        program_stubs::set_syscall_stubs(Box::new(RuntimeStubs));
        solana_msg::set_host_logger(log_program_message);
    });
}

/// `msg!` of a native program: into the executing transaction's log, as `sol_log_` would;
/// outside an invocation (host code that happens to call `msg!`), to stdout.
fn log_program_message(message: &str) {
    if ACTIVE_CONTEXT.with(Cell::get) == 0 {
        println!("{message}");
        return;
    }
    let invoke_context = active_context();
    ic_msg!(invoke_context, "Program log: {}", message);
}

/// Executes `entry` for the instruction at the top of `invoke_context`, with SBF semantics for
/// its inputs and for the account changes it makes.
pub fn run_native(
    entry: ProcessInstruction,
    invoke_context: &mut InvokeContext,
) -> Result<(), InstructionError> {
    let _active = ActiveContext::enter(invoke_context);
    let direct_pointers = invoke_context
        .get_feature_set()
        .direct_account_pointers_in_program_input;

    let instruction_context = invoke_context
        .transaction_context
        .get_current_instruction_context()?;
    let account_count = instruction_context.get_number_of_instruction_accounts();

    let (mut input, _regions, _metadata, _data_offset) =
        serialize_parameters(&instruction_context, false, false, direct_pointers)?;
    // SAFETY: `input` is the SBF entrypoint layout the runtime just serialized; the account
    // infos borrow from it and are dropped before it.
    let (program_key, account_infos, data) =
        unsafe { solana_program_entrypoint::deserialize(input.as_slice_mut().as_mut_ptr()) };

    // The runtime logs `invoke`, `success` and `failed` lines around builtins itself.
    match catch_unwind(AssertUnwindSafe(|| entry(program_key, &account_infos, data))) {
        Ok(Ok(())) => write_back(invoke_context, account_count, &account_infos),
        Ok(Err(program_error)) => Err(InstructionError::from(u64::from(program_error))),
        Err(_panic) => Err(InstructionError::ProgramFailedToComplete),
    }
}

/// Copies what the program changed in its account infos into the transaction's accounts, as
/// the loader does after an SBF program returns. The runtime then enforces ownership and
/// writability rules on the result.
fn write_back(
    invoke_context: &mut InvokeContext,
    account_count: u16,
    account_infos: &[AccountInfo],
) -> Result<(), InstructionError> {
    let instruction_context = invoke_context
        .transaction_context
        .get_current_instruction_context()?;
    let mut done = HashSet::with_capacity(account_count as usize);
    for index_in_instruction in 0..account_count {
        let mut account = instruction_context.try_borrow_instruction_account(index_in_instruction)?;
        if !account.is_writable() || !done.insert(*account.get_key()) {
            continue;
        }
        let Some(info) = account_infos.iter().find(|info| info.key == account.get_key()) else {
            continue;
        };
        take_info_state(&mut account, info)?;
    }
    Ok(())
}

/// The error a program sees when a runtime operation it asked for fails.
fn program_error(error: InstructionError) -> ProgramError {
    ProgramError::try_from(error).unwrap_or(ProgramError::InvalidArgument)
}

/// Gives the transaction's account the lamports, data and owner the program left in `info`
/// (owner last, so lamports and data may still change under the old owner's rules).
fn take_info_state(account: &mut BorrowedInstructionAccount<'_, '_>, info: &AccountInfo) -> Result<(), InstructionError> {
    if account.get_lamports() != info.lamports() {
        account.set_lamports(info.lamports())?;
    }
    let data = info.try_borrow_data().map_err(|_| InstructionError::AccountBorrowFailed)?;
    if account.get_data() != &data[..] {
        account.can_data_be_resized(data.len())?;
        account.set_data_from_slice(&data)?;
    }
    if account.get_owner() != info.owner {
        account.set_owner(info.owner.as_ref())?;
    }
    Ok(())
}

/// Syscalls of a native program, answered by the runtime that runs it.
struct RuntimeStubs;

impl RuntimeStubs {
    /// The sysvar's bincode bytes, as the runtime's sysvar cache holds them.
    fn sysvar_bytes(id: &Pubkey) -> Option<Vec<u8>> {
        let invoke_context = active_context();
        invoke_context
            .environment_config
            .sysvar_cache()
            .sysvar_id_to_buffer(id)
            .clone()
    }

    /// `sol_get_sysvar`: a byte range of the serialized sysvar.
    fn copy_sysvar(id: &Pubkey, var_addr: *mut u8, offset: u64, length: u64) -> u64 {
        let Some(bytes) = Self::sysvar_bytes(id) else {
            return UNSUPPORTED_SYSVAR;
        };
        let Some(end) = offset.checked_add(length).filter(|end| *end <= bytes.len() as u64) else {
            return OFFSET_LENGTH_EXCEEDS_SYSVAR;
        };
        // SAFETY: the caller (solana_sysvar) passes a buffer of at least `length` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes[offset as usize..end as usize].as_ptr(), var_addr, length as usize);
        }
        SUCCESS
    }

    /// The legacy per-sysvar syscalls: a whole value of the program's own sysvar type.
    fn whole_sysvar<T: DeserializeOwned>(id: &Pubkey, var_addr: *mut u8) -> u64 {
        let Some(value) = Self::sysvar_bytes(id).and_then(|bytes| bincode::deserialize::<T>(&bytes).ok()) else {
            return UNSUPPORTED_SYSVAR;
        };
        // SAFETY: the caller passes a pointer to an uninitialised `T`.
        unsafe { std::ptr::write(var_addr as *mut T, value) };
        SUCCESS
    }
}

impl program_stubs::SyscallStubs for RuntimeStubs {
    fn sol_log(&self, message: &str) {
        let invoke_context = active_context();
        ic_msg!(invoke_context, "Program log: {}", message);
    }

    fn sol_log_data(&self, fields: &[&[u8]]) {
        let invoke_context = active_context();
        stable_log::program_data(&invoke_context.get_log_collector(), fields);
    }

    fn sol_log_compute_units(&self) {
        let invoke_context = active_context();
        let remaining = invoke_context.get_remaining();
        ic_msg!(invoke_context, "Program consumption: {} units remaining", remaining);
    }

    fn sol_remaining_compute_units(&self) -> u64 {
        active_context().get_remaining()
    }

    fn sol_invoke_signed(
        &self,
        instruction: &Instruction,
        account_infos: &[AccountInfo],
        signers_seeds: &[&[&[u8]]],
    ) -> Result<(), ProgramError> {
        invoke_signed(instruction, account_infos, signers_seeds)
    }

    fn sol_get_sysvar(&self, sysvar_id: *const u8, var_addr: *mut u8, offset: u64, length: u64) -> u64 {
        // SAFETY: the caller passes the address of a 32-byte sysvar id.
        let id = unsafe { *(sysvar_id as *const Pubkey) };
        Self::copy_sysvar(&id, var_addr, offset, length)
    }

    fn sol_get_clock_sysvar(&self, var_addr: *mut u8) -> u64 {
        Self::whole_sysvar::<Clock>(&solana_sysvar::clock::ID, var_addr)
    }

    fn sol_get_rent_sysvar(&self, var_addr: *mut u8) -> u64 {
        Self::whole_sysvar::<Rent>(&solana_sysvar::rent::ID, var_addr)
    }

    fn sol_get_epoch_schedule_sysvar(&self, var_addr: *mut u8) -> u64 {
        Self::whole_sysvar::<EpochSchedule>(&solana_sysvar::epoch_schedule::ID, var_addr)
    }

    fn sol_get_epoch_rewards_sysvar(&self, var_addr: *mut u8) -> u64 {
        Self::whole_sysvar::<EpochRewards>(&solana_sysvar::epoch_rewards::ID, var_addr)
    }

    fn sol_get_last_restart_slot(&self, var_addr: *mut u8) -> u64 {
        Self::whole_sysvar::<LastRestartSlot>(&solana_sysvar::last_restart_slot::ID, var_addr)
    }

    fn sol_get_return_data(&self) -> Option<(Pubkey, Vec<u8>)> {
        let (program_id, data) = active_context().transaction_context.get_return_data();
        Some((*program_id, data.to_vec()))
    }

    fn sol_set_return_data(&self, data: &[u8]) {
        let invoke_context = active_context();
        let caller = invoke_context
            .transaction_context
            .get_current_instruction_context()
            .and_then(|context| context.get_program_key().copied());
        if let Ok(caller) = caller {
            // Oversized data is refused by the runtime exactly as the syscall would refuse it.
            let _ = invoke_context
                .transaction_context
                .set_return_data(caller, data.to_vec());
        }
    }

    fn sol_get_stack_height(&self) -> u64 {
        active_context().get_stack_height() as u64
    }
}

/// Cross-program invocation from native code: hand the caller's pending account changes to the
/// runtime, run the callee through the real instruction processor, then hand the callee's
/// changes back to the caller's account infos.
fn invoke_signed(
    instruction: &Instruction,
    account_infos: &[AccountInfo],
    signers_seeds: &[&[&[u8]]],
) -> Result<(), ProgramError> {
    let invoke_context = active_context();
    let caller = invoke_context
        .transaction_context
        .get_current_instruction_context()
        .and_then(|context| context.get_program_key().copied())
        .map_err(program_error)?;
    let signers = signers_seeds
        .iter()
        .map(|seeds| Pubkey::create_program_address(seeds, &caller))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ProgramError::InvalidSeeds)?;

    invoke_context
        .prepare_next_cpi_instruction(instruction.clone(), &signers)
        .map_err(program_error)?;

    let writable = push_caller_changes(invoke_context, account_infos)
        .map_err(program_error)?;

    let mut units = 0;
    let result = invoke_context.process_instruction(&mut units, &mut ExecuteTimings::default());
    if let Err(error) = result {
        ic_msg!(invoke_context, "Program {} CPI failed: {}", instruction.program_id, error);
        return Err(program_error(error));
    }

    pull_callee_changes(invoke_context, account_infos, &writable)
        .map_err(program_error)
}

/// Before the callee runs: the transaction's copy of every account it will see takes the values
/// the caller holds in its account infos. Returns (transaction index, account info index) of
/// the accounts the callee may write.
fn push_caller_changes(
    invoke_context: &mut InvokeContext,
    account_infos: &[AccountInfo],
) -> Result<Vec<(u16, usize)>, InstructionError> {
    let transaction_context = &invoke_context.transaction_context;
    let caller_context = transaction_context.get_current_instruction_context()?;
    let callee_context = transaction_context.get_next_instruction_context()?;
    let mut writable = Vec::new();
    for callee_account in callee_context.instruction_accounts() {
        let index_in_transaction = callee_account.index_in_transaction;
        let key = transaction_context.get_key_of_account_at_index(index_in_transaction)?;
        let info_index = account_infos
            .iter()
            .position(|info| info.key == key)
            .ok_or(InstructionError::MissingAccount)?;
        let info = &account_infos[info_index];
        let index_in_caller = caller_context.get_index_of_account_in_instruction(index_in_transaction)?;
        let mut account = caller_context.try_borrow_instruction_account(index_in_caller)?;
        take_info_state(&mut account, info)?;
        if callee_account.is_writable() {
            writable.push((index_in_transaction, info_index));
        }
    }
    Ok(writable)
}

/// After the callee returns: the caller's account infos take the values the callee left.
fn pull_callee_changes(
    invoke_context: &mut InvokeContext,
    account_infos: &[AccountInfo],
    writable: &[(u16, usize)],
) -> Result<(), InstructionError> {
    let caller_context = invoke_context
        .transaction_context
        .get_current_instruction_context()?;
    for &(index_in_transaction, info_index) in writable {
        let index_in_caller = caller_context.get_index_of_account_in_instruction(index_in_transaction)?;
        let account = caller_context.try_borrow_instruction_account(index_in_caller)?;
        let info = &account_infos[info_index];
        **info
            .try_borrow_mut_lamports()
            .map_err(|_| InstructionError::AccountBorrowFailed)? = account.get_lamports();
        if info.owner != account.get_owner() {
            // The System Program's `assign` during a CPI is how an owner legitimately changes.
            info.assign(account.get_owner());
        }
        let new_data = account.get_data();
        if info.data_len() != new_data.len() {
            info.resize(new_data.len())
                .map_err(|error| InstructionError::from(u64::from(error)))?;
        }
        info.try_borrow_mut_data()
            .map_err(|_| InstructionError::AccountBorrowFailed)?
            .copy_from_slice(new_data);
    }
    Ok(())
}
