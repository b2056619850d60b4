/**
 * payment_ledger on a real local ledger, driven the way the gateway will drive it: Anchor over a
 * web3.js Connection, instructions and events from the checked-in IDL.
 */
import { createHash } from "node:crypto";
import { type AnchorProvider, BorshCoder } from "@coral-xyz/anchor";
import { type Keypair, type PublicKey, Transaction, type TransactionInstruction } from "@solana/web3.js";
import bs58 from "bs58";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decodeTransactionEvents,
  endpointHash,
  eventsNamed,
  findLedgerError,
  invocationPda,
  type InvocationOpened,
  openInvocationInstruction,
  PAYMENT_LEDGER_IDL,
  PAYMENT_LEDGER_PROGRAM_ID,
  type PaymentRecorded,
} from "../programs/payment_ledger/ts/index.js";
import {
  type AgentWallet,
  createAgentWallet,
  type LedgerAccess,
  ledgerAccess,
  type PaymentTerms,
  recordPayment as recordLedgerPayment,
  tokenBalanceUnits,
} from "../scripts/agent-wallets.js";
import { type Localnet, startLocalnet } from "../scripts/localnet.js";

const USDC = 1_000_000n;
const ENDPOINT = "api.example.com/v1/quote";

let localnet: Localnet;
let provider: AnchorProvider;
let ledger: LedgerAccess;

beforeAll(async () => {
  localnet = await startLocalnet();
  ledger = ledgerAccess(localnet);
  provider = ledger.provider;
});

afterAll(async () => {
  await localnet?.stop();
});

// ---- helpers ---------------------------------------------------------------------------------

/** An x402 payment settled by our facilitator: the transfer and the record in one instruction. */
function atomicX402(paymentId: bigint, amountUnits: bigint): PaymentTerms {
  return { paymentId, amountUnits, protocol: "x402", rail: "stablecoin", endpointHash: endpointHash(ENDPOINT) };
}

function recordPayment(payer: AgentWallet, payee: AgentWallet, terms: PaymentTerms, invocation?: PublicKey): Promise<string> {
  return recordLedgerPayment(ledger, payer, payee, terms, invocation);
}

function send(instruction: TransactionInstruction, signers: Keypair[]): Promise<string> {
  return provider.sendAndConfirm(new Transaction().add(instruction), signers);
}

async function confirmedTransaction(signature: string) {
  const tx = await provider.connection.getTransaction(signature, {
    commitment: "confirmed",
    maxSupportedTransactionVersion: 0,
  });
  if (tx === null) throw new Error(`getTransaction(${signature}) returned null at confirmed`);
  return tx;
}

