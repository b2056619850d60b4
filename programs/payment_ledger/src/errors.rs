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
}
