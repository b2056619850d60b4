//! payment_ledger executed for real: LiteSVM (the Agave SVM) runs the program as a native builtin,
//! SPL Token runs as its on-chain BPF build, every transaction is signed and sig-verified.

use anchor_lang::{solana_program::pubkey::Pubkey, AccountDeserialize, Space};
use ledger_runtime::{
    client::{open_invocation_ix, record_attested_payment_ix, record_payment_ix, Transfer},
    address::{associated_token_address, invocation_address, payer_state_address},
    Executed, Ledger, LedgerSetup,
};
use litesvm::types::FailedTransactionMetadata;
use payment_ledger::{
    Invocation, InvocationOpened, LedgerError, OpenInvocationArgs, PayerState, PaymentRecorded,
    Protocol, Rail, RecordAttestedPaymentArgs, RecordPaymentArgs,
};
use solana_instruction::error::InstructionError;
use solana_keypair::Keypair;
use solana_signer::Signer;
use solana_transaction_error::TransactionError;

const USDC: u64 = 1_000_000;

struct World {
    ledger: Ledger,
    setup: LedgerSetup,
    agent: Keypair,
    service: Keypair,
}

impl World {
    /// A ledger with an agent wallet holding `agent_units` and a service with a token account.
    fn new(agent_units: u64) -> World {
        let mut ledger = Ledger::new();
        let setup = ledger.bootstrap(1_000_000 * USDC).expect("bootstrap");
        let (agent, service) = (Keypair::new(), Keypair::new());
        ledger.airdrop(&agent.pubkey(), 1_000_000_000).unwrap();
        let agent_token = ledger.create_token_account(&setup.authority, &agent.pubkey(), &setup.mint).unwrap();
        ledger.create_token_account(&setup.authority, &service.pubkey(), &setup.mint).unwrap();
        if agent_units > 0 {
            ledger.mint_to(&setup.mint_authority, &setup.mint, &agent_token, agent_units).unwrap();
        }
        World { ledger, setup, agent, service }
    }

    fn agent_balance(&self) -> u64 {
        self.balance_of(&self.agent.pubkey())
    }

    fn service_balance(&self) -> u64 {
        self.balance_of(&self.service.pubkey())
    }

    fn balance_of(&self, owner: &Pubkey) -> u64 {
        self.ledger
            .token_balance(&associated_token_address(owner, &self.setup.mint))
            .expect("token account exists")
    }

    fn transfer(&self) -> Transfer {
        Transfer::between(&self.agent.pubkey(), &self.service.pubkey(), &self.setup.mint)
    }

    fn pay(&mut self, args: RecordPaymentArgs, transfer: Option<Transfer>, invocation: Option<Pubkey>) -> Result<Executed, FailedTransactionMetadata> {
        let ix = record_payment_ix(
            &self.setup.authority.pubkey(),
            &self.agent.pubkey(),
            &self.service.pubkey(),
            args,
            transfer,
            invocation,
        );
        let (authority, agent) = (self.setup.authority.insecure_clone(), self.agent.insecure_clone());
        self.ledger.send(&[ix], &[&authority, &agent])
    }

    fn pay_atomic(&mut self, payment_id: u64, amount: u64) -> Result<Executed, FailedTransactionMetadata> {
        let transfer = self.transfer();
        self.pay(x402(payment_id, amount), Some(transfer), None)
    }

    fn open_invocation(&mut self, parent_signature: [u8; 64], budget: u64) -> Result<Pubkey, FailedTransactionMetadata> {
        let invoker = Keypair::new();
        let args = OpenInvocationArgs { parent_signature, sub_agent: self.agent.pubkey(), budget };
        let ix = open_invocation_ix(&self.setup.authority.pubkey(), &invoker.pubkey(), args);
        let authority = self.setup.authority.insecure_clone();
        let executed = self.ledger.send(&[ix], &[&authority, &invoker])?;
        let opened = executed.events::<InvocationOpened>();
        assert_eq!(opened.len(), 1);
        assert_eq!(opened[0].budget, budget);
        assert_eq!(opened[0].invoker, invoker.pubkey());
        Ok(opened[0].invocation)
    }

