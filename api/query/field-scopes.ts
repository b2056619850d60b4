/**
 * What each root GraphQL field needs (api/shared/scopes.ts), checked in one place: `withFieldScopes`
 * wraps every Query, Mutation and Subscription resolver with its declaration in `FIELD_SCOPES`, and
 * refuses to build a schema whose root field has none.
 *
 * A key whose scope does not allow the field gets 403 FORBIDDEN_SCOPE (extensions.code) and the
 * field resolves to nothing. An agent key is held to its own agent, by the field's `agent` rule:
 * - `argument`: the field's `agentId` argument must be its agent (403 otherwise); when the
 *   argument is optional and omitted, its agent is filled in, so lists and feeds show it alone;
 * - `list`: the resolved list keeps the items of its agent only;
 * - `object`: the addressed object (`lookup`, before the resolver runs) or the resolved one (`owner`)
 *   of another agent answers null, as a missing one does.
 * Nested fields of what a root field returned (a transaction's parent, a tree's nodes) are part of
 * that answer: an agent key sees the payments of its own trees, whoever made them.
 */
import type { GraphQLFieldResolver } from "graphql";
import { publicAgentId } from "../shared/agent-ids.js";
import { ADMIN_SCOPE, boundAgent, forbiddenScope, kindAllows, type Requirement } from "../shared/scopes.js";
import type { ApiContext } from "./context.js";

type Args = Record<string, unknown>;

export interface FieldScope {
  readonly requirement: Requirement;
  /** How an agent key is held to its agent; `none` for fields agent keys cannot call at all. */
  readonly agent: "argument" | "list" | "object" | "none";
  /** `list`, `object`: the public agent id an item or object belongs to. */
  readonly owner?: (value: unknown, context: ApiContext) => string | null | Promise<string | null>;
  /** `object`: the agent of the object the arguments address, before resolving; null for none. */
  readonly lookup?: (args: Args, context: ApiContext) => Promise<string | null>;
}

/** The public id of the agent that made the payment `hash`, or null when the account has none. */
async function paymentAgent(hash: unknown, context: ApiContext): Promise<string | null> {
  if (typeof hash !== "string") return null;
  const row = await context.loaders.transactionByHash.load(hash);
  return row === null ? null : row.agent_id;
}

const agentIdOf = (value: unknown): string | null => {
  const item = value as { agentId?: unknown; public_id?: unknown } | null;
  if (typeof item?.public_id === "string") return item.public_id;
  return typeof item?.agentId === "string" ? publicAgentId(item.agentId) : null;
};

const READ_BY_ARGUMENT: FieldScope = { requirement: "read", agent: "argument" };
/** Read by admin and approver keys only: figures across the account's agents. */
const ACCOUNT_WIDE: FieldScope = { requirement: "read", agent: "none" };

/** Every root field, by `Type.field`. A field missing here makes `withFieldScopes` throw. */
export const FIELD_SCOPES: Readonly<Record<string, FieldScope>> = {
  "Query.agents": { requirement: "read", agent: "list", owner: agentIdOf },
  "Query.wallet": READ_BY_ARGUMENT,
  "Query.transaction": { requirement: "read", agent: "object", owner: agentIdOf },
  "Query.transactions": READ_BY_ARGUMENT,
  "Query.receivedPayments": READ_BY_ARGUMENT,
  "Query.paymentTree": { requirement: "read", agent: "object", lookup: (args, context) => paymentAgent(args.rootTxHash, context) },
  "Query.spendSummary": READ_BY_ARGUMENT,
  "Query.metrics": READ_BY_ARGUMENT,
  "Query.invocation": { requirement: "read", agent: "object", lookup: (args, context) => paymentAgent(args.txHash, context) },
  "Query.invocations": {
    requirement: "read",
    agent: "list",
    owner: (value, context) => paymentAgent((value as { parentTxHash?: unknown }).parentTxHash, context),
  },
  "Query.policy": READ_BY_ARGUMENT,
  "Query.policies": { requirement: "read", agent: "list", owner: agentIdOf },
  "Query.checkPolicy": READ_BY_ARGUMENT,
  // The backtest reveals only the agent's own history: what reading it already shows.
  "Query.simulatePolicy": READ_BY_ARGUMENT,
  "Query.policyHistory": READ_BY_ARGUMENT,
  "Query.channels": READ_BY_ARGUMENT,
  "Query.channel": { requirement: "read", agent: "object", owner: agentIdOf },
  // Held payments: the account's approvers' queue; an agent key reads its own agent's one by id.
  "Query.approvals": ACCOUNT_WIDE,
  "Query.approval": { requirement: "read", agent: "object", owner: agentIdOf },
  // The dashboard's account-wide views (overview, budget use, runs): operators', not an agent's.
  "Query.agentList": ACCOUNT_WIDE,
  "Query.budgetUse": ACCOUNT_WIDE,
  "Query.rejectionCounts": ACCOUNT_WIDE,
  "Query.webhookHealth": ACCOUNT_WIDE,
  "Query.indexerStatus": ACCOUNT_WIDE,
  "Query.runs": READ_BY_ARGUMENT,
  "Subscription.transactionRecorded": READ_BY_ARGUMENT,
  "Subscription.channelUpdated": READ_BY_ARGUMENT,
};

