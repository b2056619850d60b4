/**
 * `<sdk>/server`: accept agent payments on your own API (spec 4.5). `x402Middleware` /
 * `x402Handler` for x402, `mppMiddleware` / `mppHandler` for MPP, each verifying and settling
 * through the gateway before your handler runs; both also accept the official x402 (v1, v2) and
 * MPP (`solana` charge) clients (standard.ts). `paidTool` charges for a tool of an MCP server the
 * same way (mcp.ts, MPP's and x402's MCP bindings). Zero dependencies: node builtins and global fetch.
 * Wire contract: docs/sdk-server.md.
 */
export { GatewayUnavailableError, type GatewayConfig, type FetchLike } from "./gateway.js";
export type { FetchHandler, NextFunction, NodeMiddleware, NodeRequest } from "./http.js";
export {
  DEFAULT_PAYMENT_PATH,
  MPP_PROTOCOL,
  mppHandler,
  mppMiddleware,
  type MppOptions,
  type MppPayment,
  X_MPP_ERROR,
  X_MPP_RECEIPT,
  X_MPP_SESSION,
} from "./mpp.js";
export {
  CHALLENGE_TTL_SECONDS,
  PAYMENT_RECEIPT,
  PAYMENT_REQUIRED,
  PAYMENT_RESPONSE,
  PAYMENT_SIGNATURE,
  type StandardOptions,
  type StandardPaymentInfo,
  WWW_AUTHENTICATE,
} from "./standard.js";
export {
  X_PAYMENT,
  X_PAYMENT_ERROR,
  X_PAYMENT_RESPONSE,
  X_PAYMENT_SIGNATURE,
  x402Handler,
  x402Middleware,
  type X402Options,
  type X402Payment,
} from "./x402.js";
export {
  MPP_CREDENTIAL_META,
  MPP_PAYMENT_REQUIRED_META,
  MPP_RECEIPT_META,
  type PaidToolHandler,
  type PaidToolOptions,
  paidTool,
  type ToolCallExtra,
  type ToolResult,
  X402_PAYMENT_META,
  X402_PAYMENT_RESPONSE_META,
} from "./mcp.js";
export { ChannelBook, type ChannelBookOptions, type PresentedVoucher, type SettlementPolicy } from "./channel/book.js";
export { type ChannelAccount, decodeChannel, type LedgerRpc, readChannelAccount } from "./channel/account.js";
export { SESSION_ERRORS, SESSION_PROBLEM_BASE, type SessionErrorCode, SessionVoucherError } from "./channel/errors.js";
export { FileVoucherJournal, type JournalRecord, MemoryVoucherJournal, type VoucherJournal } from "./channel/journal.js";
