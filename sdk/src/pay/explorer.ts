/**
 * The explorer link of a payment's transaction: from the gateway's template once learned, else
 * the gateway's record of the transaction, else built locally from the wallet's network (a
 * transaction not indexed yet).
 */
import { explorerUrl } from "../explorer-links.js";
import type { PayCall } from "./call.js";

export async function explorerLink(call: PayCall, txHash: string, network?: string): Promise<string> {
  const template = call.shared.explorerTemplate;
  if (template !== undefined) return `${template.prefix}${encodeURIComponent(txHash)}${template.suffix}`;
  try {
    const transaction = await call.shared.transport.request<{ solanaExplorer?: unknown }>(
      "GET",
      `/v1/transactions/${encodeURIComponent(txHash)}`,
    );
    if (typeof transaction?.solanaExplorer === "string" && transaction.solanaExplorer.length > 0) return transaction.solanaExplorer;
  } catch {
    // Not indexed yet (404) or unreachable: build the link from the network instead.
  }
  return explorerUrl(txHash, network ?? (await networkName(call)), call.shared.explorerRpcUrl);
}

function networkName(call: PayCall): Promise<string | undefined> {
  call.shared.networkName ??= call.wallet.get().then(
    (wallet) => wallet.network,
    () => undefined,
  );
  return call.shared.networkName;
}
