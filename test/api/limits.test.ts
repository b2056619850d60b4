/** The depth and cost rules, run by graphql-js validation against the service's schema. */
import { buildSchema, parse, specifiedRules, validate } from "graphql";
import { describe, expect, it } from "vitest";
import { MAX_QUERY_COST, MAX_QUERY_DEPTH, queryLimitsRule } from "../../api/query/limits.js";
import { typeDefs } from "../../api/query/schema.js";

const schema = buildSchema(typeDefs);
const codes = (query: string, maxDepth = MAX_QUERY_DEPTH, maxCost = MAX_QUERY_COST): unknown[] =>
  validate(schema, parse(query), [...specifiedRules, queryLimitsRule(maxDepth, maxCost)]).map((e) => e.extensions.code ?? e.message);

describe("query limits", () => {
  it("ordinary dashboard queries pass", () => {
    expect(codes(`{ transactions(limit: 50) { nodes { txHash agent { agentId } } pageInfo { endCursor } } }`)).toEqual([]);
    expect(codes(`{ paymentTree(rootTxHash: "x") { nodes { txHash depth agent { agentId } } totals { amount } } }`)).toEqual([]);
    expect(codes(`{ metrics(agentId: "a") { metrics { spend { timestamp value } protocol_split { x402 } } } }`)).toEqual([]);
  });

  it("depth counts every nested field, through fragments and inline fragments", () => {
    const five = `{ transaction(txHash: "x") { parent { parent { parent { txHash } } } } }`;
    expect(codes(five, 5)).toEqual([]);
    expect(codes(five, 4)).toEqual(["QUERY_TOO_DEEP"]);
    expect(codes(`fragment F on Transaction { parent { parent { txHash } } } { transaction(txHash: "x") { parent { ...F } } }`, 4)).toEqual(
      ["QUERY_TOO_DEEP"],
    );
    expect(codes(`{ transaction(txHash: "x") { ... on Transaction { parent { parent { parent { txHash } } } } } }`, 4)).toEqual([
      "QUERY_TOO_DEEP",
    ]);
  });

  it("cost multiplies by list sizes: the limit argument, its maximum when it is a variable", () => {
    // 1 (transactions) + 10 (nodes) + 10 (txHash): everything under the list field counts per element.
    expect(codes(`{ transactions(limit: 10) { nodes { txHash } } }`, 10, 21)).toEqual([]);
    expect(codes(`{ transactions(limit: 11) { nodes { txHash } } }`, 10, 21)).toEqual(["QUERY_TOO_COSTLY"]);
    // A variable may be as large as the maximum (200): counted so.
    expect(codes(`query($n: Int) { transactions(limit: $n) { nodes { txHash } } }`, 10, 250)).toEqual(["QUERY_TOO_COSTLY"]);
    expect(codes(`query($n: Int) { transactions(limit: $n) { nodes { txHash } } }`, 10, 401)).toEqual([]);
    // An out-of-range literal never lowers the cost below the default.
    expect(codes(`{ transactions(limit: -5) { nodes { txHash } } }`, 10, 30)).toEqual(["QUERY_TOO_COSTLY"]);
  });

  it("aliases multiply cost; chain-reading fields weigh more", () => {
    const tree = (i: number) =>
      `t${i}: paymentTree(rootTxHash: "x", nodeLimit: 5000) { nodes { txHash parentTxHash depth amount amountUnits } }`;
    expect(codes(`{ ${tree(0)} }`)).toEqual([]);
    expect(codes(`{ ${[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(tree).join(" ")} }`)).toEqual(["QUERY_TOO_COSTLY"]);
    expect(codes(`{ agents { balance } }`, 10, 1_000)).toEqual(["QUERY_TOO_COSTLY"]);
    expect(codes(`{ agents { agentId } }`, 10, 1_000)).toEqual([]);
  });

  it("a backtest reads a window of history: three fit in one request, four do not", () => {
    const run = (i: number) =>
      `s${i}: simulatePolicy(agentId: "a", policy: "{}", window: "90d", limit: 10000) { totals { attempts } payments { id outcome reason } }`;
    expect(codes(`{ ${[0, 1, 2].map(run).join(" ")} }`)).toEqual([]);
    expect(codes(`{ ${[0, 1, 2, 3].map(run).join(" ")} }`)).toEqual(["QUERY_TOO_COSTLY"]);
  });

  it("a fragment cycle is reported by graphql-js and does not hang the cost rule", () => {
    const result = codes(
      `fragment A on Transaction { parent { ...B } } fragment B on Transaction { parent { ...A } } { transaction(txHash: "x") { ...A } }`,
    );
    expect(result.length).toBeGreaterThan(0);
  });
});
