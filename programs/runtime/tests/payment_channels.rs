//! Payment channels of payment_ledger, executed for real: the payer escrows a deposit, signs
//! cumulative vouchers with its ed25519 key, the payee settles them through the ed25519
//! precompile (LiteSVM's own, enabled with its `precompiles` feature), and the channel ends with a
//! refund. Every test checks that no token is created or lost: payer + escrow + payee always hold
//! what the payer was given, and the channel's books (deposit = settled + escrow) always agree.

use anchor_lang::{solana_program::pubkey::Pubkey, AccountDeserialize, Space};
use ledger_runtime::{
    address::associated_token_address,
    channel::{
        close_channel_ix, compute_unit_limit_ix, ed25519_verify_ix, force_close_channel_ix, open_channel_ix,
        refund_channel_ix, settle_channel_ix, top_up_channel_ix, Charge, ChannelKeys, VoucherBook,
    },
    client::open_invocation_ix,
    Executed, Ledger, LedgerSetup,
};
use litesvm::types::FailedTransactionMetadata;
use payment_ledger::{
    Channel, ChannelClosed, ChannelCloseRequested, ChannelOpened, ChannelSettled, ChannelToppedUp, InvocationOpened,
    LedgerError, OpenChannelArgs, OpenInvocationArgs, PaymentRecorded, Protocol, Rail, SettleChannelArgs,
};
use solana_instruction::{error::InstructionError, Instruction};
use solana_keypair::Keypair;
use solana_message::Message;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

const USDC: u64 = 1_000_000;
/// What the agent is given at the start of every test: the total every balance check sums to.
const AGENT_FUNDS: u64 = 100 * USDC;
const HOUR: i64 = 3_600;
const WITHDRAW_DELAY: i64 = 600;
/// The largest transaction a validator accepts (PACKET_DATA_SIZE).
const PACKET_DATA_SIZE: usize = 1_232;
const SIGNATURE_FEE: u64 = 5_000;

struct World {
    ledger: Ledger,
    setup: LedgerSetup,
    agent: Keypair,
    service: Keypair,
    keys: ChannelKeys,
    book: VoucherBook,
    next_payment_id: u64,
}

fn endpoint_hash(endpoint: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(endpoint.as_bytes()).into()
}

fn search() -> [u8; 32] {
    endpoint_hash("api.example.com/v1/search")
}

fn quote() -> [u8; 32] {
    endpoint_hash("api.example.com/v1/quote")
}

fn program_error(failed: &FailedTransactionMetadata) -> Option<u32> {
    match failed.err {
        TransactionError::InstructionError(_, InstructionError::Custom(code)) => Some(code),
        _ => None,
    }
}

fn code(error: LedgerError) -> Option<u32> {
    Some(u32::from(error))
}

impl World {
    /// A ledger, an agent holding `AGENT_FUNDS`, a service wallet with an empty token account and
    /// (not yet opened) channel keys between them.
    fn new() -> World {
        let mut ledger = Ledger::new();
        let setup = ledger.bootstrap(1_000_000 * USDC).expect("bootstrap");
        let (agent, service) = (Keypair::new(), Keypair::new());
        for wallet in [&agent, &service] {
            ledger.airdrop(&wallet.pubkey(), 1_000_000_000).unwrap();
            ledger.create_token_account(&setup.authority, &wallet.pubkey(), &setup.mint).unwrap();
        }
        let agent_token = associated_token_address(&agent.pubkey(), &setup.mint);
        ledger.mint_to(&setup.mint_authority, &setup.mint, &agent_token, AGENT_FUNDS).unwrap();
        let keys = ChannelKeys::new(&agent.pubkey(), &service.pubkey(), &setup.mint, [7u8; 32]);
        let book = VoucherBook::new(keys.address, 0);
        World { ledger, setup, agent, service, keys, book, next_payment_id: 1 }
    }

    /// `new` with a channel of `deposit` open for an hour.
    fn with_channel(deposit: u64) -> World {
        let mut world = World::new();
        world.open(deposit).expect("channel opens");
        world
    }

    fn now(&self) -> i64 {
        self.ledger.svm.get_sysvar::<solana_clock::Clock>().unix_timestamp
    }

    /// Moves the chain's clock (and slot) forward.
    fn advance(&mut self, seconds: i64) {
        let mut clock = self.ledger.svm.get_sysvar::<solana_clock::Clock>();
        clock.unix_timestamp += seconds;
        clock.slot += (seconds as u64).max(1) * 2;
        self.ledger.svm.set_sysvar(&clock);
        self.ledger.svm.expire_blockhash();
    }

    fn authority(&self) -> Keypair {
        self.setup.authority.insecure_clone()
    }

    fn args(&self, deposit: u64) -> OpenChannelArgs {
        OpenChannelArgs {
            channel_id: self.keys.channel_id,
            deposit,
            expires_at: self.now() + HOUR,
            withdraw_delay: WITHDRAW_DELAY,
            protocol: Protocol::Mpp,
        }
    }

    fn open(&mut self, deposit: u64) -> Result<Executed, FailedTransactionMetadata> {
        let args = self.args(deposit);
        self.open_with(args, None)
    }

    fn open_with(&mut self, args: OpenChannelArgs, invocation: Option<Pubkey>) -> Result<Executed, FailedTransactionMetadata> {
        let ix = open_channel_ix(&self.setup.authority.pubkey(), &self.keys, args, invocation);
        let (authority, agent) = (self.authority(), self.agent.insecure_clone());
        let executed = self.ledger.send(&[ix], &[&authority, &agent])?;
        let opened_slot = self.channel().expect("channel account").opened_slot;
        self.book = VoucherBook::new(self.keys.address, opened_slot);
        Ok(executed)
    }

    fn channel(&self) -> Option<Channel> {
        let account = self.ledger.svm.get_account(&self.keys.address)?;
        if account.data.is_empty() {
            return None;
        }
        Some(Channel::try_deserialize(&mut account.data.as_slice()).unwrap())
    }

    /// The payer accepts one more paid request: a new charge and the voucher covering it.
    fn charge(&mut self, amount: u64, endpoint: [u8; 32]) {
        let payment_id = self.next_payment_id;
        self.next_payment_id += 1;
        self.book.charge(Charge { payment_id, amount, endpoint_hash: endpoint });
    }

    fn charges(&mut self, amounts: &[u64]) {
        for (i, amount) in amounts.iter().enumerate() {
            self.charge(*amount, if i % 2 == 0 { search() } else { quote() });
        }
    }

