/**
 * The MPP payment request of spec 2.9: the JSON body of a 402 answer. Parsed strictly (exactly
 * the five fields, `protocol` = `mpp/1.0`, an exact decimal amount in USDC, 1 to 16 method
 * identifiers, an absolute http(s) payment endpoint) into a typed value.
 */
import { exactKeys, type Fail, object, url } from "../wire/strict-json.js";
import { formatUsdcShort } from "../../shared/money.js";
import { MPP_CURRENCY, parseCurrency, parseDecimalUnits } from "./amount.js";
import { MppFormatError } from "./errors.js";

export const MPP_PROTOCOL = "mpp/1.0";
export const MAX_PAYMENT_METHODS = 16;
const METHOD = /^[a-z][a-z0-9:_-]{0,63}$/;

export interface MppPaymentRequest {
  readonly protocol: typeof MPP_PROTOCOL;
  readonly amountUnits: bigint;
  readonly currency: typeof MPP_CURRENCY;
  readonly paymentMethods: readonly string[];
  readonly sessionSupported: boolean;
  readonly paymentEndpoint: string;
}

export interface MoneyBody {
  value: string;
  currency: string;
}

export interface MppPaymentRequestBody {
  protocol: string;
  amount: MoneyBody;
  paymentMethods: string[];
  sessionSupported: boolean;
  paymentEndpoint: string;
}

const fail: Fail = (field, detail) => {
  throw new MppFormatError("malformed_request", field, detail);
};

export function parseMoney(value: unknown, field: string, onFail: Fail): { units: bigint; currency: typeof MPP_CURRENCY } {
  const money = object(value, field, onFail);
  exactKeys(money, ["value", "currency"], [], `${field}.`, onFail);
  return {
    units: parseDecimalUnits(money.value, `${field}.value`, onFail),
    currency: parseCurrency(money.currency, `${field}.currency`, onFail),
  };
}

export function parseMethod(value: unknown, field: string, onFail: Fail): string {
  if (typeof value !== "string" || !METHOD.test(value)) return onFail(field, "expected a method identifier ([a-z][a-z0-9:_-]*)");
  return value;
}

export function parseMppPaymentRequest(json: unknown): MppPaymentRequest {
  const body = object(json, "body", fail);
  exactKeys(body, ["protocol", "amount", "paymentMethods", "sessionSupported", "paymentEndpoint"], [], "", fail);
  if (body.protocol !== MPP_PROTOCOL) fail("protocol", `expected "${MPP_PROTOCOL}"`);
  const amount = parseMoney(body.amount, "amount", fail);
  const methods = body.paymentMethods;
  if (!Array.isArray(methods) || methods.length === 0 || methods.length > MAX_PAYMENT_METHODS) {
    fail("paymentMethods", `expected 1 to ${MAX_PAYMENT_METHODS} method identifiers`);
  }
  const paymentMethods = (methods as unknown[]).map((method, i) => parseMethod(method, `paymentMethods[${i}]`, fail));
  if (new Set(paymentMethods).size !== paymentMethods.length) fail("paymentMethods", "duplicate method");
  if (typeof body.sessionSupported !== "boolean") fail("sessionSupported", "expected a boolean");
  return {
    protocol: MPP_PROTOCOL,
    amountUnits: amount.units,
    currency: amount.currency,
    paymentMethods,
    sessionSupported: body.sessionSupported as boolean,
    paymentEndpoint: url(body.paymentEndpoint, "paymentEndpoint", fail).toString(),
  };
}

export function moneyBody(units: bigint): MoneyBody {
  return { value: formatUsdcShort(units), currency: MPP_CURRENCY };
}

export function mppRequestBody(request: MppPaymentRequest): MppPaymentRequestBody {
  return {
    protocol: request.protocol,
    amount: moneyBody(request.amountUnits),
    paymentMethods: [...request.paymentMethods],
    sessionSupported: request.sessionSupported,
    paymentEndpoint: request.paymentEndpoint,
  };
}
