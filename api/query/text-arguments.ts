/**
 * The text rule (api/shared/text.ts) for GraphQL: a validation rule that refuses every string
 * literal of an argument (inside lists and input objects too) holding a control character or a
 * lone surrogate, with BAD_USER_INPUT naming the argument (`endpoint`, `range.from`). Variables
 * are checked when the request is read (api/query/graphql-request.ts).
 */
import { type ArgumentNode, Kind, type ValidationRule, type ValueNode } from "graphql";
import { InvalidTextError, unstorableText } from "../shared/text.js";

function firstProblem(value: ValueNode, path: string): InvalidTextError | null {
  if (value.kind === Kind.STRING) {
    const detail = unstorableText(value.value);
    return detail === null ? null : new InvalidTextError(path, detail);
  }
  if (value.kind === Kind.LIST) {
    for (const [index, item] of value.values.entries()) {
      const found = firstProblem(item, `${path}[${index}]`);
      if (found !== null) return found;
    }
  }
  if (value.kind === Kind.OBJECT) {
    for (const field of value.fields) {
      const found = firstProblem(field.value, `${path}.${field.name.value}`);
      if (found !== null) return found;
    }
  }
  return null;
}

export function textArgumentsRule(): ValidationRule {
  return (context) => ({
    Argument(node: ArgumentNode) {
      const problem = firstProblem(node.value, node.name.value);
      if (problem !== null) context.reportError(problem.toGraphQLError());
    },
  });
}