    /// The transaction that settles charges `from..to` with the payer's voucher for `to`.
    fn settle_instructions(&self, settler: &Pubkey, from: usize, to: usize) -> Vec<Instruction> {
        let args = self.book.settlement(from, to);
        let signature = ed25519_verify_ix(&self.agent, &self.book.message_at(to));
        vec![compute_unit_limit_ix(1_400_000), signature, settle_channel_ix(settler, &self.keys, args, None, None)]
    }

    fn settle_range(&mut self, from: usize, to: usize) -> Result<Executed, FailedTransactionMetadata> {
        let ixs = self.settle_instructions(&self.service.pubkey(), from, to);
        let service = self.service.insecure_clone();
        self.send(&ixs, &[&service])
    }

    /// Sends and asserts the transaction fits in a packet, as a validator would require.
    fn send(&mut self, instructions: &[Instruction], signers: &[&Keypair]) -> Result<Executed, FailedTransactionMetadata> {
        let payer = signers[0].pubkey();
        let blockhash = self.ledger.svm.latest_blockhash();
        let tx = Transaction::new(signers, Message::new_with_blockhash(instructions, Some(&payer), &blockhash), blockhash);
        let size = bincode::serialize(&tx).unwrap().len();
        assert!(size <= PACKET_DATA_SIZE, "transaction of {size} bytes exceeds a packet");
        self.ledger.execute(tx.into())
    }

    fn balance(&self, owner: &Pubkey) -> u64 {
        self.ledger.token_balance(&associated_token_address(owner, &self.setup.mint)).unwrap_or(0)
    }

    fn escrow_balance(&self) -> Option<u64> {
        self.ledger.token_balance(&self.keys.escrow)
    }

    fn agent_balance(&self) -> u64 {
        self.balance(&self.agent.pubkey())
    }

    fn service_balance(&self) -> u64 {
        self.balance(&self.service.pubkey())
    }

    /// No token created or lost, and the channel's books match its escrow.
    fn assert_conserved(&self) {
        let escrow = self.escrow_balance().unwrap_or(0);
        assert_eq!(
            self.agent_balance() + escrow + self.service_balance(),
            AGENT_FUNDS,
            "payer {} + escrow {escrow} + payee {} must stay {AGENT_FUNDS}",
            self.agent_balance(),
            self.service_balance()
        );
        match self.channel() {
            Some(channel) => {
                assert_eq!(channel.deposit - channel.settled, escrow, "deposit - settled = escrow");
                assert_eq!(channel.settled, self.service_balance(), "everything settled reached the payee");
            }
            None => assert_eq!(self.escrow_balance(), None, "no escrow outlives its channel"),
        }
    }

    /// Everything a refused instruction must leave as it was.
    fn snapshot(&self) -> (u64, Option<u64>, u64, Option<(u64, u64, u64, [u8; 32], i64)>) {
        let channel = self
            .channel()
            .map(|c| (c.deposit, c.settled, c.sequence, c.charges_digest, c.close_requested_at));
        (self.agent_balance(), self.escrow_balance(), self.service_balance(), channel)
    }

    fn assert_refused(&mut self, result: Result<Executed, FailedTransactionMetadata>, expected: Option<u32>, before: &(u64, Option<u64>, u64, Option<(u64, u64, u64, [u8; 32], i64)>)) {
        let failed = result.expect_err("the instruction must be refused");
        assert_eq!(program_error(&failed), expected, "{:?}\n{:#?}", failed.err, failed.meta.logs);
        assert_eq!(&self.snapshot(), before, "a refused instruction changes nothing");
        self.assert_conserved();
    }
}

// ---- the runtime ------------------------------------------------------------------------------

#[test]
fn the_ed25519_precompile_verifies_signatures_in_our_runtime() {
    let mut world = World::new();
    let agent = world.agent.insecure_clone();
    let good = ed25519_verify_ix(&agent, b"a voucher");
    world.send(&[good], &[&agent]).expect("a valid signature passes the precompile");

    let mut bad = ed25519_verify_ix(&agent, b"a voucher");
    let last = bad.data.len() - 1;
    bad.data[last] ^= 1; // the message no longer matches the signature
    let failed = world.send(&[bad], &[&agent]).unwrap_err();
    // PrecompileError::InvalidSignature, reported for instruction 0 before any program runs.
    assert_eq!(failed.err, TransactionError::InstructionError(0, InstructionError::Custom(2)));
}

// ---- open ---------------------------------------------------------------------------------------

#[test]
fn opening_a_channel_escrows_the_deposit_bound_to_payer_payee_mint_and_expiry() {
    let mut world = World::new();
    let authority = world.setup.authority.pubkey();
    let lamports_before = world.ledger.svm.get_balance(&authority).unwrap();
    let executed = world.open(10 * USDC).expect("opens");

    assert_eq!(world.agent_balance(), AGENT_FUNDS - 10 * USDC);
    assert_eq!(world.escrow_balance(), Some(10 * USDC));
    world.assert_conserved();

    let channel = world.channel().unwrap();
    assert_eq!((channel.payer, channel.payee, channel.mint), (world.agent.pubkey(), world.service.pubkey(), world.setup.mint));
    assert_eq!((channel.deposit, channel.settled, channel.sequence, channel.last_payment_id), (10 * USDC, 0, 0, 0));
    assert_eq!(channel.expires_at, world.now() + HOUR);
    assert_eq!((channel.withdraw_delay, channel.close_requested_at), (WITHDRAW_DELAY, 0));
    assert_eq!((channel.rent_payer, channel.invocation, channel.protocol), (authority, None, Protocol::Mpp));
    assert_eq!(channel.charges_digest, world.book.start);

    let opened = executed.events::<ChannelOpened>();
    assert_eq!(opened.len(), 1);
    assert_eq!((opened[0].channel, opened[0].deposit, opened[0].expires_at), (world.keys.address, 10 * USDC, channel.expires_at));

    // The authority paid two signatures and the rent of the channel and its escrow.
    let rent = world.ledger.svm.minimum_balance_for_rent_exemption(8 + Channel::INIT_SPACE)
        + world.ledger.svm.minimum_balance_for_rent_exemption(165);
    let paid = lamports_before - world.ledger.svm.get_balance(&authority).unwrap();
    assert_eq!(paid, 2 * SIGNATURE_FEE + rent);
    println!("channel account {} bytes; channel + escrow rent {rent} lamports", 8 + Channel::INIT_SPACE);
}

