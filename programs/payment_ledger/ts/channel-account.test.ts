import anchor, { BorshCoder } from "@coral-xyz/anchor";
import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import { decodeChannelAccount } from "./channel-account.js";
import { PAYMENT_LEDGER_IDL } from "./idl.js";

const { BN } = anchor;
const coder = new BorshCoder(PAYMENT_LEDGER_IDL);
const [payer, payee, mint, rentPayer, invocation] = Array.from({ length: 5 }, () => Keypair.generate().publicKey);

const channel = {
  payer,
  payee,
  mint,
  channel_id: Array.from({ length: 32 }, (_, i) => i),
  rent_payer: rentPayer,
  invocation,
  protocol: { X402: {} },
  deposit: new BN("9007199254740993"),
  settled: new BN(2_600),
  sequence: new BN(2),
  charges_digest: Array.from({ length: 32 }, (_, i) => 255 - i),
  last_payment_id: new BN(5),
  opened_at: new BN(1_767_225_600),
  opened_slot: new BN(42),
  expires_at: new BN(1_767_229_200),
  withdraw_delay: new BN(600),
  close_requested_at: new BN(0),
  bump: 254,
  escrow_bump: 253,
};

describe("the Channel account", () => {
  it("decodes the settled voucher, the open slot and the terms, amounts exact", async () => {
    const data = await coder.accounts.encode("Channel", channel);
    expect(data.length).toBeLessThanOrEqual(308);
    const state = decodeChannelAccount(data);
    expect(state.payer.equals(payer!)).toBe(true);
    expect(state.invocation?.equals(invocation!)).toBe(true);
    expect(state.protocol).toBe("x402");
    expect(state.depositUnits).toBe(9_007_199_254_740_993n);
    expect(state.settled.cumulativeUnits).toBe(2_600n);
    expect(state.settled.sequence).toBe(2n);
    expect(Array.from(state.settled.chargesDigest)).toEqual(channel.charges_digest);
    expect([state.lastPaymentId, state.openedSlot]).toEqual([5n, 42n]);
    expect([state.expiresAtSeconds, state.withdrawDelaySeconds, state.closeRequestedAtSeconds]).toEqual([1_767_229_200, 600, null]);

    const closing = decodeChannelAccount(
      await coder.accounts.encode("Channel", { ...channel, invocation: null, close_requested_at: new BN(7) }),
    );
    expect([closing.invocation, closing.closeRequestedAtSeconds]).toEqual([null, 7]);
  });

  it("refuses the data of another account", async () => {
    const config = await coder.accounts.encode("Config", {
      authority: payer,
      settlement_mint: mint,
      treasury: payee,
      decimals: 6,
      bump: 255,
    });
    expect(() => decodeChannelAccount(config)).toThrow();
  });
});
