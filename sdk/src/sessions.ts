/**
 * MPP session tokens on the paying side (spec 4.4 step 5, 4.7 `pay` step 4): one clear token per
 * (agent, service origin), in this process's memory only. Nothing persists it; a restarted
 * process negotiates a new session. Bounded: the oldest entry goes when the map is full.
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

  static key(agentId: string, origin: string): string {
    return `${agentId}\n${origin}`;
  }

  get(agentId: string, origin: string): MppSession | undefined {
    return this.#sessions.get(MppSessions.key(agentId, origin));
  }

  put(agentId: string, origin: string, session: MppSession): void {
    const key = MppSessions.key(agentId, origin);
    this.#sessions.delete(key);
    if (this.#sessions.size >= MAX_SESSIONS) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest !== undefined) this.#sessions.delete(oldest);
    }
    this.#sessions.set(key, session);
  }

  forget(agentId: string, origin: string): void {
    this.#sessions.delete(MppSessions.key(agentId, origin));
  }

  /** Never print tokens. */
  toJSON(): { sessions: number } {
    return { sessions: this.#sessions.size };
  }
}