#[test]
fn a_channel_in_another_mint_is_refused() {
    let mut world = World::new();
    let other_authority = Keypair::new();
    world.ledger.airdrop(&other_authority.pubkey(), 1_000_000_000).unwrap();
    let other_mint = world.ledger.create_mint(&other_authority, 6).unwrap();
    let other_token = world.ledger.create_token_account(&world.setup.authority, &world.agent.pubkey(), &other_mint).unwrap();
    world.ledger.mint_to(&other_authority, &other_mint, &other_token, 10 * USDC).unwrap();
    world.keys = ChannelKeys::new(&world.agent.pubkey(), &world.service.pubkey(), &other_mint, [7u8; 32]);
    let before = world.snapshot();
    let result = world.open(USDC);
    world.assert_refused(result, code(LedgerError::WrongMint), &before);
    assert_eq!(world.ledger.token_balance(&other_token), Some(10 * USDC));
}

#[test]
fn a_channel_needs_the_service_authority_a_deposit_the_payer_has_a_future_expiry_and_a_bounded_delay() {
    let mut world = World::new();
    let before = world.snapshot();

    let impostor = Keypair::new();
    world.ledger.airdrop(&impostor.pubkey(), 1_000_000_000).unwrap();
    let ix = open_channel_ix(&impostor.pubkey(), &world.keys, world.args(USDC), None);
    let agent = world.agent.insecure_clone();
    let result = world.send(&[ix], &[&impostor, &agent]);
    world.assert_refused(result, code(LedgerError::Unauthorized), &before);

    let cases: [(OpenChannelArgs, LedgerError); 6] = [
        (OpenChannelArgs { deposit: 0, ..world.args(0) }, LedgerError::ZeroAmount),
        (world.args(AGENT_FUNDS + 1), LedgerError::InsufficientFunds),
        (OpenChannelArgs { expires_at: world.now(), ..world.args(USDC) }, LedgerError::InvalidChannelExpiry),
        (OpenChannelArgs { withdraw_delay: 0, ..world.args(USDC) }, LedgerError::InvalidWithdrawDelay),
        (OpenChannelArgs { withdraw_delay: 30 * 24 * HOUR + 1, ..world.args(USDC) }, LedgerError::InvalidWithdrawDelay),
        (OpenChannelArgs { withdraw_delay: -1, ..world.args(USDC) }, LedgerError::InvalidWithdrawDelay),
    ];
    for (args, error) in cases {
        let result = world.open_with(args, None);
        world.assert_refused(result, code(error), &before);
    }

    // A payer cannot open a channel to itself.
    world.keys = ChannelKeys::new(&world.agent.pubkey(), &world.agent.pubkey(), &world.setup.mint, [7u8; 32]);
    let result = world.open(USDC);
    world.assert_refused(result, code(LedgerError::ChannelPayeeIsPayer), &before);
}

#[test]
fn a_channel_id_is_used_once_while_its_channel_exists() {
    let mut world = World::with_channel(USDC);
    let before = world.snapshot();
    // Same payer, payee and id: the account exists, `init` refuses (System Program: account in use).
    let failed = world.open(USDC).unwrap_err();
    assert!(matches!(failed.err, TransactionError::InstructionError(0, _)), "{:?}", failed.err);
    assert_eq!(world.snapshot(), before);
    world.assert_conserved();
}

// ---- settle -------------------------------------------------------------------------------------

#[test]
fn a_settlement_moves_the_delta_to_the_payee_and_records_every_charge_it_covers() {
    let mut world = World::with_channel(10 * USDC);
    world.charges(&[100_000, 250_000, 50_000]);
    let executed = world.settle_range(0, 3).expect("settles");

    assert_eq!(world.service_balance(), 400_000);
    assert_eq!(world.escrow_balance(), Some(10 * USDC - 400_000));
    world.assert_conserved();

    let settled = executed.events::<ChannelSettled>();
    assert_eq!(settled.len(), 1);
    let settled = &settled[0];
    assert_eq!((settled.channel, settled.settler), (world.keys.address, world.service.pubkey()));
    assert_eq!((settled.cumulative_amount, settled.delta, settled.sequence, settled.charge_count), (400_000, 400_000, 3, 3));
    assert_eq!(settled.charges_digest, world.book.digest);

    let payments = executed.events::<PaymentRecorded>();
    assert_eq!(payments.len(), 3, "one PaymentRecorded per charge");
    let amounts: Vec<u64> = payments.iter().map(|p| p.amount).collect();
    assert_eq!(amounts, [100_000, 250_000, 50_000]);
    assert_eq!(payments.iter().map(|p| p.amount).sum::<u64>(), settled.delta);
    let ids: Vec<u64> = payments.iter().map(|p| p.payment_id).collect();
    assert_eq!(ids, [1, 2, 3]);
    let endpoints: Vec<[u8; 32]> = payments.iter().map(|p| p.endpoint_hash).collect();
    assert_eq!(endpoints, [search(), quote(), search()]);
    for payment in &payments {
        assert_eq!((payment.payer, payment.payee, payment.mint), (world.agent.pubkey(), world.service.pubkey(), world.setup.mint));
        assert_eq!((payment.protocol, payment.rail, payment.atomic), (Protocol::Mpp, Rail::Stablecoin, true));
        assert_eq!((payment.settlement_reference, payment.parent.clone()), (None, None));
    }

    let channel = world.channel().unwrap();
    assert_eq!((channel.settled, channel.sequence, channel.last_payment_id), (400_000, 3, 3));
    assert_eq!(channel.charges_digest, world.book.digest);
}

#[test]
fn successive_settlements_move_only_what_the_higher_voucher_adds() {
    let mut world = World::with_channel(5 * USDC);
    world.charges(&[10, 20]);
    world.settle_range(0, 2).unwrap();
    world.charges(&[30, 40, 50]);
    let executed = world.settle_range(2, 5).unwrap();

    let settled = &executed.events::<ChannelSettled>()[0];
    assert_eq!((settled.cumulative_amount, settled.delta, settled.sequence), (150, 120, 5));
    let ids: Vec<u64> = executed.events::<PaymentRecorded>().iter().map(|p| p.payment_id).collect();
    assert_eq!(ids, [3, 4, 5], "only the charges the new voucher adds are recorded");
    assert_eq!(world.service_balance(), 150);
    world.assert_conserved();
}

#[test]
fn the_service_authority_may_settle_for_the_payee() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let authority = world.authority();
    let ixs = world.settle_instructions(&authority.pubkey(), 0, 1);
    let executed = world.send(&ixs, &[&authority]).expect("the authority settles for the payee");
    assert_eq!(executed.events::<ChannelSettled>()[0].settler, authority.pubkey());
    assert_eq!(world.service_balance(), 1_000, "the payee still receives the delta");
    world.assert_conserved();
}

