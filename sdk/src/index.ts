/**
 * `@agent-payment-gateway/sdk`: the TypeScript client of the Agent Payment Gateway (spec 4.6,
 * 4.7), its error classes (spec 7) and the money conversions it uses at its edge.
 */
export {
  AuthenticationError,
  BudgetExceededError,
  CLIENT_ERROR_CODES,
  DailyBudgetExceededError,
  DomainNotAllowedError,
  errorFromProblem,
  InsufficientFundsError,
  isServiceError,
  PaymentError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
  ERROR_CODES,
  GATEWAY_ERROR_CODES,
  type ErrorClassName,
  type ErrorCode,
  type GatewayErrorCode,
  type KnownErrorCode,
  type ServiceErrorOptions,
} from "./errors.js";
export { InvalidInputError } from "./text-input.js";
export { decimalToUnits, MoneyFormatError, moneyToUnits, unitsToDecimal, unitsToUsdc, usdcToUnits, USDC_DECIMALS } from "./money.js";
export { Transport, type FetchFunction, type QueryValue, type RequestOptions, type TransportOptions } from "./transport.js";
export {
  Client,
  client,
  createClient,
  explorerUrl,
  type AgentEntry,
  type AgentListOptions,
  type CreateAgentOptions,
  type ArchiveOptions,
  type ClientOptions,
  type InvocationResult,
  type InvokeOptions,
  type PaidResult,
  type PaymentResult,
  type PayOptions,
  type Policy,
  type PolicyFields,
  type Protocol,
  type ProtocolPreference,
  type RateLimitWindow,
  type Transaction,
  type TransactionFilter,
  type UnpaidResult,
  type Usdc,
  type Wallet,
  type WalletOperation,
} from "./client.js";
export {
  readPaymentChallenges,
  readPaymentOffer,
  readX402V2Header,
  type MppChallengeParams,
  type MppRequest,
  type PaymentOffer,
  type X402Requirement,
} from "./payment-required.js";
export {
  readMppReceipt,
  readPaymentReceipt,
  readX402Receipt,
  type MppReceipt,
  type PaymentReceipt,
  type X402Receipt,
} from "./receipts.js";
export type { TransferFormat } from "./authorization.js";
