/** Agents for the gateway benches, made the way a customer makes them: over REST /v1. */
import type { GatewayClient } from "../../test/gateway/support/gateway-payer.js";

async function call(client: GatewayClient, method: string, path: string, body: unknown): Promise<void> {
  const response = await fetch(`${client.gatewayUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${client.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
}

/**
 * Registers the agent, funds its wallet from the account's funding source and sets a policy
 * whose limits are checked on every payment but never bind during the bench.
 */
export async function fundedAgent(client: GatewayClient, agentId: string, fundUsdc: number): Promise<void> {
  await call(client, "POST", "/v1/agents", { agentId });
  await call(client, "POST", `/v1/agents/${agentId}/wallet/fund`, { usdc: fundUsdc });
  await call(client, "PUT", `/v1/policies/${agentId}`, { dailyBudget: { usdc: 1_000 }, rateLimit: { calls: 1_000_000, window: "24h" } });
}