#[test]
fn a_settlement_signed_by_anyone_but_the_payee_or_the_authority_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let stranger = Keypair::new();
    world.ledger.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    let before = world.snapshot();
    let ixs = world.settle_instructions(&stranger.pubkey(), 0, 1);
    let result = world.send(&ixs, &[&stranger]);
    world.assert_refused(result, code(LedgerError::NotChannelSettler), &before);
    // Not even the payer may settle its own voucher (it would choose when the payee is paid).
    let agent = world.agent.insecure_clone();
    let ixs = world.settle_instructions(&agent.pubkey(), 0, 1);
    let result = world.send(&ixs, &[&agent]);
    world.assert_refused(result, code(LedgerError::NotChannelSettler), &before);
}

#[test]
fn a_voucher_signed_by_another_key_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let before = world.snapshot();
    let impostor = Keypair::new();
    let mut ixs = world.settle_instructions(&world.service.pubkey(), 0, 1);
    ixs[1] = ed25519_verify_ix(&impostor, &world.book.message_at(1)); // a valid signature, by the wrong key
    let service = world.service.insecure_clone();
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::VoucherSignerMismatch), &before);
}

#[test]
fn a_forged_signature_fails_in_the_precompile_before_the_program_runs() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let before = world.snapshot();
    let mut ixs = world.settle_instructions(&world.service.pubkey(), 0, 1);
    // The payer's key and the right message, with a signature that is not the payer's.
    let signature_offset = u16::from_le_bytes([ixs[1].data[2], ixs[1].data[3]]) as usize;
    ixs[1].data[signature_offset] ^= 0x40;
    let service = world.service.insecure_clone();
    let failed = world.send(&ixs, &[&service]).unwrap_err();
    assert_eq!(failed.err, TransactionError::InstructionError(1, InstructionError::Custom(2)));
    assert_eq!(world.snapshot(), before);
    world.assert_conserved();
}

#[test]
fn a_settlement_without_the_signature_instruction_right_before_it_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let before = world.snapshot();
    let service = world.service.insecure_clone();
    let ixs = world.settle_instructions(&service.pubkey(), 0, 1);

    let without = [ixs[0].clone(), ixs[2].clone()];
    let result = world.send(&without, &[&service]);
    world.assert_refused(result, code(LedgerError::VoucherSignatureMissing), &before);

    // A valid signature elsewhere in the transaction does not count: it must be the previous instruction.
    let reordered = [ixs[1].clone(), ixs[0].clone(), ixs[2].clone()];
    let result = world.send(&reordered, &[&service]);
    world.assert_refused(result, code(LedgerError::VoucherSignatureMissing), &before);
}

#[test]
fn a_settlement_claiming_more_than_the_payer_signed_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let before = world.snapshot();
    let service = world.service.insecure_clone();
    // The payer signed 1,000; the payee presents a charge of 2,000 with the same signature.
    let mut args = world.book.settlement(0, 1);
    args.cumulative_amount = 2_000;
    args.charges[0].amount = 2_000;
    let ixs = [
        compute_unit_limit_ix(1_400_000),
        ed25519_verify_ix(&world.agent, &world.book.message_at(1)),
        settle_channel_ix(&service.pubkey(), &world.keys, args, None, None),
    ];
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::VoucherMessageMismatch), &before);

    // Same total, other endpoint: the digest binds every charge, not only the sum.
    let mut args = world.book.settlement(0, 1);
    args.endpoints[0] = quote();
    let ixs = [
        ed25519_verify_ix(&world.agent, &world.book.message_at(1)),
        settle_channel_ix(&service.pubkey(), &world.keys, args, None, None),
    ];
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::VoucherMessageMismatch), &before);
}

#[test]
fn a_replayed_or_lower_voucher_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[100, 200]);
    world.settle_range(0, 2).unwrap();
    world.advance(1);
    let before = world.snapshot();
    // The same voucher again (a new transaction: other blockhash).
    let result = world.settle_range(0, 2);
    world.assert_refused(result, code(LedgerError::VoucherNotIncreasing), &before);
    // An older, lower voucher the payee also holds.
    let result = world.settle_range(0, 1);
    world.assert_refused(result, code(LedgerError::VoucherNotIncreasing), &before);
    // The next one still settles.
    world.charges(&[300]);
    world.settle_range(2, 3).expect("a higher voucher settles");
    assert_eq!(world.service_balance(), 600);
    world.assert_conserved();
}

#[test]
fn a_voucher_over_the_deposit_is_refused_and_settles_after_a_top_up() {
    let mut world = World::with_channel(1_000);
    world.charges(&[600, 401]);
    let before = world.snapshot();
    let result = world.settle_range(0, 2);
    world.assert_refused(result, code(LedgerError::VoucherExceedsDeposit), &before);
    // Exactly the deposit is fine.
    let mut exact = World::with_channel(1_000);
    exact.charges(&[600, 400]);
    exact.settle_range(0, 2).expect("the whole deposit can be settled");
    assert_eq!(exact.escrow_balance(), Some(0));
    exact.assert_conserved();

    let agent = world.agent.insecure_clone();
    let executed = world.send(&[top_up_channel_ix(&world.keys, 1, None)], &[&agent]).expect("top up");
    let topped = &executed.events::<ChannelToppedUp>()[0];
    assert_eq!((topped.amount, topped.deposit), (1, 1_001));
    world.assert_conserved();
    world.settle_range(0, 2).expect("settles after the top up");
    assert_eq!(world.service_balance(), 1_001);
    world.assert_conserved();
}

