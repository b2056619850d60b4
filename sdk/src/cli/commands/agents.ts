/**
 * `cli agents create|list|get|archive` over `POST|GET /v1/agents`, `GET|DELETE /v1/agents/{id}`,
 * through the SDK's `agents` resource, so the id rule and the typed errors are the client's: an
 * invalid id is refused before any request (exit 2), a taken one is the gateway's `AGENT_EXISTS`
 * (exit 1).
 */
import { AgentOperations } from "../../resources/agents.js";
import type { CommandContext } from "../context.js";
import { formatUnits, record, text, unitsOf } from "../format.js";
import { formatFields, formatTable } from "../table.js";

function agents(context: CommandContext): AgentOperations {
  // The CLI pays nothing: the resource's pay flow (used by `invoke` only) is never reached.
  return new AgentOperations(context.transport, "", () => Promise.reject(new Error("the cli does not pay")));
}

function balanceText(value: unknown, field: string): string {
  return value === null || value === undefined ? "-" : formatUnits(unitsOf(value, field));
}

export function renderAgent(agent: Record<string, unknown>): string {
  return formatFields([
    ["Agent", text(agent.agentId)],
    ["Name", text(agent.name)],
    ["Wallet", text(agent.address)],
    ["Network", text(agent.network)],
    ["Balance", balanceText(agent.balance, "balance")],
    ["Created", text(agent.createdAt)],
    ["Archived", text(agent.archivedAt, "no")],
  ]);
}

export async function agentsCreate(context: CommandContext): Promise<void> {
  const created = await agents(context).create({
    agentId: context.args.agent!,
    ...(context.options.name === undefined ? {} : { name: context.options.name }),
  });
  if (context.options.json === true) return context.json(created);
  context.out(`Agent ${text(created.agentId)} created.`);
  context.out(renderAgent(record(created, "agent")));
}

export async function agentsGet(context: CommandContext): Promise<void> {
  const agent = await agents(context).get(context.args.agent!);
  if (context.options.json === true) return context.json(agent);
  context.out(renderAgent(record(agent, "agent")));
}

export async function agentsArchive(context: CommandContext): Promise<void> {
  const agent = await agents(context).archive(context.args.agent!, context.options.force === true ? { force: true } : {});
  if (context.options.json === true) return context.json(agent);
  context.out(`Agent ${text(agent.agentId)} archived.`);
  context.out(renderAgent(record(agent, "agent")));
}

export async function agentsList(context: CommandContext): Promise<void> {
  const list = await agents(context).list(context.options["include-archived"] === true ? { includeArchived: true } : {});
  if (context.options.json === true) return context.json(list);
  if (list.length === 0) return context.out("No agents.");
  context.out(
    formatTable(
      [{ header: "AGENT" }, { header: "NAME" }, { header: "BALANCE", align: "right" }, { header: "WALLET" }, { header: "ARCHIVED" }],
      list.map((agent, index) => [
        text(agent.agentId),
        text(agent.name),
        balanceText(agent.balance, `agents[${index}].balance`),
        text(agent.address),
        text(agent.archivedAt, "no"),
      ]),
    ),
  );
}
