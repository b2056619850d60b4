/**
 * Refusals of channel sessions, each a ServiceError (api/shared/errors.ts) with a registry code
 * the SDK already knows and a stable snake_case `reason` naming the rule, so a client narrows on
 * `reason` without a new code: `channel_closed`, `channel_deposit_exhausted`, ...
 */
import { ServiceError } from "../../shared/errors.js";
import { formatUsdcFixed } from "../../shared/money.js";

export type ChannelRefusalReason =
  | "channel_not_found"
  | "channel_closed"
  | "channel_not_open"
  | "channel_deposit_exhausted"
  | "channel_origin_mismatch"
  | "voucher_invalid"
  | "voucher_unknown"
  | "charges_mismatch"
  | "channel_open_failed"
  | "channel_pending"
  | "channel_close_refused";

export class ChannelError extends ServiceError {
  declare readonly reason: ChannelRefusalReason;
}

export function channelNotFound(channel: string): ChannelError {
  return new ChannelError("NOT_FOUND", `no channel session ${channel} of this account`, { reason: "channel_not_found", field: "channel" });
}

/** A closing, closed, failed or expired channel signs nothing more. */
export function channelClosed(channel: string, status: string): ChannelError {
  return new ChannelError("CONFLICT", `channel ${channel} is ${status}: it signs no more vouchers`, {
    reason: "channel_closed",
    extra: { channel, status },
  });
}

export function channelNotOpen(channel: string, status: string): ChannelError {
  return new ChannelError("CONFLICT", `channel ${channel} is ${status}`, { reason: "channel_not_open", extra: { channel, status } });
}

export function depositExhausted(channel: string, cumulativeUnits: bigint, amountUnits: bigint, depositUnits: bigint): ChannelError {
  return new ChannelError(
    "CONFLICT",
    `channel ${channel}: a charge of ${formatUsdcFixed(amountUnits)} would bring the cumulative to ${formatUsdcFixed(cumulativeUnits + amountUnits)}, above the deposit of ${formatUsdcFixed(depositUnits)}`,
    {
      reason: "channel_deposit_exhausted",
      extra: {
        channel,
        cumulativeUnits: cumulativeUnits.toString(),
        depositUnits: depositUnits.toString(),
        remainingUnits: (depositUnits - cumulativeUnits).toString(),
      },
    },
  );
}

export function originMismatch(endpoint: string, origin: string): ChannelError {
  return new ChannelError("BAD_USER_INPUT", `endpoint: ${endpoint} is not on the session's service ${origin}`, {
    reason: "channel_origin_mismatch",
    field: "endpoint",
  });
}

export function voucherInvalid(detail: string, field = "signature"): ChannelError {
  return new ChannelError("BAD_USER_INPUT", detail, { reason: "voucher_invalid", field });
}

export function voucherUnknown(sequence: bigint): ChannelError {
  return new ChannelError("BAD_USER_INPUT", `sequence: the gateway signed no voucher ${sequence} on this channel`, {
    reason: "voucher_unknown",
    field: "sequence",
  });
}

export function chargesMismatch(detail: string): ChannelError {
  return new ChannelError("BAD_USER_INPUT", `charges: ${detail}`, { reason: "charges_mismatch", field: "charges" });
}

export function openFailed(channel: string, detail: string): ChannelError {
  return new ChannelError("PAYMENT_FAILED", `open_channel ${channel} failed: ${detail}; the deposit's reservation was released`, {
    reason: "channel_open_failed",
    extra: { channel },
  });
}

/** The agent's wallet holds less than the deposit: nothing moved, the reservation was released. */
export function insufficientDeposit(channel: string, detail: string): ChannelError {
  return new ChannelError(
    "INSUFFICIENT_FUNDS",
    `the agent's wallet cannot fund the deposit of channel ${channel} (${detail}); the reservation was released`,
    {
      reason: "channel_open_failed",
      extra: { channel },
    },
  );
}

/** The chain has not answered yet: the row is kept and resolved by the loop; a retry answers it. */
export function channelPending(channel: string, what: string): ChannelError {
  return new ChannelError("SERVICE_UNAVAILABLE", `channel ${channel}: ${what} is not confirmed yet; retry to read its outcome`, {
    reason: "channel_pending",
    extra: { channel, retryable: true },
  });
}

/**
 * The program refused the close (a refusal, not an unknown outcome): the session stays `closing`,
 * the loop tries again, and from the channel's expiry the agent's force close needs no one else.
 */
export function channelCloseRefused(channel: string, detail: string, expiresAt: Date): ChannelError {
  return new ChannelError("CONFLICT", `channel ${channel}: the close was refused by the ledger (${detail})`, {
    reason: "channel_close_refused",
    extra: { channel, refusal: detail, forceCloseAt: expiresAt.toISOString() },
  });
}