#[test]
fn charges_must_sum_to_the_delta_count_to_the_sequence_and_increase_their_ids() {
    let mut world = World::with_channel(USDC);
    world.charges(&[100, 200, 300]);
    let before = world.snapshot();
    let service = world.service.insecure_clone();
    let send = |world: &mut World, args: SettleChannelArgs| {
        let ixs = [
            ed25519_verify_ix(&world.agent, &world.book.message_at(3)),
            settle_channel_ix(&service.pubkey(), &world.keys, args, None, None),
        ];
        world.send(&ixs, &[&service])
    };

    let mut short = world.book.settlement(0, 3);
    short.charges[2].amount = 299;
    let result = send(&mut world, short);
    world.assert_refused(result, code(LedgerError::ChargesDoNotMatchDelta), &before);

    let mut dropped = world.book.settlement(0, 3);
    dropped.charges.pop();
    dropped.charges[1].amount = 500; // same sum, one charge fewer
    let result = send(&mut world, dropped);
    world.assert_refused(result, code(LedgerError::VoucherSequenceMismatch), &before);

    let mut repeated = world.book.settlement(0, 3);
    repeated.charges[2].payment_id = repeated.charges[1].payment_id;
    let result = send(&mut world, repeated);
    world.assert_refused(result, code(LedgerError::ChargePaymentIdNotIncreasing), &before);

    let mut zero = world.book.settlement(0, 3);
    zero.charges[0].amount = 0;
    zero.charges[1].amount = 300;
    let result = send(&mut world, zero);
    world.assert_refused(result, code(LedgerError::ZeroAmount), &before);

    let mut unknown_endpoint = world.book.settlement(0, 3);
    unknown_endpoint.charges[0].endpoint = 9;
    let result = send(&mut world, unknown_endpoint);
    world.assert_refused(result, code(LedgerError::InvalidChargeEndpoint), &before);

    // Ids must also exceed the last settled one.
    let args = world.book.settlement(0, 3);
    send(&mut world, args).expect("the honest settlement passes");
    world.next_payment_id = 2;
    world.charges(&[5]);
    let before = world.snapshot();
    let result = world.settle_range(3, 4);
    world.assert_refused(result, code(LedgerError::ChargePaymentIdNotIncreasing), &before);
}

#[test]
fn a_settlement_into_an_account_that_is_not_the_payees_or_not_in_the_mint_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let before = world.snapshot();
    let service = world.service.insecure_clone();
    let settle_into = |world: &World, payee_token: Pubkey| {
        vec![
            ed25519_verify_ix(&world.agent, &world.book.message_at(1)),
            settle_channel_ix(&world.service.pubkey(), &world.keys, world.book.settlement(0, 1), None, Some(payee_token)),
        ]
    };

    // The payee signs but points the delta at another wallet's token account.
    let thief = Keypair::new();
    let thief_token = world.ledger.create_token_account(&world.setup.authority, &thief.pubkey(), &world.setup.mint).unwrap();
    let ixs = settle_into(&world, thief_token);
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::TokenAccountMismatch), &before);
    assert_eq!(world.ledger.token_balance(&thief_token), Some(0));

    // The payee's own account, in another mint.
    let other_authority = Keypair::new();
    world.ledger.airdrop(&other_authority.pubkey(), 1_000_000_000).unwrap();
    let other_mint = world.ledger.create_mint(&other_authority, 6).unwrap();
    let other_token = world.ledger.create_token_account(&world.setup.authority, &service.pubkey(), &other_mint).unwrap();
    let ixs = settle_into(&world, other_token);
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::WrongMint), &before);
}

// ---- close, refund, force-close -----------------------------------------------------------------

#[test]
fn a_cooperative_close_settles_the_final_voucher_and_the_payee_refunds_the_rest_at_once() {
    let mut world = World::with_channel(10 * USDC);
    world.charges(&[100, 200]);
    world.settle_range(0, 1).unwrap();
    let authority = world.setup.authority.pubkey();
    let authority_lamports = world.ledger.svm.get_balance(&authority).unwrap();
    let channel_lamports = world.ledger.svm.get_balance(&world.keys.address).unwrap()
        + world.ledger.svm.get_balance(&world.keys.escrow).unwrap();

    let service = world.service.insecure_clone();
    let final_settlement = world.book.settlement(1, 2);
    let ixs = [
        ed25519_verify_ix(&world.agent, &world.book.message_at(2)),
        close_channel_ix(&service.pubkey(), &world.keys, Some(final_settlement), None),
        refund_channel_ix(&service.pubkey(), &world.keys, &authority),
    ];
    let executed = world.send(&ixs, &[&service]).expect("close, final settlement and refund in one transaction");

    assert_eq!(world.service_balance(), 300);
    assert_eq!(world.agent_balance(), AGENT_FUNDS - 300);
    assert!(world.channel().is_none(), "the channel account is gone");
    world.assert_conserved();

    let payments = executed.events::<PaymentRecorded>();
    assert_eq!(payments.iter().map(|p| (p.payment_id, p.amount)).collect::<Vec<_>>(), [(2, 200)]);
    assert_eq!(executed.events::<ChannelCloseRequested>()[0].requested_by, service.pubkey());
    let closed = &executed.events::<ChannelClosed>()[0];
    assert_eq!((closed.deposit, closed.settled, closed.refunded, closed.sequence, closed.forced), (10 * USDC, 300, 10 * USDC - 300, 2, false));
    assert_eq!(closed.settled + closed.refunded, closed.deposit);
    // The rent of channel and escrow went back to the authority that paid it.
    assert_eq!(world.ledger.svm.get_balance(&authority).unwrap(), authority_lamports + channel_lamports);
}

#[test]
fn the_payer_gets_the_remainder_only_after_the_withdraw_delay_and_the_payee_may_settle_meanwhile() {
    let mut world = World::with_channel(10 * USDC);
    world.charges(&[1_000, 2_000]);
    let agent = world.agent.insecure_clone();
    let authority = world.setup.authority.pubkey();

    // Refund without a close request.
    let before = world.snapshot();
    let result = world.send(&[refund_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelNotClosing), &before);

    let executed = world.send(&[close_channel_ix(&agent.pubkey(), &world.keys, None, None)], &[&agent]).expect("close request");
    let requested = &executed.events::<ChannelCloseRequested>()[0];
    assert_eq!(requested.refundable_at, requested.close_requested_at + WITHDRAW_DELAY);
    world.assert_conserved();

    // Refund before the delay.
    world.advance(WITHDRAW_DELAY - 1);
    let before = world.snapshot();
    let result = world.send(&[refund_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent]);
    world.assert_refused(result, code(LedgerError::WithdrawDelayNotElapsed), &before);

    // A second close request and a top up are refused while closing.
    let result = world.send(&[close_channel_ix(&agent.pubkey(), &world.keys, None, None)], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelClosing), &before);
    let result = world.send(&[top_up_channel_ix(&world.keys, 1, None)], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelClosing), &before);

    // The payee settles its last voucher during the delay.
    world.settle_range(0, 2).expect("settling is allowed while closing");
    world.assert_conserved();

    // The authority, acting for the payee elsewhere, cannot cut the payee's delay short either.
    let authority_key = world.authority();
    let before = world.snapshot();
    let result = world.send(&[refund_channel_ix(&authority_key.pubkey(), &world.keys, &authority)], &[&authority_key]);
    world.assert_refused(result, code(LedgerError::WithdrawDelayNotElapsed), &before);

    // The rent must go back to the authority that paid it, not to the payer.
    world.advance(1);
    let before = world.snapshot();
    let result = world.send(&[refund_channel_ix(&agent.pubkey(), &world.keys, &agent.pubkey())], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelAccountMismatch), &before);

    let executed = world.send(&[refund_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent]).expect("refund after the delay");
    let closed = &executed.events::<ChannelClosed>()[0];
    assert_eq!((closed.settled, closed.refunded, closed.forced, closed.closed_by), (3_000, 10 * USDC - 3_000, false, agent.pubkey()));
    assert_eq!(world.agent_balance(), AGENT_FUNDS - 3_000);
    assert_eq!(world.service_balance(), 3_000);
    world.assert_conserved();
}