async function paymentEvent(signature: string): Promise<PaymentRecorded> {
  const events = eventsNamed(decodeTransactionEvents(await confirmedTransaction(signature), PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded");
  expect(events).toHaveLength(1);
  return events[0]!;
}

/** The error a refused transaction was rejected with (fails the test if it was accepted). */
async function refusal(attempt: Promise<unknown>): Promise<unknown> {
  try {
    await attempt;
  } catch (error) {
    return error;
  }
  throw new Error("the ledger accepted a transaction it must refuse");
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");
const accountsCoder = new BorshCoder(PAYMENT_LEDGER_IDL);

// ---- rules -----------------------------------------------------------------------------------

describe("payment_ledger on the local ledger", () => {
  it("an atomic x402 payment moves exactly its amount from the agent to the service and records it", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: 10n * USDC });
    const service = await createAgentWallet(ledger);
    expect(await tokenBalanceUnits(provider, agent.tokenAccount)).toBe(10n * USDC);
    const amountUnits = 1_234_567n;

    const signature = await recordPayment(agent, service, atomicX402(1n, amountUnits));

    expect(await tokenBalanceUnits(provider, agent.tokenAccount)).toBe(10n * USDC - amountUnits);
    expect(await tokenBalanceUnits(provider, service.tokenAccount)).toBe(amountUnits);

    const tx = await confirmedTransaction(signature);
    const programId = PAYMENT_LEDGER_PROGRAM_ID.toBase58();
    const logs = tx.meta?.logMessages ?? [];
    expect(logs[0]).toBe(`Program ${programId} invoke [1]`);
    // The transfer CPI to SPL Token, then the emit_cpi! self-invocation carrying the event.
    const transferAt = logs.indexOf("Program TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA invoke [2]");
    expect(transferAt).toBeGreaterThan(0);
    expect(logs.indexOf(`Program ${programId} invoke [2]`)).toBeGreaterThan(transferAt);
    expect(logs.at(-1)).toBe(`Program ${programId} success`);

    const decoded = decodeTransactionEvents(tx, PAYMENT_LEDGER_PROGRAM_ID);
    expect(decoded.source).toBe("inner-instructions");
    expect(decoded.logTruncated).toBe(false);
    expect(decoded.signature).toBe(signature);
    const event = await paymentEvent(signature);
    expect(event.payer.toBase58()).toBe(agent.publicKey.toBase58());
    expect(event.payee.toBase58()).toBe(service.publicKey.toBase58());
    expect(event.paymentId).toBe(1n);
    expect(event.amountUnits).toBe(amountUnits);
    expect(event.mint.toBase58()).toBe(localnet.info.mint.toBase58());
    expect(event.protocol).toBe("x402");
    expect(event.rail).toBe("stablecoin");
    expect(event.atomic).toBe(true);
    expect(hex(event.endpointHash)).toBe(createHash("sha256").update(ENDPOINT).digest("hex"));
    expect(event.settlementReference).toBeNull();
    expect(event.parent).toBeNull();
    expect(event.slot).toBe(BigInt(tx.slot));
    if (tx.blockTime !== null && tx.blockTime !== undefined) {
      expect(Math.abs(event.recordedAtSeconds - tx.blockTime)).toBeLessThanOrEqual(2);
    }
  });

  it("the program's own msg! lines appear in the transaction logs, as on-chain", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: USDC });
    const service = await createAgentWallet(ledger);
    const signature = await recordPayment(agent, service, atomicX402(1n, 1n));
    const logs = (await confirmedTransaction(signature)).meta?.logMessages ?? [];
    expect(logs).toContain("Program log: Instruction: RecordPayment");
  });

  it("a card payment is recorded without moving tokens", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: USDC });
    const service = await createAgentWallet(ledger);
    const signature = await recordPayment(agent, service, { ...atomicX402(1n, 700_000n), protocol: "mpp", rail: "card" });
    expect(await tokenBalanceUnits(provider, agent.tokenAccount)).toBe(USDC);
    const event = await paymentEvent(signature);
    expect(event).toMatchObject({ protocol: "mpp", rail: "card", atomic: false, amountUnits: 700_000n });
  });

  it("a sub-agent may spend exactly its invocation budget and not one unit more", async () => {
    const orchestrator = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
    const subAgent = await createAgentWallet(ledger, { usdcUnits: 5n * USDC });
    const service = await createAgentWallet(ledger);
    const budgetUnits = 3n * USDC;

    // The invoking transaction: the orchestrator pays the sub-agent's endpoint.
    const parent = await recordPayment(orchestrator, subAgent, atomicX402(1n, USDC / 10n));
    const parentSignature = bs58.decode(parent);
    const opened = await send(
      await openInvocationInstruction({
        programId: PAYMENT_LEDGER_PROGRAM_ID,
        authority: localnet.info.authority,
        invoker: orchestrator.publicKey,
        parentSignature,
        subAgent: subAgent.publicKey,
        budgetUnits,
      }),
      [orchestrator.keypair],
    );
    const invocation = invocationPda(parentSignature, subAgent.publicKey, PAYMENT_LEDGER_PROGRAM_ID).address;
    const [openedEvent] = eventsNamed(
      decodeTransactionEvents(await confirmedTransaction(opened), PAYMENT_LEDGER_PROGRAM_ID),
      "InvocationOpened",
    );
    expect(openedEvent).toBeDefined();
    const expectOpened = (event: InvocationOpened): void => {
      expect(event.invocation.toBase58()).toBe(invocation.toBase58());
      expect(event.invoker.toBase58()).toBe(orchestrator.publicKey.toBase58());
      expect(event.subAgent.toBase58()).toBe(subAgent.publicKey.toBase58());
      expect(bs58.encode(event.parentSignature)).toBe(parent);
      expect(event.budgetUnits).toBe(budgetUnits);
    };
    expectOpened(openedEvent!);

    const before = await tokenBalanceUnits(provider, subAgent.tokenAccount);
    const amounts = [1_000_000n, 1_500_000n, 500_000n]; // sums to the budget exactly
    let spent = 0n;
    for (const [i, amountUnits] of amounts.entries()) {
      const signature = await recordPayment(subAgent, service, atomicX402(BigInt(i + 1), amountUnits), invocation);
      spent += amountUnits;
      const event = await paymentEvent(signature);
      expect(event.parent?.invocation.toBase58()).toBe(invocation.toBase58());
      expect(bs58.encode(event.parent?.parentSignature ?? new Uint8Array())).toBe(parent);
      expect(event.parent?.budgetUnits).toBe(budgetUnits);
      expect(event.parent?.spentUnits).toBe(spent);
    }
    expect(spent).toBe(budgetUnits);

    const error = await refusal(recordPayment(subAgent, service, atomicX402(4n, 1n), invocation));
    expect(findLedgerError(error, PAYMENT_LEDGER_PROGRAM_ID)?.errorName).toBe("InvocationBudgetExceeded");

    expect(await tokenBalanceUnits(provider, subAgent.tokenAccount)).toBe(before - budgetUnits);
    expect(await tokenBalanceUnits(provider, service.tokenAccount)).toBe(budgetUnits);
    const account = await provider.connection.getAccountInfo(invocation, "confirmed");
    expect(account?.owner.toBase58()).toBe(PAYMENT_LEDGER_PROGRAM_ID.toBase58());
    const stored = accountsCoder.accounts.decode<{ spent: { toString(): string }; payment_count: number }>("Invocation", account!.data);
    expect(BigInt(stored.spent.toString())).toBe(budgetUnits);
    expect(stored.payment_count).toBe(3);
  });

  it("a payment id is recorded at most once per payer", async () => {
    const agent = await createAgentWallet(ledger, { usdcUnits: USDC });
    const other = await createAgentWallet(ledger, { usdcUnits: USDC });
    const service = await createAgentWallet(ledger);
    await recordPayment(agent, service, atomicX402(7n, 100n));

    const error = await refusal(recordPayment(agent, service, atomicX402(7n, 200n)));
    expect(findLedgerError(error, PAYMENT_LEDGER_PROGRAM_ID)?.errorName).toBe("DuplicatePaymentId");
    expect(await tokenBalanceUnits(provider, agent.tokenAccount)).toBe(USDC - 100n);

    // Ids are per payer: another agent may use the same id.
    await recordPayment(other, service, atomicX402(7n, 300n));
    expect(await tokenBalanceUnits(provider, service.tokenAccount)).toBe(400n);
  });
});
