/**
 * `npm run reset`: wipes the local system's state, ledger and database together (scripts/local-state.ts).
 * Refused while the system runs. The next `npm start` begins a new chain with an empty database.
 */
import { localState, resetLocalState, SystemRunning } from "./local-state.js";

const state = localState(process.env);

resetLocalState(state, process.env).then(
  (removed) => {
    if (removed.length === 0) console.log("reset: nothing to remove");
    for (const path of removed) console.log(`reset: removed ${path}`);
  },
  (error: unknown) => {
    console.error(error instanceof SystemRunning ? error.message : error);
    process.exit(1);
  },
);
