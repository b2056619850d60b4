/**
 * MPP formats and the card stand-in without a ledger: the strict parsers of spec 2.9, exact
 * decimal amounts, rail choice, the submission signature, and the card reference encoding.
 */
import { Keypair } from "@solana/web3.js";
import { describe, expect, it } from "vitest";
import {
  CardDeclinedError,
  cardSettlementReference,
  CardStateError,
  readCardSettlementReference,
  StandInCardProcessor,
} from "../../api/gateway/card/index.js";
import {
  CARD_METHOD,
  canonicalSubmissionBytes,
  chooseMethod,
  MppFormatError,
  MppPaymentError,
  mppRequestBody,
  parseMppPaymentRequest,
  parseMppSubmission,
  signMppSubmission,
  STABLECOIN_METHOD,
  submissionBody,
} from "../../api/gateway/mpp/index.js";
import { keypairSigner, verifySignature } from "../../api/gateway/chain/index.js";

const body = {
  protocol: "mpp/1.0",
  amount: { value: "0.05", currency: "USDC" },
  paymentMethods: ["stablecoin", "card"],
  sessionSupported: true,
  paymentEndpoint: "https://api.example.com/mpp/pay",
};

function formatError(run: () => unknown): MppFormatError {
  try {
    run();
  } catch (error) {
    if (error instanceof MppFormatError) return error;
    throw error;
  }
  throw new Error("expected an MppFormatError");
}

describe("MPP payment request (spec 2.9)", () => {
  it("parses the body, the decimal value exactly into base units, and writes it back", () => {
    const request = parseMppPaymentRequest(body);
    expect(request.amountUnits).toBe(50_000n);
    expect(mppRequestBody(request)).toEqual(body);
    expect(parseMppPaymentRequest({ ...body, amount: { value: "1.500000", currency: "usdc" } }).amountUnits).toBe(1_500_000n);
  });

  it.each([
    ["more than 6 decimals", { ...body, amount: { value: "0.0000001", currency: "USDC" } }, "amount.value"],
    ["a number value", { ...body, amount: { value: 0.05, currency: "USDC" } }, "amount.value"],
    ["an exponent", { ...body, amount: { value: "5e-2", currency: "USDC" } }, "amount.value"],
    ["a negative value", { ...body, amount: { value: "-1", currency: "USDC" } }, "amount.value"],
    ["a zero value", { ...body, amount: { value: "0.000000", currency: "USDC" } }, "amount.value"],
    ["another currency", { ...body, amount: { value: "1", currency: "EUR" } }, "amount.currency"],
    ["another protocol version", { ...body, protocol: "mpp/2.0" }, "protocol"],
    ["no methods", { ...body, paymentMethods: [] }, "paymentMethods"],
    ["a duplicate method", { ...body, paymentMethods: ["card", "card"] }, "paymentMethods"],
    ["a non-boolean sessionSupported", { ...body, sessionSupported: "yes" }, "sessionSupported"],
    ["an unknown field", { ...body, price: 1 }, "price"],
    ["a relative endpoint", { ...body, paymentEndpoint: "/pay" }, "paymentEndpoint"],
  ])("refuses %s", (_, input, field) => {
    const error = formatError(() => parseMppPaymentRequest(input));
    expect([error.reason, error.field]).toEqual(["malformed_request", field]);
  });
});

describe("rail choice", () => {
  it("takes the stablecoin rail whenever it is offered", () => {
    expect(chooseMethod(["card", "stablecoin"])).toBe(STABLECOIN_METHOD);
  });
  it("falls back to the card rail only when no stablecoin rail is offered", () => {
    expect(chooseMethod(["lightning", "card"])).toBe(CARD_METHOD);
  });
  it("refuses offers with no rail we pay with", () => {
    expect(() => chooseMethod(["lightning", "custom:x"])).toThrow(MppPaymentError);
  });
});

describe("MPP submission", () => {
  const signer = keypairSigner(Keypair.generate());

  it("signs the request's terms; the body round-trips through the strict parser", async () => {
    const request = parseMppPaymentRequest(body);
    const submission = await signMppSubmission(signer, request, { method: "card", resource: "https://api.example.com/v1/x" });
    expect(parseMppSubmission(JSON.parse(JSON.stringify(submissionBody(submission))))).toEqual(submission);
    const a = submission.authorization;
    const bytes = canonicalSubmissionBytes({
      ...a,
      paymentEndpoint: request.paymentEndpoint,
      method: "card",
      amountUnits: 50_000n,
      currency: "USDC",
    });
    expect(verifySignature(signer.address, bytes, a.signature)).toBe(true);
    const other = canonicalSubmissionBytes({
      ...a,
      paymentEndpoint: request.paymentEndpoint,
      method: "stablecoin",
      amountUnits: 50_000n,
      currency: "USDC",
    });
    expect(verifySignature(signer.address, other, a.signature)).toBe(false);
  });

  it("refuses an authorization of another type or with unknown fields", async () => {
    const submission = submissionBody(
      await signMppSubmission(signer, parseMppPaymentRequest(body), { method: "card", resource: "https://a.example/x" }),
    );
    expect(
      formatError(() => parseMppSubmission({ ...submission, authorization: { ...submission.authorization, type: "hmac" } })).field,
    ).toBe("authorization.type");
    expect(
      formatError(() => parseMppSubmission({ ...submission, authorization: { ...submission.authorization, card: "4242" } })).field,
    ).toBe("authorization.card");
  });
});

describe("card stand-in and its ledger reference", () => {
  it("names itself a stand-in; authorize is idempotent; capture and void only from authorized", async () => {
    const processor = new StandInCardProcessor();
    expect(processor.name).toMatch(/stand-in/);
    const request = { customer: "agent-1", amountUnits: 10n, currency: "USDC", idempotencyKey: "k1" };
    const held = await processor.authorize(request);
    expect(held.reference).toMatch(/^standin_auth_[0-9a-f]{24}$/);
    expect(await processor.authorize(request)).toEqual(held);
    await expect(processor.authorize({ ...request, amountUnits: 11n })).rejects.toBeInstanceOf(CardStateError);
    expect((await processor.capture(held.reference)).status).toBe("captured");
    await expect(processor.void(held.reference)).rejects.toBeInstanceOf(CardStateError);
  });

  it("declines as a real processor would, with a code", async () => {
    const processor = new StandInCardProcessor({ declineAboveUnits: 100n });
    const refusal = processor.authorize({ customer: "a", amountUnits: 101n, currency: "USDC", idempotencyKey: "k" });
    await expect(refusal).rejects.toBeInstanceOf(CardDeclinedError);
    await expect(refusal).rejects.toMatchObject({ code: "limit_exceeded" });
  });

  it("the processor reference is recorded as zero-padded UTF-8 in 64 bytes", () => {
    const bytes = cardSettlementReference("standin_auth_0123456789abcdef01234567");
    expect(bytes).toHaveLength(64);
    expect(readCardSettlementReference(bytes)).toBe("standin_auth_0123456789abcdef01234567");
    expect(() => cardSettlementReference("x".repeat(65))).toThrow(RangeError);
  });
});