/** The arguments an agent key's call runs with: its own agent filled in, another one refused. */
function boundArguments(args: Args, context: ApiContext, field: string, rule: FieldScope): Args {
  const scope = context.caller.scope ?? ADMIN_SCOPE;
  const own = boundAgent(scope);
  if (own === null || rule.agent !== "argument") return args;
  const asked = args.agentId;
  if (asked === undefined || asked === null) return { ...args, agentId: own };
  if (asked !== own)
    throw forbiddenScope(scope, rule.requirement, `read ${field} of agent ${String(asked)}`, String(asked)).toGraphQLError();
  return args;
}

/** Refuses a scope that may not use the field (403 FORBIDDEN_SCOPE); nothing has run then. */
function checkKind(context: ApiContext, field: string, rule: FieldScope): void {
  const scope = context.caller.scope ?? ADMIN_SCOPE;
  if (!kindAllows(scope, rule.requirement) || (scope.kind === "agent" && rule.agent === "none")) {
    throw forbiddenScope(scope, rule.requirement, `use ${field}`).toGraphQLError();
  }
}

function wrapQuery(field: string, rule: FieldScope, resolve: GraphQLFieldResolver<unknown, ApiContext>) {
  return async (parent: unknown, args: Args, context: ApiContext, info: Parameters<GraphQLFieldResolver<unknown, ApiContext>>[3]) => {
    checkKind(context, field, rule);
    const own = boundAgent(context.caller.scope);
    const bound = boundArguments(args, context, field, rule);
    if (own !== null && rule.lookup !== undefined) {
      const owner = await rule.lookup(bound, context);
      if (owner !== null && owner !== own) return null;
    }
    const value = await resolve(parent, bound, context, info);
    if (own === null) return value;
    const owner = rule.owner;
    if (owner === undefined || value === null || value === undefined) return value;
    if (rule.agent === "list" && Array.isArray(value)) {
      const owners = await Promise.all(value.map((item) => owner(item, context)));
      return value.filter((_, i) => owners[i] === own);
    }
    if (rule.agent === "object" && (await owner(value, context)) !== own) return null;
    return value;
  };
}

type Resolvers = Record<string, unknown>;

/**
 * The resolver map with every root field's scope check in front of it. Throws when a root field
 * (of the map) has no declaration in `FIELD_SCOPES`, so a new field cannot serve unchecked.
 */
export function withFieldScopes<R extends Resolvers>(resolvers: R): R {
  const out: Resolvers = { ...resolvers };
  for (const type of ["Query", "Mutation", "Subscription"]) {
    const fields = resolvers[type] as Record<string, unknown> | undefined;
    if (fields === undefined) continue;
    const wrapped: Record<string, unknown> = {};
    for (const [name, resolver] of Object.entries(fields)) {
      const field = `${type}.${name}`;
      const rule = FIELD_SCOPES[field];
      if (rule === undefined) throw new Error(`${field} declares no scope: add it to FIELD_SCOPES (api/query/field-scopes.ts)`);
      if (type === "Subscription") {
        const { subscribe, ...rest } = resolver as { subscribe: GraphQLFieldResolver<unknown, ApiContext> };
        wrapped[name] = {
          ...rest,
          subscribe: (parent: unknown, args: Args, context: ApiContext, info: Parameters<GraphQLFieldResolver<unknown, ApiContext>>[3]) => {
            checkKind(context, field, rule);
            return subscribe(parent, boundArguments(args, context, field, rule), context, info);
          },
        };
      } else {
        wrapped[name] = wrapQuery(field, rule, resolver as GraphQLFieldResolver<unknown, ApiContext>);
      }
    }
    out[type] = wrapped;
  }
  return out as R;
}
