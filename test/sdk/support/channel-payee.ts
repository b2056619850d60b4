/**
 * A payee process for the channel-session tests: `mppMiddleware` with a ChannelBook journaling to
 * VOUCHER_JOURNAL, serving GET /paid on PORT (0: any). It prints `listening <origin>` once it
 * serves and `settled <sequence>` after its start-up settlement of what the journal left pending.
 * SETTLE_EVERY (charges per batch) defaults to never: the crash test kills it with vouchers
 * accepted and not yet presented. GET /free answers the same body without payment (the bench's
 * unpaid baseline, bench/gateway/channel-session.ts).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { ChannelBook, FileVoucherJournal, mppMiddleware, type MppPayment, type NodeRequest } from "../../../sdk/src/server/index.js";

const env = process.env;
const book = new ChannelBook({
  payTo: env.PAY_TO!,
  facilitatorUrl: env.GATEWAY_URL!,
  apiKey: env.PAYEE_KEY!,
  ledger: { rpcUrl: env.RPC_URL!, programId: env.PROGRAM_ID! },
  mint: env.MINT!,
  journal: new FileVoucherJournal(env.VOUCHER_JOURNAL!),
  settlement: { maxCharges: Number(env.SETTLE_EVERY ?? "1000"), maxUnits: 1n << 62n, intervalMs: 0 },
});
await book.start();
const states = env.CHANNEL === undefined ? [] : [book.state(env.CHANNEL)];
process.stdout.write(`settled ${states[0]?.confirmedSequence ?? 0n}\n`);

const middleware = mppMiddleware({
  amount: BigInt(env.PRICE_UNITS!),
  paymentMethods: ["stablecoin"],
  sessionSupported: true,
  payTo: env.PAY_TO!,
  facilitatorUrl: env.GATEWAY_URL!,
  apiKey: env.PAYEE_KEY!,
  channels: book,
});
const server = createServer((req, res) => {
  if (req.url?.startsWith("/free")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ sequence: null }));
    return;
  }
  middleware(req as NodeRequest, res, () => {
    const payment = (req as NodeRequest).payment as MppPayment;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ sequence: payment.channel?.sequence.toString() }));
  });
});
server.listen(Number(env.PORT ?? "0"), "127.0.0.1", () => {
  process.stdout.write(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
