/**
 * The SDK mirrors the gateway's stable error codes (it imports nothing of the server, so the list
 * is a copy): this suite is what keeps the copy complete.
 */
import { describe, expect, it } from "vitest";
import { ERROR_CODES as SHARED_ERROR_CODES } from "../../api/shared/errors.js";
import { REST_ERROR_CODES, type RestErrorCode } from "../../api/shared/http/problem.js";
import { ERROR_CODES, errorFromProblem, isServiceError, type KnownErrorCode } from "../../sdk/src/index.js";

// Compile-time half: `npx tsc -p .` fails when the server has a code the SDK's union lacks.
const restCodesAreKnown: readonly KnownErrorCode[] = Object.keys(REST_ERROR_CODES) as RestErrorCode[];

describe("SDK error codes mirror the gateway's", () => {
  it("the SDK's ERROR_CODES names every code of api/shared/errors.ts and api/shared/http/problem.ts", () => {
    const known = new Set<string>(ERROR_CODES ?? []);
    const serverCodes = [...Object.keys(SHARED_ERROR_CODES), ...restCodesAreKnown];
    expect(serverCodes.filter((code) => !known.has(code))).toEqual([]);
  });

  it("a code the SDK does not know reaches the caller unchanged, and isServiceError narrows on it", () => {
    const error = errorFromProblem(409, { code: "A_CODE_FROM_A_NEWER_GATEWAY", detail: "refused" });
    expect(error.code).toBe("A_CODE_FROM_A_NEWER_GATEWAY");
    expect(isServiceError(error, "A_CODE_FROM_A_NEWER_GATEWAY")).toBe(true);
    expect(ERROR_CODES).not.toContain("A_CODE_FROM_A_NEWER_GATEWAY");
  });
});