/// A token account of `owner` in `mint` that is not its associated one, created and paid by
/// `creator` without `owner`'s signature (the SPL Token program needs none).
fn second_token_account(world: &mut World, creator: &Keypair, owner: &Pubkey) -> Pubkey {
    use anchor_lang::solana_program::program_pack::Pack;
    let account = Keypair::new();
    let space = spl_token_interface::state::Account::LEN;
    let lamports = world.ledger.svm.minimum_balance_for_rent_exemption(space);
    let create = solana_system_interface::instruction::create_account(
        &creator.pubkey(),
        &account.pubkey(),
        lamports,
        space as u64,
        &spl_token_interface::ID,
    );
    let init = spl_token_interface::instruction::initialize_account3(&spl_token_interface::ID, &account.pubkey(), &world.setup.mint, owner)
        .unwrap();
    world.send(&[create, init], &[creator, &account]).expect("a second token account of the payer");
    account.pubkey()
}

/// `ix` (a refund or force close) with its refund destination replaced.
fn refunding_to(mut ix: Instruction, destination: Pubkey) -> Instruction {
    // FinishChannel: signer, config, channel, escrow, mint, payer_token, ...
    ix.accounts[5].pubkey = destination;
    ix
}

#[test]
fn a_refund_goes_only_to_the_payers_associated_token_account() {
    let mut world = World::with_channel(2 * USDC);
    world.charges(&[1_000]);
    let service = world.service.insecure_clone();
    let agent = world.agent.insecure_clone();
    let authority = world.setup.authority.pubkey();
    let stray = second_token_account(&mut world, &service, &agent.pubkey());
    world.send(&[close_channel_ix(&service.pubkey(), &world.keys, None, None)], &[&service]).expect("the payee asks to close");

    // The payee refunds to a token account the payer owns but no wallet reads.
    let before = world.snapshot();
    let ix = refunding_to(refund_channel_ix(&service.pubkey(), &world.keys, &authority), stray);
    let result = world.send(&[ix], &[&service]);
    world.assert_refused(result, code(LedgerError::RefundNotToPayerAssociatedAccount), &before);
    assert_eq!(world.ledger.token_balance(&stray), Some(0));

    // The payer's own refund after the delay is held to the same destination.
    world.advance(WITHDRAW_DELAY);
    let ix = refunding_to(refund_channel_ix(&agent.pubkey(), &world.keys, &authority), stray);
    let result = world.send(&[ix], &[&agent]);
    world.assert_refused(result, code(LedgerError::RefundNotToPayerAssociatedAccount), &before);

    let executed = world.send(&[refund_channel_ix(&service.pubkey(), &world.keys, &authority)], &[&service]).expect("refund to the ATA");
    assert_eq!(executed.events::<ChannelClosed>()[0].refunded, 2 * USDC);
    assert_eq!(world.agent_balance(), AGENT_FUNDS);
    assert_eq!(world.ledger.token_balance(&stray), Some(0));
    world.assert_conserved();
}

#[test]
fn a_force_close_refunds_only_to_the_payers_associated_token_account() {
    let mut world = World::with_channel(USDC);
    let agent = world.agent.insecure_clone();
    let authority = world.setup.authority.pubkey();
    let stray = second_token_account(&mut world, &agent, &agent.pubkey());
    world.advance(2 * HOUR);
    let before = world.snapshot();
    let ix = refunding_to(force_close_channel_ix(&agent.pubkey(), &world.keys, &authority), stray);
    let result = world.send(&[ix], &[&agent]);
    world.assert_refused(result, code(LedgerError::RefundNotToPayerAssociatedAccount), &before);
    world.send(&[force_close_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent]).expect("force close to the ATA");
    assert_eq!(world.agent_balance(), AGENT_FUNDS);
    world.assert_conserved();
}

#[test]
fn nobody_but_the_parties_may_close_or_refund_a_channel() {
    let mut world = World::with_channel(USDC);
    let stranger = Keypair::new();
    world.ledger.airdrop(&stranger.pubkey(), 1_000_000_000).unwrap();
    let authority = world.setup.authority.pubkey();
    let before = world.snapshot();
    let result = world.send(&[close_channel_ix(&stranger.pubkey(), &world.keys, None, None)], &[&stranger]);
    world.assert_refused(result, code(LedgerError::NotChannelParty), &before);
    let agent = world.agent.insecure_clone();
    world.send(&[close_channel_ix(&agent.pubkey(), &world.keys, None, None)], &[&agent]).unwrap();
    world.advance(WITHDRAW_DELAY);
    let before = world.snapshot();
    let result = world.send(&[refund_channel_ix(&stranger.pubkey(), &world.keys, &authority)], &[&stranger]);
    world.assert_refused(result, code(LedgerError::NotChannelParty), &before);
}

#[test]
fn a_settlement_after_the_close_is_refused() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let authority = world.setup.authority.pubkey();
    let service = world.service.insecure_clone();
    world.send(&[close_channel_ix(&service.pubkey(), &world.keys, None, None)], &[&service]).unwrap();
    world.send(&[refund_channel_ix(&service.pubkey(), &world.keys, &authority)], &[&service]).unwrap();
    assert_eq!(world.agent_balance(), AGENT_FUNDS, "the payee gave up its unsettled voucher");
    world.assert_conserved();

    let before = world.snapshot();
    let result = world.settle_range(0, 1);
    // The channel account no longer exists.
    world.assert_refused(result, Some(anchor_lang::error::ErrorCode::AccountNotInitialized as u32), &before);
}

