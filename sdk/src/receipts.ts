/**
 * Receipts on a paid answer, the contract with the server middleware (shapes in docs/sdk.md
 * "Receipts" and docs/protocols.md): the spec formats' `X-PAYMENT-RESPONSE` and `X-MPP-Session` /
 * `X-MPP-Receipt` (or `txHash` / `sessionId` in the JSON body), and the real protocols'
 * `PAYMENT-RESPONSE` (x402 v2), `X-PAYMENT-RESPONSE` (x402 v1) and `Payment-Receipt` (MPP,
 * `reference` being the transaction). Both halves of the SDK read the header names here.
 *
 * Decoding is lenient (a malformed receipt reads as absent) because the receipt is the server's
 * statement, not ours to validate; the gateway validates the `txHash` when the reservation closes.
 */
export const X_PAYMENT = "X-PAYMENT";
export const X_PAYMENT_SIGNATURE = "X-PAYMENT-SIGNATURE";
export const X_PAYMENT_RESPONSE = "X-PAYMENT-RESPONSE";
export const X_PAYMENT_ERROR = "X-PAYMENT-ERROR";
export const X_MPP_SESSION = "X-MPP-Session";
export const X_MPP_RECEIPT = "X-MPP-Receipt";
export const X_MPP_ERROR = "X-MPP-Error";
export const PAYMENT_RESPONSE = "PAYMENT-RESPONSE";
export const PAYMENT_RECEIPT = "Payment-Receipt";

const MAX_RECEIPT_CHARS = 8_192;

export interface X402Receipt {
  success: boolean;
  transaction: string;
  network?: string;
  payer?: string;
}

export interface MppReceipt {
  txHash?: string;
  sessionId?: string;
  amount?: { value: string; currency: string };
  method?: string;
  charged?: boolean;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function decodeBase64Json(header: string | null, encoding: "base64" | "base64url" = "base64"): Record<string, unknown> | undefined {
  if (header === null || header.length > MAX_RECEIPT_CHARS) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(header.trim(), encoding).toString("utf8"));
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

export function readX402Receipt(headers: Headers): X402Receipt | undefined {
  const receipt = decodeBase64Json(headers.get(X_PAYMENT_RESPONSE));
  const transaction = optionalString(receipt?.transaction);
  if (receipt === undefined || transaction === undefined) return undefined;
  const network = optionalString(receipt.network);
  const payer = optionalString(receipt.payer);
  return { success: receipt.success !== false, transaction, ...(network ? { network } : {}), ...(payer ? { payer } : {}) };
}

/** The MPP receipt header, completed from the JSON body's `txHash` / `sessionId` when absent. */
export function readMppReceipt(headers: Headers, body: unknown): MppReceipt | undefined {
  const header = decodeBase64Json(headers.get(X_MPP_RECEIPT)) ?? {};
  const fromBody = isRecord(body) ? body : {};
  const txHash = optionalString(header.txHash) ?? optionalString(fromBody.txHash);
  if (txHash === undefined) return undefined;
  const sessionId = optionalString(header.sessionId) ?? optionalString(fromBody.sessionId);
  const method = optionalString(header.method);
  const amount =
    isRecord(header.amount) && optionalString(header.amount.value) && optionalString(header.amount.currency)
      ? { value: header.amount.value as string, currency: header.amount.currency as string }
      : undefined;
  return {
    txHash,
    ...(sessionId ? { sessionId } : {}),
    ...(method ? { method } : {}),
    ...(amount ? { amount } : {}),
    ...(typeof header.charged === "boolean" ? { charged: header.charged } : {}),
  };
}

/** The receipt of a real x402 / MPP payment, as the paid API sent it. */
export interface PaymentReceipt {
  /** The header it came in: `PAYMENT-RESPONSE`, `X-PAYMENT-RESPONSE` or `Payment-Receipt`. */
  header: string;
  /** Whether the server says the payment succeeded (`success` / `status: "success"`). */
  success: boolean;
  /** The settlement transaction it names (x402 `transaction`, MPP `reference`), if any. */
  transaction?: string;
  /** The decoded JSON, unchanged. */
  value: Record<string, unknown>;
}

/** The receipt a real x402 (v2 or v1) or MPP server puts on a paid answer, by the payment's format. */
export function readPaymentReceipt(format: "x402-v2" | "x402-v1" | "mpp", headers: Headers): PaymentReceipt | undefined {
  const header = format === "x402-v2" ? PAYMENT_RESPONSE : format === "x402-v1" ? X_PAYMENT_RESPONSE : PAYMENT_RECEIPT;
  const value = decodeBase64Json(headers.get(header), format === "mpp" ? "base64url" : "base64");
  if (value === undefined) return undefined;
  const transaction = optionalString(format === "mpp" ? value.reference : value.transaction);
  const success = format === "mpp" ? value.status === "success" : value.success === true;
  return { header, success, ...(transaction === undefined ? {} : { transaction }), value };
}
