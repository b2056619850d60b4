/**
 * Query depth and cost limits, as graphql-js validation rules (run before any resolver), and a
 * token limit on parsing. Cost = how many times each field resolves: a field under a list counts
 * once per expected element, the list size taken from the field's `limit`-like argument (its
 * maximum when given by a variable: validation runs before variables are known). Introspection
 * (`__schema`, `__type`) is static and left out of both measures. The multiplier applies to
 * everything under the list-returning field (its pageInfo too): an overestimate, on the safe side.
 */
import {
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLNamedType,
  type GraphQLType,
  Kind,
  parse,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from "graphql";
import type { Plugin } from "graphql-yoga";
import { apiError, httpError } from "../shared/errors.js";
import {
  CHANNELS_FIRST_DEFAULT,
  CHANNELS_FIRST_MAX,
  CHARGES_FIRST_DEFAULT,
  CHARGES_FIRST_MAX,
  SETTLEMENTS_FIRST_DEFAULT,
  SETTLEMENTS_FIRST_MAX,
} from "./resolvers/channels.js";
import {
  METRIC_BUCKETS_MAX,
  TRANSACTIONS_LIMIT_DEFAULT,
  TRANSACTIONS_LIMIT_MAX,
  TREE_NODE_LIMIT_DEFAULT,
  TREE_NODE_LIMIT_MAX,
} from "../shared/validation.js";

export const MAX_QUERY_DEPTH = 6;
/**
 * A full-size payment tree (5,000 nodes) with every node field fits (≈ 110,000); three of them do
 * not. A list size given by a variable counts as its maximum.
 */
export const MAX_QUERY_COST = 200_000;
export const MAX_QUERY_TOKENS = 4_000;

/** How many elements a list field yields, from its arguments. */
interface ListSize {
  readonly argument?: string;
  readonly fallback: number;
  readonly max: number;
}

const LIST_SIZES: Record<string, ListSize> = {
  "Query.transactions": { argument: "limit", fallback: TRANSACTIONS_LIMIT_DEFAULT, max: TRANSACTIONS_LIMIT_MAX },
  "Query.paymentTree": { argument: "nodeLimit", fallback: TREE_NODE_LIMIT_DEFAULT, max: TREE_NODE_LIMIT_MAX },
  "Query.agents": { fallback: 100, max: 100 },
  "Query.policies": { fallback: 200, max: 200 },
  "Query.policyHistory": { argument: "first", fallback: 20, max: 100 },
  "Query.metrics": { fallback: METRIC_BUCKETS_MAX, max: METRIC_BUCKETS_MAX },
  "Query.spendSummary": { fallback: 50, max: 50 },
  "Query.invocation": { fallback: 10, max: 10 },
  "Query.invocations": { fallback: 100, max: 100 },
  "Query.channels": { argument: "first", fallback: CHANNELS_FIRST_DEFAULT, max: CHANNELS_FIRST_MAX },
  "Channel.charges": { argument: "first", fallback: CHARGES_FIRST_DEFAULT, max: CHARGES_FIRST_MAX },
  "Channel.settlements": { argument: "first", fallback: SETTLEMENTS_FIRST_DEFAULT, max: SETTLEMENTS_FIRST_MAX },
  "Query.agentList": { argument: "first", fallback: 50, max: 100 },
  "Query.budgetUse": { argument: "first", fallback: 50, max: 100 },
  "Query.runs": { argument: "first", fallback: 50, max: 100 },
  "Query.rejectionCounts": { fallback: 50, max: 50 },
};

/**
 * Fields that reach beyond Postgres (the chain RPC), or run a query per element: weighted so they
 * cannot be fanned out cheaply. `policies` reads two small queries per agent (up to 200 agents):
 * at most a few of them fit in one request. `simulatePolicy` reads and replays up to 200,000
 * recorded attempts: at most three in one request.
 */
const FIELD_WEIGHTS: Record<string, number> = {
  "Query.policies": 40_000,
  "Query.simulatePolicy": 60_000,
  "Agent.balance": 10,
  "Agent.balanceUnits": 10,
  "Wallet.balance": 10,
  "Wallet.balanceUnits": 10,
};

function listSize(key: string, field: FieldNode): number {
  const size = LIST_SIZES[key];
  if (size === undefined) return 1;
  if (size.argument === undefined) return size.fallback;
  const argument = field.arguments?.find((a) => a.name.value === size.argument);
  if (argument === undefined) return size.fallback;
  if (argument.value.kind === Kind.INT) {
    const value = Number(argument.value.value);
    // Out-of-range values are rejected by the resolver; here they only must not lower the cost.
    return Number.isFinite(value) && value > 0 ? Math.min(value, size.max) : size.fallback;
  }
  return size.max;
}

// Types are told apart by shape, not `instanceof`: under a bundler or test runner the schema's
// graphql module instance may not be this file's (ESM vs CJS copies of the same package).
interface FieldsType {
  readonly name: string;
  getFields(): Record<string, { type: GraphQLType }>;
}
type CompositeType = GraphQLNamedType;

function namedType(type: GraphQLType): GraphQLNamedType {
  let current: GraphQLType = type;
  while ("ofType" in current) current = current.ofType;
  return current;
}

function hasFields(type: CompositeType): type is CompositeType & FieldsType {
  return "getFields" in type && typeof type.getFields === "function" && !("parseValue" in type) && !("getTypes" in type);
}

function isComposite(type: GraphQLNamedType | null | undefined): type is CompositeType {
  return type !== null && type !== undefined && ("getFields" in type || "getTypes" in type) && !("parseValue" in type);
}

interface Measure {
  cost: number;
  depth: number;
}

function measure(
  context: ValidationContext,
  selectionSet: SelectionSetNode,
  parentType: CompositeType,
  depth: number,
  multiplier: number,
  fragmentsOnPath: Set<string>,
): Measure {
  const total: Measure = { cost: 0, depth };
  const add = (inner: Measure): void => {
    total.cost += inner.cost;
    total.depth = Math.max(total.depth, inner.depth);
  };
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const name = selection.name.value;
      if (name.startsWith("__")) continue;
      if (!hasFields(parentType)) continue;
      const definition = parentType.getFields()[name];
      if (definition === undefined) continue;
      const key = `${parentType.name}.${name}`;
      total.cost += multiplier * (FIELD_WEIGHTS[key] ?? 1);
      total.depth = Math.max(total.depth, depth + 1);
      const fieldType = namedType(definition.type);
      if (selection.selectionSet !== undefined && isComposite(fieldType)) {
        add(measure(context, selection.selectionSet, fieldType, depth + 1, multiplier * listSize(key, selection), fragmentsOnPath));
      }
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const condition =
        selection.typeCondition === undefined ? parentType : context.getSchema().getType(selection.typeCondition.name.value);
      if (isComposite(condition)) {
        add(measure(context, selection.selectionSet, condition, depth, multiplier, fragmentsOnPath));
      }
    } else {
      const name = selection.name.value;
      // A fragment cycle is reported by NoFragmentCyclesRule; here it must only not loop.
      if (fragmentsOnPath.has(name)) continue;
      const fragment: FragmentDefinitionNode | null | undefined = context.getFragment(name);
      if (fragment === null || fragment === undefined) continue;
      const condition = context.getSchema().getType(fragment.typeCondition.name.value);
      if (!isComposite(condition)) continue;
      add(measure(context, fragment.selectionSet, condition, depth, multiplier, new Set([...fragmentsOnPath, name])));
    }
  }
  return total;
}

