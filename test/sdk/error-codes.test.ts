/**
 * The SDK mirrors the gateway's stable error codes (it imports nothing of the server, so the list
 * is a copy): this suite is what keeps the copy equal to the one registry, api/shared/errors.ts.
 */
import { describe, expect, it } from "vitest";
import { ERROR_CODES as SERVER_ERROR_CODES, type ErrorCode as ServerErrorCode } from "../../api/shared/errors.js";
import {
  CLIENT_ERROR_CODES,
  ERROR_CODES,
  errorFromProblem,
  GATEWAY_ERROR_CODES,
  type GatewayErrorCode,
  isServiceError,
} from "../../sdk/src/index.js";

// Compile-time half: `npx tsc -p .` fails when the server has a code the SDK's union lacks, or the
// SDK's gateway union names a code the registry does not have.
const serverCodes: readonly GatewayErrorCode[] = Object.keys(SERVER_ERROR_CODES) as ServerErrorCode[];
const sdkGatewayCodes: readonly ServerErrorCode[] = GATEWAY_ERROR_CODES;

describe("SDK error codes mirror the gateway's", () => {
  it("the SDK's gateway codes are exactly the registry's codes (api/shared/errors.ts), in its order", () => {
    expect(sdkGatewayCodes).toEqual(serverCodes);
  });

  it("ERROR_CODES is the gateway's codes and the client's own, which no server code shadows", () => {
    expect(ERROR_CODES).toEqual([...GATEWAY_ERROR_CODES, ...CLIENT_ERROR_CODES]);
    expect(CLIENT_ERROR_CODES.filter((code) => Object.hasOwn(SERVER_ERROR_CODES, code))).toEqual([]);
  });

  it("a code the SDK does not know reaches the caller unchanged, and isServiceError narrows on it", () => {
    const error = errorFromProblem(409, { code: "A_CODE_FROM_A_NEWER_GATEWAY", detail: "refused" });
    expect(error.code).toBe("A_CODE_FROM_A_NEWER_GATEWAY");
    expect(isServiceError(error, "A_CODE_FROM_A_NEWER_GATEWAY")).toBe(true);
    expect(ERROR_CODES).not.toContain("A_CODE_FROM_A_NEWER_GATEWAY");
  });
});