#[test]
fn a_channel_reopened_at_the_same_address_does_not_accept_the_old_vouchers() {
    let mut world = World::with_channel(USDC);
    world.charges(&[1_000]);
    let old_book = world.book.clone();
    let authority = world.setup.authority.pubkey();
    let service = world.service.insecure_clone();
    world.send(&[close_channel_ix(&service.pubkey(), &world.keys, None, None)], &[&service]).unwrap();
    world.send(&[refund_channel_ix(&service.pubkey(), &world.keys, &authority)], &[&service]).unwrap();
    world.advance(5);
    world.open(USDC).expect("the payer reuses its channel id");

    world.book = old_book;
    let before = world.snapshot();
    let result = world.settle_range(0, 1);
    world.assert_refused(result, code(LedgerError::VoucherMessageMismatch), &before);
}

#[test]
fn the_payer_may_force_close_after_expiry_but_not_before() {
    let mut world = World::with_channel(10 * USDC);
    world.charges(&[700]);
    world.settle_range(0, 1).unwrap();
    let agent = world.agent.insecure_clone();
    let service = world.service.insecure_clone();
    let authority = world.setup.authority.pubkey();

    world.advance(HOUR - 1);
    let before = world.snapshot();
    let result = world.send(&[force_close_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelNotExpired), &before);
    let result = world.send(&[top_up_channel_ix(&world.keys, 1, None)], &[&agent]);
    assert!(result.is_ok(), "a top up before expiry is fine");
    world.assert_conserved();

    world.advance(1);
    let before = world.snapshot();
    let result = world.send(&[top_up_channel_ix(&world.keys, 1, None)], &[&agent]);
    world.assert_refused(result, code(LedgerError::ChannelExpired), &before);
    // Only the payer may force-close.
    let result = world.send(&[force_close_channel_ix(&service.pubkey(), &world.keys, &authority)], &[&service]);
    world.assert_refused(result, code(LedgerError::NotChannelParty), &before);

    let executed = world
        .send(&[force_close_channel_ix(&agent.pubkey(), &world.keys, &authority)], &[&agent])
        .expect("force-close after expiry");
    let closed = &executed.events::<ChannelClosed>()[0];
    assert!(closed.forced);
    assert_eq!((closed.deposit, closed.settled, closed.refunded), (10 * USDC + 1, 700, 10 * USDC + 1 - 700));
    assert_eq!(world.agent_balance(), AGENT_FUNDS - 700);
    assert!(world.channel().is_none());
    world.assert_conserved();
}

// ---- invocations --------------------------------------------------------------------------------

impl World {
    fn open_invocation(&mut self, budget: u64) -> Pubkey {
        let agent = self.agent.pubkey();
        self.open_invocation_for(&agent, budget)
    }

    fn open_invocation_for(&mut self, sub_agent: &Pubkey, budget: u64) -> Pubkey {
        let invoker = Keypair::new();
        let mut parent_signature = [0u8; 64];
        parent_signature[0] = 42;
        let args = OpenInvocationArgs { parent_signature, sub_agent: *sub_agent, budget };
        let ix = open_invocation_ix(&self.setup.authority.pubkey(), &invoker.pubkey(), args);
        let authority = self.authority();
        let executed = self.ledger.send(&[ix], &[&authority, &invoker]).unwrap();
        executed.events::<InvocationOpened>()[0].invocation
    }

    fn invocation_spent(&self, invocation: &Pubkey) -> u64 {
        let account = self.ledger.svm.get_account(invocation).unwrap();
        payment_ledger::Invocation::try_deserialize(&mut account.data.as_slice()).unwrap().spent
    }
}

#[test]
fn charges_of_a_channel_under_an_invocation_carry_its_parent_link_and_spend_its_budget() {
    let mut world = World::new();
    let invocation = world.open_invocation(5 * USDC);
    let args = world.args(2 * USDC);
    world.open_with(args, Some(invocation)).expect("opens under the invocation");
    assert_eq!(world.channel().unwrap().invocation, Some(invocation));

    world.charges(&[300_000, 200_000]);
    let service = world.service.insecure_clone();
    let ixs = [
        ed25519_verify_ix(&world.agent, &world.book.message_at(2)),
        settle_channel_ix(&service.pubkey(), &world.keys, world.book.settlement(0, 2), Some(invocation), None),
    ];
    let executed = world.send(&ixs, &[&service]).unwrap();
    let links: Vec<_> = executed.events::<PaymentRecorded>().into_iter().map(|p| p.parent.expect("parent link")).collect();
    assert_eq!(links.iter().map(|l| (l.invocation, l.budget, l.spent)).collect::<Vec<_>>(), [
        (invocation, 5 * USDC, 300_000),
        (invocation, 5 * USDC, 500_000)
    ]);
    assert_eq!(links[0].parent_signature[0], 42);
    assert_eq!(world.invocation_spent(&invocation), 500_000);
    world.assert_conserved();

    // The channel's invocation must be passed, and no other.
    world.charges(&[1]);
    let before = world.snapshot();
    let ixs = [
        ed25519_verify_ix(&world.agent, &world.book.message_at(3)),
        settle_channel_ix(&service.pubkey(), &world.keys, world.book.settlement(2, 3), None, None),
    ];
    let result = world.send(&ixs, &[&service]);
    world.assert_refused(result, code(LedgerError::ChannelInvocationMismatch), &before);
}

#[test]
fn a_channel_deposit_above_the_invocations_remaining_budget_is_refused() {
    let mut world = World::new();
    let invocation = world.open_invocation(USDC);
    let before = world.snapshot();
    let args = world.args(USDC + 1);
    let result = world.open_with(args, Some(invocation));
    world.assert_refused(result, code(LedgerError::InvocationBudgetExceeded), &before);

    let args = world.args(USDC);
    world.open_with(args, Some(invocation)).expect("exactly the budget");
    let agent = world.agent.insecure_clone();
    let before = world.snapshot();
    let result = world.send(&[top_up_channel_ix(&world.keys, 1, Some(invocation))], &[&agent]);
    world.assert_refused(result, code(LedgerError::InvocationBudgetExceeded), &before);

    // Another agent's invocation cannot carry this payer's channel.
    let mut world = World::new();
    let theirs = world.open_invocation_for(&Keypair::new().pubkey(), USDC);
    let before = world.snapshot();
    let args = world.args(USDC);
    let result = world.open_with(args, Some(theirs));
    world.assert_refused(result, code(LedgerError::InvocationPayerMismatch), &before);
}

// ---- cost ---------------------------------------------------------------------------------------

