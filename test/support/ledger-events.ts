/** The PaymentRecorded events of a confirmed ledger transaction, read back through RPC. */
import type { Connection } from "@solana/web3.js";
import { expect } from "vitest";
import {
  decodeTransactionEvents,
  eventsNamed,
  type PaymentRecorded,
  PAYMENT_LEDGER_PROGRAM_ID,
} from "../../programs/payment_ledger/ts/index.js";

export async function recordedPayments(connection: Connection, signature: string): Promise<PaymentRecorded[]> {
  const tx = await connection.getTransaction(signature, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  if (tx === null) throw new Error(`no transaction ${signature}`);
  return eventsNamed(decodeTransactionEvents(tx, PAYMENT_LEDGER_PROGRAM_ID), "PaymentRecorded");
}

/** The one PaymentRecorded event of `signature` (the test fails if there are more or none). */
export async function recordedPayment(connection: Connection, signature: string): Promise<PaymentRecorded> {
  const events = await recordedPayments(connection, signature);
  expect(events).toHaveLength(1);
  return events[0]!;
}
