/**
 * The MPP service side run by the gateway for resource servers (`POST /v1/mpp/payments`,
 * `POST /v1/mpp/sessions/redeem`): one `MppService` per paid service, a service being its origin
 * and the wallet it is paid to. Services are stateless apart from their options (sessions and
 * payments live in Postgres), so they are built on first use and kept in a bounded map.
 *
 * Every service shares the settler, the agent directory, the card processor (the named stand-in,
 * api/gateway/card, until a real one is configured) and the spend-policy gate on session charges. The gate
 * reads invocation budgets (sessions of sub-agents) through `invocations`, by default the settler
 * itself when it can read invocation accounts (api/gateway/settlement's `Settlement` can).
 */
import type { PublicKey } from "@solana/web3.js";
import type pg from "pg";
import type { CardProcessor } from "../card/processor.js";
import type { AgentDirectory, Settler } from "../settlement/settler.js";
import { type InvocationReader, SpendPolicyChargeGate } from "./charge-policy.js";
import { MppService, type SessionChargePolicy } from "./service.js";

export const MAX_CACHED_SERVICES = 1_000;

export interface MppGatewayOptions {
  readonly pool: pg.Pool;
  readonly settler: Settler;
  /** The program invocation accounts derive from (PROGRAM_ID). */
  readonly programId: PublicKey;
  readonly agents: AgentDirectory;
  readonly cardProcessor: CardProcessor;
  readonly sessionTtlSeconds?: number;
  readonly refreshBeforeSeconds?: number;
  readonly clock?: () => Date;
  /** Defaults to the spend policy (`SpendPolicyChargeGate`). */
  readonly chargePolicy?: SessionChargePolicy;
  /** Reads invocation accounts for the default gate; defaults to the settler when it has `invocationState`. */
  readonly invocations?: InvocationReader;
}

function invocationReaderOf(settler: Settler, programId: PublicKey): InvocationReader | undefined {
  const candidate = settler as Settler & Partial<InvocationReader>;
  return typeof candidate.invocationState === "function"
    ? { invocationState: (address) => candidate.invocationState!(address), programId }
    : undefined;
}

export class MppGateway {
  private readonly services = new Map<string, MppService>();
  private readonly chargePolicy: SessionChargePolicy;

  constructor(private readonly options: MppGatewayOptions) {
    this.chargePolicy =
      options.chargePolicy ??
      new SpendPolicyChargeGate(options.pool, options.clock, options.invocations ?? invocationReaderOf(options.settler, options.programId));
  }

  get pool(): pg.Pool {
    return this.options.pool;
  }

  /** The service paid at `payee` under `serviceOrigin` (an origin, `scheme://host[:port]`). */
  serviceFor(serviceOrigin: string, payee: string): MppService {
    const key = `${serviceOrigin}\u0000${payee}`;
    const known = this.services.get(key);
    if (known !== undefined) return known;
    const service = new MppService({
      pool: this.options.pool,
      settler: this.options.settler,
      programId: this.options.programId,
      agents: this.options.agents,
      cardProcessor: this.options.cardProcessor,
      serviceOrigin,
      payee,
      chargePolicy: this.chargePolicy,
      ...(this.options.sessionTtlSeconds === undefined ? {} : { sessionTtlSeconds: this.options.sessionTtlSeconds }),
      ...(this.options.refreshBeforeSeconds === undefined ? {} : { refreshBeforeSeconds: this.options.refreshBeforeSeconds }),
      ...(this.options.clock === undefined ? {} : { clock: this.options.clock }),
    });
    if (this.services.size >= MAX_CACHED_SERVICES) {
      const oldest = this.services.keys().next().value;
      if (oldest !== undefined) this.services.delete(oldest);
    }
    this.services.set(key, service);
    return service;
  }
}
