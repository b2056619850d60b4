/**
 * MPP session tokens on the paying side (spec 4.4 step 5, 4.7 `pay` step 4): one clear token per
 * (scope, service origin), in this process's memory only. The scope is the agent, or the agent
 * and the invocation it pays under for a `withParent` client (`sessionScope` in pay/scope.ts). Nothing
 * persists it; a restarted process negotiates a new session. Bounded: the oldest entry goes when
 * the map is full.
 */
export interface MppSession {
  token: string;
  /** What one call costs on this session (the amount the session was negotiated for). */
  amountUnits: bigint;
  sessionId?: string;
}

const MAX_SESSIONS = 1_000;

export class MppSessions {
  readonly #sessions = new Map<string, MppSession>();

  static key(scope: string, origin: string): string {
    return `${scope}\n${origin}`;
  }

  get(scope: string, origin: string): MppSession | undefined {
    return this.#sessions.get(MppSessions.key(scope, origin));
  }

  put(scope: string, origin: string, session: MppSession): void {
    const key = MppSessions.key(scope, origin);
    this.#sessions.delete(key);
    if (this.#sessions.size >= MAX_SESSIONS) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest !== undefined) this.#sessions.delete(oldest);
    }
    this.#sessions.set(key, session);
  }

  forget(scope: string, origin: string): void {
    this.#sessions.delete(MppSessions.key(scope, origin));
  }

  /** Never print tokens. */
  toJSON(): { sessions: number } {
    return { sessions: this.#sessions.size };
  }
}
