/**
 * Channel sessions on the paying side (wire format docs/sdk.md "Channel sessions"): a 402
 * offering the MPP `session` intent (or x402 v2 `upto` over our vouchers) is paid from an
 * escrowed payment_ledger channel instead of one transfer per request. The gateway opens the
 * channel within the agent's spend policy (`POST /v1/agents/{id}/channels`), signs each
 * cumulative voucher (`POST /v1/channels/{c}/vouchers`) and settles and refunds it at close.
 *
 * One channel per (agent scope, service origin), in this process's memory; a channel the service
 * or the gateway calls finished is forgotten and the next request opens a new one. The key never
 * leaves the gateway: this side holds no secret.
 */
import { callApi, type ApiAnswer } from "./api-call.js";
import { PaymentError, PaymentProtocolError, ServiceError } from "./errors.js";
import { unitsToDecimal, unitsToUsdc, type Usdc, usdcToUnits } from "./money.js";
import type { MppChallengeParams } from "./payment-required.js";
import type { FetchFunction, Transport } from "./transport.js";

export interface ChannelSessionOptions {
  /** Deposit = this many calls at the first price seen (default 100). */
  depositMultiple?: number;
  /** Never escrow more than this per channel (default 10 USDC). */
  maxDeposit?: Usdc;
  /** Channel lifetime (default 3600 s). */
  expiresInSeconds?: number;
  /** Seconds between the close request and the refund (the gateway's default when absent). */
  withdrawDelaySeconds?: number;
}

/**
 * What a channel offer asks for: an MPP `session` challenge (its decoded `request`), or an x402 v2
 * `upto` requirement with `extra.paymentFlow: "apg-channel-voucher"` (the same voucher in
 * `PAYMENT-SIGNATURE`; docs/protocols.md "x402 sessions").
 */
export interface SessionChallenge {
  readonly wire: "mpp-session" | "x402-upto";
  /** The MPP challenge echoed in the credential (`mpp-session`). */
  readonly challenge?: MppChallengeParams;
  /** The x402 requirement echoed as `accepted` (`x402-upto`). */
  readonly requirement?: Record<string, unknown>;
  readonly amountUnits: bigint;
  readonly mint: string;
  readonly recipient: string;
  readonly channelProgram: string;
}

export interface OpenChannel {
  readonly channel: string;
  readonly payee: string;
  readonly serviceOrigin: string;
  readonly depositUnits: bigint;
  readonly openTx: string;
  /** The offer the last request answered (its challenge or requirement is echoed). */
  offer: SessionChallenge;
  /** The last voucher the gateway signed for it. */
  sequence: bigint;
  cumulativeUnits: bigint;
  /** The service has seen the channel (its first voucher went with `action: open`). */
  announced: boolean;
  /** The last endpoint paid: where `close` is announced. */
  lastEndpoint: string;
  /** The open transaction's explorer link, learned once. */
  explorer?: string;
}

export interface ChannelPaid {
  readonly answer: ApiAnswer;
  readonly channel: OpenChannel;
  readonly amountUnits: bigint;
  readonly sequence: bigint;
  readonly paymentId: string;
  /** The service's `Payment-Receipt`, decoded. */
  readonly receipt: Record<string, unknown>;
}

