/** How the payments MCP server (and the client that pays MCP tools) names itself to the other side. */
export const SERVER_NAME = "agent-payment-gateway";
export const SERVER_VERSION = "0.1.0";
