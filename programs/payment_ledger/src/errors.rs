use anchor_lang::prelude::*;

/// Every way the ledger refuses an instruction. Codes are stable: never renumber or reuse one
/// (Anchor numbers them from 6000 in declaration order, so new variants go at the end).
#[error_code]
pub enum LedgerError {
    #[msg("signer is not the service authority of this ledger")]
    Unauthorized,
    #[msg("amount must be greater than zero")]
    ZeroAmount,
    #[msg("payment id must be greater than zero")]
    InvalidPaymentId,
    #[msg("this payment id was already recorded for this payer")]
    DuplicatePaymentId,
    #[msg("payment id is older than the payer's replay window")]
    PaymentIdTooOld,
    #[msg("mint is not the configured settlement mint")]
    WrongMint,
    #[msg("an atomic stablecoin payment needs mint, both token accounts and the token program")]
    MissingTransferAccounts,
    #[msg("token account does not belong to the expected owner or mint")]
    TokenAccountMismatch,
    #[msg("payer token account balance is below the payment amount")]
    InsufficientFunds,
    #[msg("payer is not the sub-agent of this invocation")]
    InvocationPayerMismatch,
    #[msg("payment would exceed the invocation budget")]
    InvocationBudgetExceeded,
    #[msg("invocation budget must be greater than zero")]
    ZeroBudget,
    #[msg("arithmetic overflow")]
    ArithmeticOverflow,
    #[msg("an attested payment must name the settlement transaction that moved its tokens")]
    MissingSettlementReference,
    // ---- payment channels (6014..) ----
    #[msg("channel expiry must be in the future")]
    InvalidChannelExpiry,
    #[msg("channel withdraw delay must be between 1 second and 30 days")]
    InvalidWithdrawDelay,
    #[msg("a channel's payer and payee must be different wallets")]
    ChannelPayeeIsPayer,
    #[msg("the channel is closing: no top up and no second close request")]
    ChannelClosing,
    #[msg("the channel has expired")]
    ChannelExpired,
    #[msg("signer is neither the channel's payee nor the service authority")]
    NotChannelSettler,
    #[msg("signer is not the channel's payer, its payee or the service authority")]
    NotChannelParty,
    #[msg("voucher is not above the amount already settled (replayed or lower)")]
    VoucherNotIncreasing,
    #[msg("voucher exceeds the channel deposit")]
    VoucherExceedsDeposit,
    #[msg("voucher sequence is not the settled sequence plus the charges presented")]
    VoucherSequenceMismatch,
    #[msg("charges do not sum to the voucher delta")]
    ChargesDoNotMatchDelta,
    #[msg("charge payment ids must increase strictly within a channel")]
    ChargePaymentIdNotIncreasing,
    #[msg("charge names an endpoint index the settlement does not carry")]
    InvalidChargeEndpoint,
    #[msg("no ed25519 verification of the voucher right before this instruction")]
    VoucherSignatureMissing,
    #[msg("voucher is not signed by the channel's payer")]
    VoucherSignerMismatch,
    #[msg("signed voucher message differs from the one this settlement claims")]
    VoucherMessageMismatch,
    #[msg("invocation account does not match the channel's")]
    ChannelInvocationMismatch,
    #[msg("the channel has no close request")]
    ChannelNotClosing,
    #[msg("the withdraw delay after the close request has not elapsed")]
    WithdrawDelayNotElapsed,
    #[msg("the channel has not expired yet")]
    ChannelNotExpired,
    #[msg("account does not belong to this channel")]
    ChannelAccountMismatch,
    #[msg("a refund goes only to the payer's associated token account for the channel's mint")]
    RefundNotToPayerAssociatedAccount,
}