const MAX_CHANNELS = 1_000;
/** Service refusals meaning this channel will not take another voucher. */
const CHANNEL_OVER = new Set([
  "channel-finalized",
  "channel-not-found",
  "amount-exceeds-deposit",
  "channel-expired",
  // The payee's chain and the gateway's diverged (a voucher signed but never delivered, after a
  // lost request): no later voucher of this channel can be accepted, a new channel can.
  "sequence-mismatch",
  "cumulative-mismatch",
  "digest-mismatch",
  "payment-id-reused",
]);
/** Gateway refusals meaning the same. */
const GATEWAY_CHANNEL_OVER = /^(channel_deposit_exhausted|channel_closed|channel_not_found|channel_not_open)$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The first `solana` `session` challenge of a 402, decoded; undefined when it offers none. */
export function readSessionChallenge(challenges: readonly MppChallengeParams[] | undefined): SessionChallenge | undefined {
  for (const challenge of challenges ?? []) {
    if (challenge.method !== "solana" || challenge.intent !== "session") continue;
    let request: unknown;
    try {
      request = JSON.parse(Buffer.from(challenge.request, "base64url").toString("utf8"));
    } catch {
      continue;
    }
    if (!isRecord(request) || !isRecord(request.methodDetails)) continue;
    const { amount, currency, recipient } = request;
    const program = request.methodDetails.channelProgram;
    if (typeof amount !== "string" || !/^[1-9]\d{0,19}$/.test(amount)) continue;
    if (typeof currency !== "string" || typeof recipient !== "string" || typeof program !== "string") continue;
    return { wire: "mpp-session", challenge, amountUnits: BigInt(amount), mint: currency, recipient, channelProgram: program };
  }
  return undefined;
}

/** The `upto` requirement of an x402 v2 `PAYMENT-REQUIRED` that pays by our channel vouchers; undefined otherwise. */
export function readUptoRequirement(required: Record<string, unknown> | undefined): SessionChallenge | undefined {
  const accepts = Array.isArray(required?.accepts) ? required.accepts : [];
  for (const requirement of accepts) {
    if (!isRecord(requirement) || requirement.scheme !== "upto" || !isRecord(requirement.extra)) continue;
    if (requirement.extra.paymentFlow !== "apg-channel-voucher") continue;
    const { amount, asset, payTo } = requirement;
    const program = requirement.extra.channelProgram;
    if (typeof amount !== "string" || !/^[1-9]\d{0,19}$/.test(amount)) continue;
    if (typeof asset !== "string" || typeof payTo !== "string" || typeof program !== "string") continue;
    return { wire: "x402-upto", requirement, amountUnits: BigInt(amount), mint: asset, recipient: payTo, channelProgram: program };
  }
  return undefined;
}

/** How many endpoint prices are remembered (the oldest goes first). */
const MAX_PRICES = 10_000;

export class ChannelSessionPayer {
  readonly #channels = new Map<string, OpenChannel>();
  /** Channels no longer used (over, or their state uncertain), still to be closed. */
  readonly #retired: Array<{ key: string; channel: OpenChannel }> = [];
  /** Per-call price of each endpoint (host + path) learned from its 402: a known one pays without asking again. */
  readonly #prices = new Map<string, bigint>();
  readonly #depositMultiple: bigint;
  readonly #maxDepositUnits: bigint;
  readonly #expiresInSeconds: number;
  readonly #withdrawDelaySeconds: number | undefined;

  constructor(
    private readonly transport: Transport,
    private readonly fetchFn: FetchFunction,
    options: ChannelSessionOptions = {},
  ) {
    const multiple = options.depositMultiple ?? 100;
    if (!Number.isSafeInteger(multiple) || multiple < 1) throw new TypeError("channelSessions.depositMultiple must be a positive integer");
    this.#depositMultiple = BigInt(multiple);
    this.#maxDepositUnits = usdcToUnits((options.maxDeposit ?? { usdc: 10 }).usdc);
    this.#expiresInSeconds = options.expiresInSeconds ?? 3_600;
    this.#withdrawDelaySeconds = options.withdrawDelaySeconds;
  }

  price(endpoint: string): bigint | undefined {
    return this.#prices.get(endpointKey(endpoint));
  }

  learnPrice(endpoint: string, amountUnits: bigint): void {
    const key = endpointKey(endpoint);
    this.#prices.delete(key);
    if (this.#prices.size >= MAX_PRICES) {
      const oldest = this.#prices.keys().next().value;
      if (oldest !== undefined) this.#prices.delete(oldest);
    }
    this.#prices.set(key, amountUnits);
  }