/// Settles `count` one-cent charges on one endpoint in as few packet-sized transactions as fit,
/// and returns (transactions, signatures charged, lamports paid by the settler).
fn settle_in_packets(count: usize) -> (usize, u64, u64) {
    let mut world = World::with_channel(100 * USDC);
    for _ in 0..count {
        world.charge(10_000, search());
    }

    let service = world.service.insecure_clone();
    let lamports_before = world.ledger.svm.get_balance(&service.pubkey()).unwrap();
    let (mut from, mut transactions, mut signatures) = (0, 0, 0u64);
    while from < count {
        // The most charges that still fit in one packet.
        let mut to = from + 1;
        while to < count && fits(&world, &service, from, to + 1) {
            to += 1;
        }
        let executed = world.settle_range(from, to).expect("settles");
        println!("  transaction {transactions}: charges {from}..{to}, {} compute units", executed.meta.compute_units_consumed);
        assert_eq!(executed.events::<PaymentRecorded>().len(), to - from);
        signatures += 2; // the settler's transaction signature and the payer's voucher signature
        transactions += 1;
        world.advance(1);
        from = to;
    }
    assert_eq!(world.service_balance(), 10_000 * count as u64);
    world.assert_conserved();
    let paid = lamports_before - world.ledger.svm.get_balance(&service.pubkey()).unwrap();
    (transactions, signatures, paid)
}

fn fits(world: &World, service: &Keypair, from: usize, to: usize) -> bool {
    let ixs = world.settle_instructions(&service.pubkey(), from, to);
    let blockhash = world.ledger.svm.latest_blockhash();
    let tx = Transaction::new(&[service], Message::new_with_blockhash(&ixs, Some(&service.pubkey()), &blockhash), blockhash);
    bincode::serialize(&tx).unwrap().len() <= PACKET_DATA_SIZE
}

/// The figures of docs/ledger.md "Channels: cost": a settlement pays two signature fees per
/// transaction (the settler's and the ed25519 precompile's), whatever the number of charges in it;
/// how many charges fit in one packet sets the number of transactions.
#[test]
fn a_settlement_costs_two_signature_fees_per_transaction_whatever_its_charges() {
    let mut rows = Vec::new();
    for count in [1usize, 10, 100] {
        let (transactions, signatures, lamports) = settle_in_packets(count);
        assert_eq!(lamports, signatures * SIGNATURE_FEE, "the precompile's signature is charged like a transaction signature");
        rows.push((count, transactions, signatures, lamports));
        println!(
            "charges {count:>3}: transactions {transactions}, signatures {signatures}, lamports {lamports}, per charge {:.1}",
            lamports as f64 / count as f64
        );
    }
    // (charges, transactions, signatures, lamports): the table of docs/ledger.md.
    assert_eq!(rows, [(1, 1, 2, 10_000), (10, 1, 2, 10_000), (100, 4, 8, 40_000)]);
}

/// Past the packet limit, the runtime's instruction trace (64 entries: top-level instructions and
/// every CPI, each event being one) bounds a settlement: 59 charges settle, 60 do not.
#[test]
fn a_settlement_transaction_holds_at_most_59_charges_of_instruction_trace() {
    for (count, fits) in [(59usize, true), (60, false)] {
        let mut world = World::with_channel(USDC);
        for _ in 0..count {
            world.charge(1, search());
        }
        // Sent without the packet-size check: this is about the trace, not the wire.
        let ixs = world.settle_instructions(&world.service.pubkey(), 0, count);
        let service = world.service.insecure_clone();
        let before = world.snapshot();
        let result = world.ledger.send(&ixs, &[&service]);
        match fits {
            true => assert_eq!(result.expect("59 charges settle").events::<PaymentRecorded>().len(), count),
            false => {
                let failed = result.expect_err("60 charges exceed the trace");
                assert_eq!(failed.err, TransactionError::InstructionError(2, InstructionError::MaxInstructionTraceLengthExceeded));
                assert_eq!(world.snapshot(), before);
            }
        }
        world.assert_conserved();
    }
}

// ---- cross-language vectors ---------------------------------------------------------------------

/// The same constants are asserted by programs/payment_ledger/ts (pda.test.ts, voucher.test.ts), so
/// the TypeScript binding derives the addresses and signs the bytes this program checks.
#[test]
fn channel_addresses_and_voucher_bytes_match_the_typescript_binding() {
    let payer = Pubkey::new_from_array(std::array::from_fn(|i| i as u8 + 1));
    let payee = Pubkey::new_from_array(std::array::from_fn(|i| i as u8 + 101));
    let channel_id: [u8; 32] = std::array::from_fn(|i| i as u8);
    let keys = ChannelKeys::new(&payer, &payee, &Pubkey::default(), channel_id);
    assert_eq!(keys.address.to_string(), "GQPS7cvwQFxY8TngBsvkxiKkG4KRuExiTV1aKsfMAasC");
    assert_eq!(keys.escrow.to_string(), "koiXHFy1mNPYCuzbNxiexWdzmWCkoR9nd1fzq5yLomr");

    let mut book = VoucherBook::new(keys.address, 42);
    book.charge(Charge { payment_id: 1, amount: 100, endpoint_hash: search() });
    book.charge(Charge { payment_id: 5, amount: 2_500, endpoint_hash: quote() });
    let message = book.message();
    let signer = Keypair::new_from_array([7u8; 32]);
    let signature = signer.sign_message(&message);
    assert_eq!(hex(&book.start), "23c0674148b74b2e83c411ae6ab19fa1b19feff7d3a6a2d0b0c3b453410aad61");
    assert_eq!(hex(&book.digest), "729dc6c3e9ab00b845a5dc222951781f88c6fa0de9501e3be73b6dbabff7c881");
    assert_eq!(
        hex(&message),
        concat!(
            "7061796d656e745f6c65646765723a6368616e6e656c2d766f75636865723a7631", // the domain
            "e4dd070f83dda6436bc78278448758e3b527c73715872978e15863de6e2469eb", // the channel
            "280a000000000000", // 2,600 units
            "0200000000000000", // two charges
            "729dc6c3e9ab00b845a5dc222951781f88c6fa0de9501e3be73b6dbabff7c881", // the digest
        )
    );
    assert_eq!(signer.pubkey().to_string(), "GmaDrppBC7P5ARKV8g3djiwP89vz1jLK23V2GBjuAEGB");
    assert_eq!(
        hex(signature.as_ref()),
        "2b6e480b84e1e5223ad53953ec4db6ac37913092889096ccbdd7020a4ff9b9b134d4f3ade08ff72c6dedc4727ef0fd13e01bab666ec8308e455b07611f25e006"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
