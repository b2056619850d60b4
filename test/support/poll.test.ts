import { describe, expect, it } from "vitest";
import { pollUntil } from "./poll.js";

describe("pollUntil", () => {
  it("returns the first answer that is not undefined, null or false, without waiting further", async () => {
    const answers: unknown[] = [undefined, null, false, 0, 7];
    let calls = 0;
    const value = await pollUntil(() => answers[calls++], { timeoutMs: 5_000, intervalMs: 1, what: "a value" });
    expect(value).toBe(0);
    expect(calls).toBe(4);
  });

  it("throws after the timeout with an error naming what was awaited and its last state", async () => {
    let calls = 0;
    const started = Date.now();
    const waiting = pollUntil(
      () => {
        calls += 1;
        return false;
      },
      { timeoutMs: 50, intervalMs: 5, what: () => `the receiver (${calls} checks)` },
    );
    await expect(waiting).rejects.toThrow(/^timed out after 50 ms waiting for the receiver \(\d+ checks\)$/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
    expect(calls).toBeGreaterThan(1);
  });
});