    fn invocation(&self, address: &Pubkey) -> Invocation {
        let account = self.ledger.svm.get_account(address).expect("invocation exists");
        Invocation::try_deserialize(&mut account.data.as_slice()).unwrap()
    }

    fn payer_state(&self) -> Option<PayerState> {
        let account = self.ledger.svm.get_account(&payer_state_address(&self.agent.pubkey()))?;
        Some(PayerState::try_deserialize(&mut account.data.as_slice()).unwrap())
    }

    /// Everything a rejected payment must leave untouched.
    fn snapshot(&self) -> (u64, u64, Option<(u64, u64)>) {
        let state = self.payer_state().map(|s| (s.highest_payment_id, s.payment_count));
        (self.agent_balance(), self.service_balance(), state)
    }
}

fn x402(payment_id: u64, amount: u64) -> RecordPaymentArgs {
    RecordPaymentArgs {
        payment_id,
        amount,
        protocol: Protocol::X402,
        rail: Rail::Stablecoin,
        endpoint_hash: endpoint_hash("api.example.com/v1/search"),
        settlement_reference: None,
    }
}

fn endpoint_hash(endpoint: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(endpoint.as_bytes()).into()
}

fn signature_bytes(seed: u8) -> [u8; 64] {
    let mut bytes = [0u8; 64];
    bytes.iter_mut().enumerate().for_each(|(i, b)| *b = seed.wrapping_add(i as u8));
    bytes
}

fn program_error(failed: &FailedTransactionMetadata) -> Option<u32> {
    match failed.err {
        TransactionError::InstructionError(_, InstructionError::Custom(code)) => Some(code),
        _ => None,
    }
}

fn ledger_error(error: LedgerError) -> u32 {
    u32::from(error)
}

#[test]
fn an_atomic_x402_payment_moves_the_tokens_and_records_the_payment_in_one_transaction() {
    let mut world = World::new(10 * USDC);
    let executed = world.pay_atomic(1, 2_500_000).expect("payment lands");

    assert_eq!(world.agent_balance(), 7_500_000);
    assert_eq!(world.service_balance(), 2_500_000);

    let events = executed.events::<PaymentRecorded>();
    assert_eq!(events.len(), 1, "exactly one PaymentRecorded event");
    let event = &events[0];
    assert_eq!(event.payer, world.agent.pubkey());
    assert_eq!(event.payee, world.service.pubkey());
    assert_eq!(event.amount, 2_500_000);
    assert_eq!(event.payment_id, 1);
    assert_eq!(event.mint, world.setup.mint);
    assert_eq!(event.protocol, Protocol::X402);
    assert_eq!(event.rail, Rail::Stablecoin);
    assert!(event.atomic);
    assert_eq!(event.endpoint_hash, endpoint_hash("api.example.com/v1/search"));
    assert_eq!(event.settlement_reference, None);
    assert_eq!(event.parent, None);

    // The transfer ran inside the same instruction: SPL Token appears as an inner instruction.
    let token_program_index = executed
        .account_keys
        .iter()
        .position(|key| *key == spl_token_interface::ID)
        .expect("token program referenced") as u8;
    let inner = executed.meta.inner_instructions.iter().flatten();
    let transfers: Vec<_> = inner
        .filter(|ix| ix.instruction.program_id_index == token_program_index)
        .collect();
    assert_eq!(transfers.len(), 1);
    assert_eq!(transfers[0].instruction.data[0], 12, "TransferChecked");

    let state = world.payer_state().expect("payer state created");
    assert_eq!(state.payer, world.agent.pubkey());
    assert_eq!((state.highest_payment_id, state.payment_count), (1, 1));
}