/** Rejects operations nesting deeper than `maxDepth` or costing more than `maxCost`. */
export function queryLimitsRule(maxDepth = MAX_QUERY_DEPTH, maxCost = MAX_QUERY_COST): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const schema = context.getSchema();
      const root =
        operation.operation === "query"
          ? schema.getQueryType()
          : operation.operation === "mutation"
            ? schema.getMutationType()
            : schema.getSubscriptionType();
      if (root === null || root === undefined) return;
      const { cost, depth } = measure(context, operation.selectionSet, root, 0, 1, new Set());
      if (depth > maxDepth) {
        context.reportError(
          apiError("QUERY_TOO_DEEP", `query depth ${depth} exceeds the limit of ${maxDepth}`, { depth, limit: maxDepth }),
        );
      }
      if (cost > maxCost) {
        context.reportError(
          apiError("QUERY_TOO_COSTLY", `query cost ${cost} exceeds the limit of ${maxCost}: ask for fewer fields or smaller limits`, {
            cost,
            limit: maxCost,
          }),
        );
      }
    },
  });
}

/** The yoga plugin: token limit on parse, depth and cost rules on validate. */
export function useQueryLimits(): Plugin {
  return {
    onParse({ setParseFn }) {
      setParseFn((source, options) => {
        try {
          return parse(source, { ...options, maxTokens: MAX_QUERY_TOKENS });
        } catch (error) {
          // Ends the request with GRAPHQL_PARSE_FAILED (yoga answers a parse failure 500 otherwise); the
          // status is yoga's for the Accept sent (200 to a client that accepts application/json).
          throw httpError("GRAPHQL_PARSE_FAILED", (error as Error).message).toGraphQLError({ endsRequest: true });
        }
      });
    },
    onValidate({ addValidationRule }) {
      addValidationRule(queryLimitsRule());
    },
  };
}
