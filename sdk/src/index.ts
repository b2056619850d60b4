/**
 * `@agent-payment-gateway/sdk`: the TypeScript client of the Agent Payment Gateway (spec 4.6,
 * 4.7), its error classes (spec 7) and the money conversions it uses at its edge.
 */
export {
  AuthenticationError,
  BudgetExceededError,
  DailyBudgetExceededError,
  DomainNotAllowedError,
  errorFromProblem,
  InsufficientFundsError,
  isServiceError,
  PaymentError,
  PaymentProtocolError,
  PolicyViolationError,
  ServiceError,
  type ErrorClassName,
  type ServiceErrorOptions,
} from "./errors.js";
export { decimalToUnits, MoneyFormatError, moneyToUnits, unitsToDecimal, unitsToUsdc, usdcToUnits, USDC_DECIMALS } from "./money.js";
export { Transport, type FetchFunction, type QueryValue, type RequestOptions, type TransportOptions } from "./transport.js";