#[test]
fn a_card_rail_payment_is_recorded_without_moving_tokens() {
    let mut world = World::new(5 * USDC);
    let args = RecordPaymentArgs { protocol: Protocol::Mpp, rail: Rail::Card, ..x402(1, 3 * USDC) };
    let executed = world.pay(args, None, None).expect("card payment recorded");

    assert_eq!((world.agent_balance(), world.service_balance()), (5 * USDC, 0));
    let event = &executed.events::<PaymentRecorded>()[0];
    assert_eq!((event.protocol, event.rail, event.atomic), (Protocol::Mpp, Rail::Card, false));
    assert_eq!(event.amount, 3 * USDC);
}

#[test]
fn a_payment_settled_elsewhere_is_recorded_with_its_settlement_reference() {
    let mut world = World::new(5 * USDC);
    let reference = signature_bytes(9);
    let args = RecordPaymentArgs { settlement_reference: Some(reference), ..x402(1, USDC) };
    // Token accounts may be passed; with a settlement reference the program must not use them.
    let transfer = world.transfer();
    let executed = world.pay(args, Some(transfer), None).expect("recorded");

    assert_eq!((world.agent_balance(), world.service_balance()), (5 * USDC, 0));
    let event = &executed.events::<PaymentRecorded>()[0];
    assert!(!event.atomic);
    assert_eq!(event.settlement_reference, Some(reference));
}

#[test]
fn payments_under_an_invocation_carry_its_parent_link_and_add_to_its_spend() {
    let mut world = World::new(10 * USDC);
    let parent = signature_bytes(1);
    let invocation = world.open_invocation(parent, 3 * USDC).unwrap();
    assert_eq!(invocation, invocation_address(&parent, &world.agent.pubkey()));

    let transfer = world.transfer();
    let first = world.pay(x402(1, USDC), Some(transfer), Some(invocation)).unwrap();
    let second = world.pay(x402(2, 500_000), Some(transfer), Some(invocation)).unwrap();

    let link = first.events::<PaymentRecorded>()[0].parent.clone().expect("parent link");
    assert_eq!(link.invocation, invocation);
    assert_eq!(link.parent_signature, parent);
    assert_eq!((link.budget, link.spent), (3 * USDC, USDC));
    let link = second.events::<PaymentRecorded>()[0].parent.clone().unwrap();
    assert_eq!(link.spent, 1_500_000);

    let state = world.invocation(&invocation);
    assert_eq!((state.spent, state.payment_count), (1_500_000, 2));
    assert_eq!(state.parent_signature, parent);
    assert_eq!(state.sub_agent, world.agent.pubkey());
}

#[test]
fn a_payment_reaching_the_budget_exactly_passes_and_one_unit_over_fails_on_chain() {
    let mut world = World::new(10 * USDC);
    let invocation = world.open_invocation(signature_bytes(2), 2 * USDC).unwrap();
    let transfer = world.transfer();

    world.pay(x402(1, 1_500_000), Some(transfer), Some(invocation)).unwrap();
    world.pay(x402(2, 500_000), Some(transfer), Some(invocation)).expect("exactly at the cap passes");
    assert_eq!(world.invocation(&invocation).spent, 2 * USDC);

    let before = world.snapshot();
    let failed = world.pay(x402(3, 1), Some(transfer), Some(invocation)).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InvocationBudgetExceeded)));
    assert_eq!(world.snapshot(), before);
    assert_eq!(world.invocation(&invocation).spent, 2 * USDC);
}

#[test]
fn a_card_payment_is_capped_by_the_invocation_budget_too() {
    let mut world = World::new(0);
    let invocation = world.open_invocation(signature_bytes(3), USDC).unwrap();
    let card = RecordPaymentArgs { rail: Rail::Card, protocol: Protocol::Mpp, ..x402(1, USDC + 1) };
    let failed = world.pay(card, None, Some(invocation)).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InvocationBudgetExceeded)));
}

