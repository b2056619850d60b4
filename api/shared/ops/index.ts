/** What an orchestrator reads from a service process: /healthz, /readyz, /metrics, and draining on shutdown. */
export * from "./metrics.js";
export * from "./plugin.js";
export * from "./readiness.js";
export * from "./request-id.js";