  static key(scope: string, origin: string): string {
    return `${scope}\n${origin}`;
  }

  /** The open channel of (scope, origin), if any. */
  get(scope: string, origin: string): OpenChannel | undefined {
    return this.#channels.get(ChannelSessionPayer.key(scope, origin));
  }

  /** No more vouchers on (scope, origin)'s channel; it is still closed by `closeAll` (its deposit comes back). */
  forget(scope: string, origin: string): void {
    const key = ChannelSessionPayer.key(scope, origin);
    const channel = this.#channels.get(key);
    if (channel === undefined) return;
    this.#channels.delete(key);
    if (this.#retired.length >= MAX_CHANNELS) this.#retired.shift();
    this.#retired.push({ key, channel });
  }

  #retire(channel: OpenChannel): void {
    const key = [...this.#channels].find(([, open]) => open === channel)?.[0];
    if (key === undefined) return;
    const [scope, origin] = key.split("\n") as [string, string];
    this.forget(scope, origin);
  }

  /** Opens a channel to the challenge's recipient for `origin` through the gateway. */
  async open(
    agentId: string,
    scope: string,
    origin: string,
    offer: SessionChallenge,
    parentTxHash: string | undefined,
    endpoint: string,
  ): Promise<OpenChannel> {
    let depositUnits = offer.amountUnits * this.#depositMultiple;
    if (depositUnits > this.#maxDepositUnits) depositUnits = this.#maxDepositUnits;
    if (depositUnits < offer.amountUnits) {
      throw new PaymentProtocolError(
        `one call costs ${unitsToDecimal(offer.amountUnits)} USDC, above channelSessions.maxDeposit`,
        endpoint,
      );
    }
    const opened = await this.transport.request<Record<string, unknown>>("POST", `/v1/agents/${encodeURIComponent(agentId)}/channels`, {
      body: {
        payee: offer.recipient,
        serviceOrigin: origin,
        deposit: unitsToDecimal(depositUnits),
        protocol: "mpp",
        expiresInSeconds: this.#expiresInSeconds,
        ...(this.#withdrawDelaySeconds === undefined ? {} : { withdrawDelaySeconds: this.#withdrawDelaySeconds }),
        ...(parentTxHash === undefined ? {} : { parentTxHash }),
      },
    });
    if (typeof opened.channel !== "string" || typeof opened.openTx !== "string") {
      throw new PaymentError("the gateway opened a channel without naming it");
    }
    if (typeof opened.programId === "string" && opened.programId !== offer.channelProgram) {
      throw new PaymentProtocolError(
        `the service asks for channel program ${offer.channelProgram}, the gateway's is ${opened.programId}`,
        endpoint,
      );
    }
    const channel: OpenChannel = {
      channel: opened.channel,
      payee: offer.recipient,
      serviceOrigin: origin,
      depositUnits: BigInt(String(opened.depositUnits ?? depositUnits)),
      openTx: opened.openTx,
      offer,
      sequence: 0n,
      cumulativeUnits: 0n,
      announced: false,
      lastEndpoint: endpoint,
    };
    const key = ChannelSessionPayer.key(scope, origin);
    if (this.#channels.size >= MAX_CHANNELS && !this.#channels.has(key)) {
      const oldest = this.#channels.keys().next().value;
      if (oldest !== undefined) this.#channels.delete(oldest);
    }
    this.#channels.set(key, channel);
    return channel;
  }

  /**
   * One paid request on `channel`: a voucher from the gateway, then the request with it.
   * Answers `{ over: true }` when the channel can take no more vouchers (the caller forgets it and
   * opens another); throws the gateway's typed error for a policy refusal. An answer with the
   * payee's receipt is paid whatever its status (the payee accepted the voucher before its
   * handler ran); a refusal retires the channel (its signed voucher was not taken, so no later
   * voucher could follow it).
   */
  async payRequest(
    channel: OpenChannel,
    request: { url: string; method: string; headers: Record<string, string>; body?: string },
    amountUnits: bigint,
    signal: AbortSignal | undefined,
  ): Promise<ChannelPaid | { over: true; answer?: ApiAnswer }> {
    let voucher: Record<string, unknown>;
    try {
      voucher = await this.transport.request<Record<string, unknown>>(
        "POST",
        `/v1/channels/${encodeURIComponent(channel.channel)}/vouchers`,
        {
          body: { endpoint: request.url, amount: unitsToDecimal(amountUnits) },
          ...(signal === undefined ? {} : { signal }),
        },
      );
    } catch (error) {
      // The gateway names the rule in the problem's `reason` (its code is a registry one such as CONFLICT).
      const reason = error instanceof ServiceError && isRecord(error.detail) ? error.detail.reason : undefined;
      if (typeof reason === "string" && GATEWAY_CHANNEL_OVER.test(reason)) return { over: true };
      throw error;
    }
    const paying: Record<string, string> =
      channel.offer.wire === "x402-upto"
        ? { "payment-signature": this.#uptoPayload(channel, voucher) }
        : { authorization: `Payment ${this.#credential(channel, channel.announced ? "voucher" : "open", voucher)}` };
    let answer: ApiAnswer;
    try {
      answer = await callApi(
        { ...request, headers: { ...request.headers, ...paying } },
        {
          fetch: this.fetchFn,
          timeoutMs: this.transport.timeout,
          retry: { ...this.transport.retryOptions, maxRetries: 0 },
          retryServerErrors: false,
          signal,
        },
      );
    } catch (error) {
      // Whether the payee took this voucher is unknown: the channel cannot go on (the next voucher
      // would follow one the payee may never have seen). The next request opens a new channel.
      this.#retire(channel);
      throw new PaymentError(`the paid request to ${request.url} got no answer; channel ${channel.channel} is retired`, { cause: error });
    }
    channel.sequence = BigInt(String(voucher.sequence));
    channel.cumulativeUnits = BigInt(String(voucher.cumulativeUnits));
    channel.lastEndpoint = request.url;
    const receipt =
      channel.offer.wire === "x402-upto"
        ? readUptoResponse(answer.headers.get("payment-response"))
        : readReceipt(answer.headers.get("payment-receipt"));
    if (receipt !== undefined) {
      channel.announced = true;
      return {
        answer,
        channel,
        amountUnits,
        sequence: channel.sequence,
        paymentId: String(voucher.paymentId),
        receipt,
      };
    }
    const refusal =
      answer.headers.get("x-mpp-error") ??
      answer.headers.get("x-payment-error") ??
      (isRecord(answer.data) ? String(answer.data.title ?? "") : "");
    this.#retire(channel);
    if ((answer.status === 402 || answer.status === 410) && CHANNEL_OVER.has(refusal)) return { over: true, answer };
    throw new PaymentError(
      `${request.url} refused the channel voucher ${channel.sequence} on ${channel.channel}: ${answer.status}${refusal === "" ? "" : ` ${refusal}`}`,
    );
  }

  #credential(channel: OpenChannel, action: "open" | "voucher" | "close", voucher?: Record<string, unknown>): string {
    const payload = { action, channelId: channel.channel, ...(voucher === undefined ? {} : voucherPayload(channel, voucher)) };
    return Buffer.from(JSON.stringify({ challenge: channel.offer.challenge, payload }), "utf8").toString("base64url");
  }

  #uptoPayload(channel: OpenChannel, voucher: Record<string, unknown>): string {
    const payload = { channelId: channel.channel, ...voucherPayload(channel, voucher) };
    return Buffer.from(JSON.stringify({ x402Version: 2, accepted: channel.offer.requirement, payload }), "utf8").toString("base64");
  }

  /**
   * Closes every channel of `scope`: the service is told first (`action: close`, so its payee
   * presents the highest voucher it accepted), then the gateway closes cooperatively. A service
   * that does not answer does not stop the close (its unpresented vouchers are then void).
   */
  async closeAll(scope: string): Promise<Array<{ channel: string; settledCumulative: Usdc; refunded: Usdc; closeTx: string | null }>> {
    const closed = [];
    const retired = this.#retired.filter((r) => r.key.startsWith(`${scope}\n`));
    for (const r of retired) this.#retired.splice(this.#retired.indexOf(r), 1);
    const mine = [...this.#channels].filter(([key]) => key.startsWith(`${scope}\n`));
    for (const [key, channel, wasRetired] of [
      ...retired.map((r) => [r.key, r.channel, true] as const),
      ...mine.map(([k, c]) => [k, c, false] as const),
    ]) {
      if (channel.announced && channel.offer.wire === "mpp-session") {
        await callApi(
          {
            url: channel.lastEndpoint,
            method: "GET",
            headers: { accept: "application/json", authorization: `Payment ${this.#credential(channel, "close")}` },
          },
          { fetch: this.fetchFn, timeoutMs: this.transport.timeout, retry: this.transport.retryOptions, retryServerErrors: true },
        ).catch(() => undefined);
      }
      let answer: Record<string, unknown>;
      try {
        answer = await this.transport.request<Record<string, unknown>>(
          "POST",
          `/v1/channels/${encodeURIComponent(channel.channel)}/close`,
          {
            body: {},
          },
        );
      } catch (error) {
        // A retired channel may be past closing already (the gateway closes expired ones): best effort.
        if (wasRetired) continue;
        throw error;
      }
      if (!wasRetired) this.#channels.delete(key);
      closed.push({
        channel: channel.channel,
        settledCumulative: { usdc: unitsToUsdc(BigInt(String(answer.settledCumulativeUnits ?? unitsOf(answer.settledCumulative)))) },
        refunded: { usdc: unitsToUsdc(BigInt(String(answer.refundedUnits ?? unitsOf(answer.refunded)))) },
        closeTx: typeof answer.closeTx === "string" ? answer.closeTx : null,
      });
    }
    return closed;
  }
}

function endpointKey(endpoint: string): string {
  const url = new URL(endpoint);
  return `${url.host}${url.pathname}`;
}

function unitsOf(decimal: unknown): string {
  if (typeof decimal !== "string") return "0";
  const [whole, fraction = ""] = decimal.split(".");
  return (BigInt(whole ?? "0") * 1_000_000n + BigInt(fraction.padEnd(6, "0").slice(0, 6) || "0")).toString();
}

/** The voucher as both wires carry it (the gateway's voucher answer, re-shaped). */
function voucherPayload(channel: OpenChannel, voucher: Record<string, unknown>): Record<string, unknown> {
  return {
    voucher: {
      channelId: channel.channel,
      cumulativeAmount: String(voucher.cumulativeUnits),
      sequence: String(voucher.sequence),
      paymentId: String(voucher.paymentId),
      amount: String(voucher.amountUnits),
      endpoint: voucher.endpoint,
      digest: voucher.digest,
    },
    signer: voucher.signer,
    signature: voucher.signature,
    signatureType: "ed25519",
  };
}

function readUptoResponse(header: string | null): Record<string, unknown> | undefined {
  if (header === null || header.length > 8_192) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(header.trim(), "base64").toString("utf8"));
    return isRecord(parsed) && parsed.success === true && isRecord(parsed.extra) && typeof parsed.extra.channel === "string"
      ? parsed
      : undefined;
  } catch {
    return undefined;
  }
}

function readReceipt(header: string | null): Record<string, unknown> | undefined {
  if (header === null || header.length > 8_192) return undefined;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(header.trim(), "base64url").toString("utf8"));
    return isRecord(parsed) && parsed.intent === "session" && parsed.status === "success" ? parsed : undefined;
  } catch {
    return undefined;
  }
}