#[test]
fn only_the_invocation_sub_agent_may_spend_under_it() {
    let mut world = World::new(10 * USDC);
    let invocation = world.open_invocation(signature_bytes(4), 5 * USDC).unwrap();
    // A different agent pays under someone else's invocation.
    let stranger = Keypair::new();
    world.ledger.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    let args = RecordPaymentArgs { rail: Rail::Card, ..x402(1, USDC) };
    let ix = record_payment_ix(
        &world.setup.authority.pubkey(),
        &stranger.pubkey(),
        &world.service.pubkey(),
        args,
        None,
        Some(invocation),
    );
    let failed = world.ledger.send(&[ix], &[&world.setup.authority, &stranger]).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InvocationPayerMismatch)));
    assert_eq!(world.invocation(&invocation).spent, 0);
}

#[test]
fn a_record_signed_by_anyone_but_the_service_authority_is_rejected_without_state_change() {
    let mut world = World::new(10 * USDC);
    let impostor = Keypair::new();
    world.ledger.airdrop(&impostor.pubkey(), 1_000_000_000).unwrap();
    let before = world.snapshot();
    let ix = record_payment_ix(
        &impostor.pubkey(),
        &world.agent.pubkey(),
        &world.service.pubkey(),
        x402(1, USDC),
        Some(world.transfer()),
        None,
    );
    let failed = world.ledger.send(&[ix], &[&impostor, &world.agent]).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::Unauthorized)));
    assert_eq!(world.snapshot(), before);
}

#[test]
fn a_payment_the_payer_did_not_sign_is_rejected_without_state_change() {
    let mut world = World::new(10 * USDC);
    let before = world.snapshot();
    let mut ix = record_payment_ix(
        &world.setup.authority.pubkey(),
        &world.agent.pubkey(),
        &world.service.pubkey(),
        x402(1, USDC),
        Some(world.transfer()),
        None,
    );
    // Present the payer as a non-signer: the authority alone cannot spend the agent's tokens.
    ix.accounts.iter_mut().filter(|m| m.pubkey == world.agent.pubkey()).for_each(|m| m.is_signer = false);
    let failed = world.ledger.send(&[ix], &[&world.setup.authority]).unwrap_err();
    assert_eq!(
        failed.err,
        TransactionError::InstructionError(0, InstructionError::Custom(anchor_lang::error::ErrorCode::AccountNotSigner as u32))
    );
    assert_eq!(world.snapshot(), before);
}

#[test]
fn a_payment_in_another_mint_is_rejected_without_state_change() {
    let mut world = World::new(10 * USDC);
    let other_authority = Keypair::new();
    world.ledger.airdrop(&other_authority.pubkey(), 1_000_000_000).unwrap();
    let other_mint = world.ledger.create_mint(&other_authority, 6).unwrap();
    let agent_other = world.ledger.create_token_account(&world.setup.authority, &world.agent.pubkey(), &other_mint).unwrap();
    world.ledger.create_token_account(&world.setup.authority, &world.service.pubkey(), &other_mint).unwrap();
    world.ledger.mint_to(&other_authority, &other_mint, &agent_other, 10 * USDC).unwrap();

    let before = world.snapshot();
    let transfer = Transfer::between(&world.agent.pubkey(), &world.service.pubkey(), &other_mint);
    let failed = world.pay(x402(1, USDC), Some(transfer), None).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::WrongMint)));
    assert_eq!(world.snapshot(), before);
    assert_eq!(world.ledger.token_balance(&agent_other), Some(10 * USDC));
}

#[test]
fn a_duplicate_payment_id_is_rejected_without_state_change() {
    let mut world = World::new(10 * USDC);
    world.pay_atomic(7, USDC).unwrap();
    let before = world.snapshot();
    // A different transaction (other amount) reusing the id.
    let failed = world.pay_atomic(7, 2 * USDC).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::DuplicatePaymentId)));
    assert_eq!(world.snapshot(), before);
    // Older ids still inside the window remain usable exactly once.
    world.pay_atomic(3, USDC).unwrap();
    assert_eq!(program_error(&world.pay_atomic(3, USDC).unwrap_err()), Some(ledger_error(LedgerError::DuplicatePaymentId)));
}

