/**
 * `<sdk>/mcp`: the payments MCP server for one agent (docs/mcp.md). Needs the peer dependency
 * `@modelcontextprotocol/sdk`; the rest of the SDK does not.
 */
export { createPaymentsMcpServer, type PaymentsMcpOptions, RECENT_TRANSACTIONS, SERVER_NAME, SERVER_VERSION } from "./server.js";
export { TOOLS, type ToolDefinition } from "./tools.js";
export { MaxPriceExceededError, refusal, type ToolRefusal } from "./refusals.js";
export { type KeyScope, keyScope, parseScope } from "./key-scope.js";
export { type PaidToolAnswer, type PaidToolCall, PaidToolCaller } from "./paid-tools.js";
