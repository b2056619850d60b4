/**
 * The service's own low-balance alert: the fee payer (fees of co-signed transfers) and the ledger
 * authority (fees and rent of every record) hold SOL; when either falls below its floor, nothing
 * it pays for can happen any more, so the operator is told before that. Fires once when a
 * balance crosses below its floor and again only after it was refilled above it (no alert storm
 * on every pass). The gateway checks after each settlement reconciler pass (gateway.ts) and
 * reports an alert as an error log `service.balance_low` and to its `onServiceAlert` hook: the
 * account-scoped outbox (events.ts) has no operator account to deliver it to.
 */

/** Default floor: 1 SOL, about 100 attested payer states' rent or 100,000 plain transfer fees. */
export const DEFAULT_LOW_BALANCE_FLOOR_LAMPORTS = 1_000_000_000n;

export type ServiceKey = "fee_payer" | "authority";

export interface LowBalanceAlert {
  readonly event: "service.balance_low";
  readonly key: ServiceKey;
  readonly address: string;
  readonly balanceLamports: bigint;
  readonly floorLamports: bigint;
}

export interface WatchedKey {
  readonly key: ServiceKey;
  readonly address: string;
  readonly floorLamports: bigint;
}

export class LowBalanceAlerts {
  readonly #below = new Set<ServiceKey>();

  constructor(private readonly keys: readonly WatchedKey[]) {}

  /** Reads every watched key's balance (`readBalance`, lamports) and answers the alerts that fire. */
  async check(readBalance: (address: string) => Promise<bigint>): Promise<LowBalanceAlert[]> {
    const balances = new Map<ServiceKey, bigint>();
    for (const watched of this.keys) balances.set(watched.key, await readBalance(watched.address));
    return this.evaluate(balances);
  }

  /** The alerts that fire for these balances (a key missing from `balances` keeps its state). */
  evaluate(balances: ReadonlyMap<ServiceKey, bigint>): LowBalanceAlert[] {
    const fired: LowBalanceAlert[] = [];
    for (const watched of this.keys) {
      const balance = balances.get(watched.key);
      if (balance === undefined) continue;
      if (balance >= watched.floorLamports) {
        this.#below.delete(watched.key);
        continue;
      }
      if (this.#below.has(watched.key)) continue;
      this.#below.add(watched.key);
      fired.push({
        event: "service.balance_low",
        key: watched.key,
        address: watched.address,
        balanceLamports: balance,
        floorLamports: watched.floorLamports,
      });
    }
    return fired;
  }
}