#[test]
fn a_payment_above_the_balance_is_rejected_without_state_change() {
    let mut world = World::new(USDC);
    let before = world.snapshot();
    let failed = world.pay_atomic(1, USDC + 1).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InsufficientFunds)));
    assert_eq!(world.snapshot(), before);
    world.pay_atomic(1, USDC).expect("the whole balance can be paid");
    assert_eq!(world.agent_balance(), 0);
}

#[test]
fn zero_amounts_and_zero_payment_ids_are_rejected() {
    let mut world = World::new(USDC);
    let failed = world.pay_atomic(1, 0).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::ZeroAmount)));
    let failed = world.pay_atomic(0, 1).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InvalidPaymentId)));
}

#[test]
fn an_atomic_payment_without_token_accounts_is_rejected() {
    let mut world = World::new(USDC);
    let failed = world.pay(x402(1, 1), None, None).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::MissingTransferAccounts)));
}

#[test]
fn an_invocation_cannot_be_opened_twice_for_the_same_parent_and_sub_agent() {
    let mut world = World::new(0);
    world.open_invocation(signature_bytes(5), USDC).unwrap();
    // Same parent and sub-agent: the PDA exists, `init` refuses (System Program: account in use).
    let args = OpenInvocationArgs { parent_signature: signature_bytes(5), sub_agent: world.agent.pubkey(), budget: 2 * USDC };
    let invoker = Keypair::new();
    let ix = open_invocation_ix(&world.setup.authority.pubkey(), &invoker.pubkey(), args);
    assert!(world.ledger.send(&[ix], &[&world.setup.authority, &invoker]).is_err());
    let invocation = invocation_address(&signature_bytes(5), &world.agent.pubkey());
    assert_eq!(world.invocation(&invocation).budget, USDC);
}

#[test]
fn a_zero_budget_invocation_is_rejected() {
    let mut world = World::new(0);
    let failed = world.open_invocation(signature_bytes(6), 0).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::ZeroBudget)));
}

#[test]
fn the_program_logs_like_an_sbf_program() {
    let mut world = World::new(USDC);
    let executed = world.pay_atomic(1, 1).unwrap();
    let logs = &executed.meta.logs;
    let program = payment_ledger::ID.to_string();
    assert_eq!(logs.first(), Some(&format!("Program {program} invoke [1]")), "{logs:#?}");
    assert_eq!(logs.get(1), Some(&"Program log: Instruction: RecordPayment".to_string()), "{logs:#?}");
    assert!(logs.contains(&format!("Program {} invoke [2]", spl_token_interface::ID)), "{logs:#?}");
    assert!(logs.contains(&format!("Program {program} invoke [2]")), "event CPI: {logs:#?}");
    assert_eq!(logs.last(), Some(&format!("Program {program} success")), "{logs:#?}");
}

#[test]
fn a_failed_instruction_logs_its_program_error_code_for_clients_to_decode() {
    let mut world = World::new(USDC);
    let failed = world.pay_atomic(1, 0).unwrap_err();
    let code = ledger_error(LedgerError::ZeroAmount);
    let expected = format!("Program {} failed: custom program error: {:#x}", payment_ledger::ID, code);
    assert!(failed.meta.logs.contains(&expected), "{:#?}", failed.meta.logs);
    let anchor_line = format!("Program log: AnchorError thrown in programs/payment_ledger/src/instructions/record_payment.rs");
    assert!(
        failed.meta.logs.iter().any(|line| line.starts_with(&anchor_line) && line.contains("Error Code: ZeroAmount")),
        "{:#?}",
        failed.meta.logs
    );
}

