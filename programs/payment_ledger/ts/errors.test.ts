import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import {
  findLedgerError,
  isLedgerError,
  LEDGER_ERRORS,
  ledgerErrorByCode,
  ledgerErrorCode,
  ledgerErrorCodeFromTransactionError,
} from "./errors.js";
import { PAYMENT_LEDGER_PROGRAM_ID } from "./idl.js";

const id = PAYMENT_LEDGER_PROGRAM_ID.toBase58();

describe("program errors", () => {
  it("codes are numbered from 6000 in declaration order and never move", () => {
    // Appending is allowed; changing any of these is a breaking change for stored records.
    expect(ledgerErrorCode("Unauthorized")).toBe(6000);
    expect(ledgerErrorCode("DuplicatePaymentId")).toBe(6003);
    expect(ledgerErrorCode("InvocationBudgetExceeded")).toBe(6010);
    expect(ledgerErrorByCode(6010)?.message).toBe("payment would exceed the invocation budget");
    expect(LEDGER_ERRORS.size).toBeGreaterThanOrEqual(13);
  });

  it("channel errors are appended after the existing ones", () => {
    expect(ledgerErrorCode("MissingSettlementReference")).toBe(6013);
    expect(ledgerErrorCode("InvalidChannelExpiry")).toBe(6014);
    expect(ledgerErrorCode("NotChannelSettler")).toBe(6019);
    expect(ledgerErrorCode("VoucherNotIncreasing")).toBe(6021);
    expect(ledgerErrorCode("VoucherExceedsDeposit")).toBe(6022);
    expect(ledgerErrorCode("ChargesDoNotMatchDelta")).toBe(6024);
    expect(ledgerErrorCode("VoucherSignerMismatch")).toBe(6028);
    expect(ledgerErrorCode("WithdrawDelayNotElapsed")).toBe(6032);
    expect(ledgerErrorCode("ChannelNotExpired")).toBe(6033);
    expect(ledgerErrorCode("ChannelAccountMismatch")).toBe(6034);
    expect(ledgerErrorCode("RefundNotToPayerAssociatedAccount")).toBe(6035);
    expect(LEDGER_ERRORS.size).toBe(36);
    const codes = [...LEDGER_ERRORS.keys()].sort((a, b) => a - b);
    expect(codes).toEqual(Array.from({ length: 36 }, (_, i) => 6000 + i));
  });

  it("an unknown error name is a programming error", () => {
    expect(() => ledgerErrorCode("NoSuchError")).toThrow(RangeError);
    expect(() => isLedgerError(new Error("x"), "NoSuchError", PAYMENT_LEDGER_PROGRAM_ID)).toThrow(RangeError);
  });

  it("a preflight failure maps to the program's error name from its logs", () => {
    const failure = Object.assign(new Error("Simulation failed"), {
      logs: [
        `Program ${id} invoke [1]`,
        "Program log: AnchorError occurred. Error Code: InvocationBudgetExceeded. Error Number: 6010.",
        `Program ${id} consumed 5000 of 200000 compute units`,
        `Program ${id} failed: custom program error: 0x177a`,
      ],
    });
    const error = findLedgerError(failure, PAYMENT_LEDGER_PROGRAM_ID);
    expect(error?.errorName).toBe("InvocationBudgetExceeded");
    expect(error?.code).toBe(6010);
    expect(error?.cause).toBe(failure);
    expect(isLedgerError(failure, "InvocationBudgetExceeded", PAYMENT_LEDGER_PROGRAM_ID)).toBe(true);
    expect(isLedgerError(failure, "DuplicatePaymentId", PAYMENT_LEDGER_PROGRAM_ID)).toBe(false);
  });

  it("an error of another program is not the ledger's", () => {
    const other = Keypair.generate().publicKey.toBase58();
    const failure = { logs: [`Program ${other} failed: custom program error: 0x177a`] };
    expect(findLedgerError(failure, PAYMENT_LEDGER_PROGRAM_ID)).toBeNull();
    expect(findLedgerError(undefined, PAYMENT_LEDGER_PROGRAM_ID)).toBeNull();
  });

  it("a transaction error counts only when the failing instruction is the program's", () => {
    const other = Keypair.generate().publicKey;
    const error = { InstructionError: [1, { Custom: 6003 }] };
    expect(ledgerErrorCodeFromTransactionError(error, [other, PAYMENT_LEDGER_PROGRAM_ID], PAYMENT_LEDGER_PROGRAM_ID)).toBe(6003);
    expect(ledgerErrorCodeFromTransactionError(error, [PAYMENT_LEDGER_PROGRAM_ID, other], PAYMENT_LEDGER_PROGRAM_ID)).toBeUndefined();
    expect(ledgerErrorCodeFromTransactionError("AccountNotFound", [PAYMENT_LEDGER_PROGRAM_ID], PAYMENT_LEDGER_PROGRAM_ID)).toBeUndefined();
  });
});
