/**
 * The approvals' timeout loop as the gateway runs it (api/gateway/gateway.ts starts
 * `runApprovalTimeouts` with its other loops), alone in a process of its own, so a test can
 * SIGKILL it mid-pass and start it again: `node --import tsx test/gateway/support/approval-timeouts-main.ts`
 * with DATABASE_URL. Runs until killed. Test support only.
 */
import { createPool } from "../../../indexer/db/database.js";
import { runApprovalTimeouts } from "../../../api/gateway/loops/index.js";

const pool = createPool();
const intervalMs = Number(process.env.APPROVAL_TIMEOUT_INTERVAL_MS ?? "50");
const batch = Number(process.env.APPROVAL_TIMEOUT_BATCH ?? "2");
await runApprovalTimeouts(pool, { intervalMs, batch, onError: (error) => console.error(error) });
