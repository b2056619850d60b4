/**
 * The paying side's memory of MPP sessions (spec 3: "token is stored per agent per service").
 * Tokens are bearer secrets and the database keeps only their hashes, so the clear token lives
 * here, in the paying process's memory, and nowhere else: a restart simply negotiates a new
 * session. A token is forgotten at its expiry, when the service refuses it, and replaced when an
 * answer carries a refreshed `X-MPP-Session`.
 */

interface Entry {
  token: string;
  expiresAt: Date | null;
}

export const MAX_CACHED_SESSIONS = 10_000;

export class MppSessionCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly clock: () => Date = () => new Date()) {}

  private static key(agentId: string, serviceOrigin: string): string {
    return `${agentId}\u0000${serviceOrigin}`;
  }

  /** A token for this agent and service that has not expired, or null (negotiate). */
  get(agentId: string, serviceOrigin: string): string | null {
    const key = MppSessionCache.key(agentId, serviceOrigin);
    const entry = this.entries.get(key);
    if (entry === undefined) return null;
    if (entry.expiresAt !== null && entry.expiresAt.getTime() <= this.clock().getTime()) {
      this.entries.delete(key);
      return null;
    }
    return entry.token;
  }

  /** Stores (or replaces, on refresh) the token an answer carried. */
  put(agentId: string, serviceOrigin: string, token: string, expiresAt: Date | null = null): void {
    const key = MppSessionCache.key(agentId, serviceOrigin);
    if (!this.entries.has(key) && this.entries.size >= MAX_CACHED_SESSIONS) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { token, expiresAt });
  }

  forget(agentId: string, serviceOrigin: string): void {
    this.entries.delete(MppSessionCache.key(agentId, serviceOrigin));
  }
}