#[test]
fn the_history_keeps_included_failures_with_their_status_and_balances() {
    let mut world = World::new(USDC);
    let recorded = world.ledger.history.len();
    world.pay_atomic(1, 400_000).unwrap();
    world.pay_atomic(2, 0).unwrap_err();

    let history = &world.ledger.history[recorded..];
    assert_eq!(history.len(), 2, "a failed instruction is still included, with its fee");
    assert!(history[0].status.is_ok());
    let token = history[0]
        .post_token_balances
        .iter()
        .find(|b| b.owner == world.service.pubkey())
        .expect("payee token balance reported");
    assert_eq!((token.amount, token.decimals, token.mint), (400_000, 6, world.setup.mint));
    let pre = history[0].pre_token_balances.iter().find(|b| b.owner == world.agent.pubkey()).unwrap();
    assert_eq!(pre.amount, USDC);
    assert_eq!(
        history[1].status,
        Err(TransactionError::InstructionError(0, InstructionError::Custom(ledger_error(LedgerError::ZeroAmount))))
    );
    let fee_payer_paid = history[1].pre_balances[0] - history[1].post_balances[0];
    assert_eq!(fee_payer_paid, history[1].meta.fee);
    assert!(fee_payer_paid > 0);
}

/// The lamport cost of recording payments, as docs/ledger.md states it: an agent's first
/// payment also pays the rent of its PayerState (185 bytes); later payments pay only the two
/// signature fees. No account is created per payment.
#[test]
fn a_payment_costs_two_signature_fees_and_an_agent_pays_state_rent_once() {
    let mut world = World::new(10 * USDC);
    let authority = world.setup.authority.pubkey();
    let lamports = |world: &World| world.ledger.svm.get_balance(&authority).unwrap();

    let before = lamports(&world);
    world.pay_atomic(1, USDC).unwrap();
    let first = before - lamports(&world);
    let state_rent = world.ledger.svm.minimum_balance_for_rent_exemption(8 + PayerState::INIT_SPACE);
    assert_eq!(8 + PayerState::INIT_SPACE, 185);
    assert_eq!(first, 2 * 5_000 + state_rent);

    let before = lamports(&world);
    world.pay_atomic(2, USDC).unwrap();
    assert_eq!(before - lamports(&world), 2 * 5_000);
    assert_eq!(8 + Invocation::INIT_SPACE, 165);
    assert_eq!(8 + payment_ledger::Config::INIT_SPACE, 106);
    println!(
        "payer state rent {state_rent}, invocation rent {}, config rent {}",
        world.ledger.svm.minimum_balance_for_rent_exemption(8 + Invocation::INIT_SPACE),
        world.ledger.svm.minimum_balance_for_rent_exemption(8 + payment_ledger::Config::INIT_SPACE)
    );
}

// ---- attested records: a payer the gateway does not hold paid in its own transaction ----------

fn attested(payment_id: u64, amount: u64, reference: [u8; 64]) -> RecordAttestedPaymentArgs {
    RecordAttestedPaymentArgs {
        payment_id,
        amount,
        protocol: Protocol::X402,
        endpoint_hash: endpoint_hash("api.example.com/v1/search"),
        settlement_reference: reference,
    }
}

impl World {
    /// The authority attests a payment by `agent` (here a wallet that signs nothing) to the service.
    fn attest(&mut self, signer: &Keypair, args: RecordAttestedPaymentArgs) -> Result<Executed, FailedTransactionMetadata> {
        let ix = record_attested_payment_ix(&signer.pubkey(), &self.agent.pubkey(), &self.service.pubkey(), args);
        let signer = signer.insecure_clone();
        self.ledger.send(&[ix], &[&signer])
    }

    fn authority(&self) -> Keypair {
        self.setup.authority.insecure_clone()
    }
}

