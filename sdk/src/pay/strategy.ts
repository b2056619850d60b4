/**
 * What a protocol module gives the driver for spec 4.7 steps 4-7: whether it pays the gateway's
 * authorization, and the payment itself (present it to the paid API, complete or release the
 * reservation, build the result).
 */
import type { Authorization } from "../authorization.js";
import type { PaymentOffer } from "../payment-required.js";
import type { PayCall } from "./call.js";
import type { PaidResult } from "./result.js";

export interface ProtocolPayment<A extends Authorization> {
  /** This protocol pays `authorization` (given the offer it answered). */
  takes(authorization: Authorization, offer: PaymentOffer): authorization is A;
  pay(call: PayCall, authorization: A, offer: PaymentOffer): Promise<PaidResult>;
}
