/**
 * The tools' input schemas and the one check every call's arguments go through. Each tool
 * publishes its JSON Schema in `tools/list`; the same object is what `checkArguments` enforces,
 * so a host's view of a tool and the server's check cannot drift. Only the subset the tools use is
 * understood (object, string, number, integer, boolean, enum, required, maxLength, pattern,
 * additionalProperties false): a schema using anything else is a programming error.
 */

export interface StringSchema {
  readonly type: "string";
  readonly description?: string;
  readonly enum?: readonly string[];
  readonly maxLength?: number;
  readonly pattern?: string;
}

export interface IntegerSchema {
  readonly type: "integer";
  readonly description?: string;
  readonly minimum?: number;
  readonly maximum?: number;
}

/** A free JSON value (a request body), or a map of strings (headers). */
export interface OpenSchema {
  readonly type?: "object";
  readonly description?: string;
  readonly additionalProperties?: { readonly type: "string" };
}

export type PropertySchema = StringSchema | IntegerSchema | OpenSchema;

export interface ObjectSchema {
  readonly type: "object";
  readonly properties: Readonly<Record<string, PropertySchema>>;
  readonly required?: readonly string[];
  readonly additionalProperties: false;
}

/** The arguments broke the tool's schema: which one, and how. */
export class InvalidArgumentsError extends Error {
  constructor(
    readonly argument: string,
    message: string,
  ) {
    super(`${argument}: ${message}`);
    this.name = "InvalidArgumentsError";
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The arguments, checked against `schema`; throws `InvalidArgumentsError` on the first breach. */
export function checkArguments(schema: ObjectSchema, args: unknown): Record<string, unknown> {
  const value = args ?? {};
  if (!isRecord(value)) throw new InvalidArgumentsError("arguments", "must be an object");
  for (const name of schema.required ?? []) {
    if (value[name] === undefined) throw new InvalidArgumentsError(name, "is required");
  }
  for (const [name, item] of Object.entries(value)) {
    const property = schema.properties[name];
    if (property === undefined) throw new InvalidArgumentsError(name, "is not an argument of this tool");
    if (item === undefined) continue;
    checkProperty(name, property, item);
  }
  return value;
}

function checkProperty(name: string, schema: PropertySchema, value: unknown): void {
  if (schema.type === "string") {
    if (typeof value !== "string") throw new InvalidArgumentsError(name, "must be a string");
    if (schema.maxLength !== undefined && value.length > schema.maxLength)
      throw new InvalidArgumentsError(name, `must be at most ${schema.maxLength} characters`);
    if (schema.enum !== undefined && !schema.enum.includes(value))
      throw new InvalidArgumentsError(name, `must be one of ${schema.enum.join(", ")}`);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value))
      throw new InvalidArgumentsError(name, `must match ${schema.pattern}`);
    return;
  }
  if (schema.type === "integer") {
    if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new InvalidArgumentsError(name, "must be an integer");
    if (schema.minimum !== undefined && value < schema.minimum) throw new InvalidArgumentsError(name, `must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) throw new InvalidArgumentsError(name, `must be at most ${schema.maximum}`);
    return;
  }
  if (schema.type === "object" && !isRecord(value)) throw new InvalidArgumentsError(name, "must be an object");
  if (schema.additionalProperties !== undefined && isRecord(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (typeof item !== "string") throw new InvalidArgumentsError(`${name}.${key}`, "must be a string");
    }
  }
}