#[test]
fn an_attested_payment_is_recorded_with_its_reference_signed_by_the_authority_alone() {
    let mut world = World::new(5 * USDC);
    let reference = signature_bytes(20);
    let authority = world.authority();
    let executed = world.attest(&authority, attested(1, 2 * USDC, reference)).expect("recorded");

    // Nothing moves: the referenced transaction did that.
    assert_eq!((world.agent_balance(), world.service_balance()), (5 * USDC, 0));
    let events = executed.events::<PaymentRecorded>();
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!((event.payer, event.payee), (world.agent.pubkey(), world.service.pubkey()));
    assert_eq!((event.amount, event.payment_id, event.mint), (2 * USDC, 1, world.setup.mint));
    assert_eq!((event.protocol, event.rail, event.atomic), (Protocol::X402, Rail::Stablecoin, false));
    assert_eq!(event.settlement_reference, Some(reference));
    assert_eq!(event.parent, None);
    let state = world.payer_state().expect("payer state created for the attested payer");
    assert_eq!((state.payer, state.highest_payment_id, state.payment_count), (world.agent.pubkey(), 1, 1));
}

#[test]
fn an_attested_payment_signed_by_anyone_but_the_authority_is_rejected_without_state_change() {
    let mut world = World::new(USDC);
    let impostor = Keypair::new();
    world.ledger.airdrop(&impostor.pubkey(), 1_000_000_000).unwrap();
    let before = world.snapshot();
    let failed = world.attest(&impostor, attested(1, USDC, signature_bytes(21))).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::Unauthorized)));
    assert_eq!(world.snapshot(), before);
}

#[test]
fn an_attested_payment_without_a_settlement_reference_is_rejected() {
    let mut world = World::new(USDC);
    let authority = world.authority();
    let before = world.snapshot();
    let failed = world.attest(&authority, attested(1, USDC, [0u8; 64])).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::MissingSettlementReference)));
    assert_eq!(world.snapshot(), before);
}

#[test]
fn an_attested_payment_of_zero_or_with_id_zero_is_rejected() {
    let mut world = World::new(USDC);
    let authority = world.authority();
    let failed = world.attest(&authority, attested(1, 0, signature_bytes(22))).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::ZeroAmount)));
    let failed = world.attest(&authority, attested(0, 1, signature_bytes(22))).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::InvalidPaymentId)));
    assert_eq!(world.payer_state().map(|s| s.payment_count), None);
}

#[test]
fn an_attested_payment_id_is_used_once_and_shares_the_payers_window() {
    let mut world = World::new(10 * USDC);
    let authority = world.authority();
    world.attest(&authority, attested(4, USDC, signature_bytes(23))).unwrap();
    let before = world.snapshot();
    let failed = world.attest(&authority, attested(4, USDC, signature_bytes(24))).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::DuplicatePaymentId)));
    assert_eq!(world.snapshot(), before);
    // One window per payer: a signed record cannot reuse an attested id either.
    let failed = world.pay_atomic(4, USDC).unwrap_err();
    assert_eq!(program_error(&failed), Some(ledger_error(LedgerError::DuplicatePaymentId)));
    world.pay_atomic(5, USDC).expect("the next id is free");
}

#[test]
fn an_attested_payment_costs_one_signature_fee_after_the_payer_state_exists() {
    let mut world = World::new(USDC);
    let authority = world.authority();
    let lamports = |world: &World| world.ledger.svm.get_balance(&authority.pubkey()).unwrap();
    let before = lamports(&world);
    world.attest(&authority, attested(1, 1, signature_bytes(25))).unwrap();
    let state_rent = world.ledger.svm.minimum_balance_for_rent_exemption(8 + PayerState::INIT_SPACE);
    assert_eq!(before - lamports(&world), 5_000 + state_rent);
    let before = lamports(&world);
    world.attest(&authority, attested(2, 1, signature_bytes(26))).unwrap();
    assert_eq!(before - lamports(&world), 5_000);
}
