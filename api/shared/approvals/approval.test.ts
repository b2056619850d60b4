/** The inputs that decide an approval: the optional note and the status filter, refused by name. */
import { describe, expect, it } from "vitest";
import { MAX_NOTE_LENGTH, parseApprovalStatus, parseNote } from "./approval.js";

describe("a decision's note", () => {
  it("is optional: absent, null and empty are none", () => {
    expect(parseNote(undefined)).toBeNull();
    expect(parseNote(null)).toBeNull();
    expect(parseNote("")).toBeNull();
    expect(parseNote("ok for the report ✓")).toBe("ok for the report ✓");
    expect(parseNote("x".repeat(MAX_NOTE_LENGTH))).toHaveLength(MAX_NOTE_LENGTH);
  });

  it.each([
    ["a number", 5],
    ["an object", { text: "ok" }],
    ["501 characters", "x".repeat(MAX_NOTE_LENGTH + 1)],
    ["a control character", "ok\u0000"],
    ["a lone surrogate", "ok\ud800"],
  ])("refuses %s as BAD_USER_INPUT naming the note", (_what, value) => {
    expect(() => parseNote(value)).toThrow(
      expect.objectContaining({ code: "BAD_USER_INPUT", status: 400, field: "note", reason: "invalid_note" }),
    );
  });
});

describe("the status filter", () => {
  it("takes the four states and refuses anything else", () => {
    for (const status of ["pending", "approved", "denied", "expired"]) expect(parseApprovalStatus(status)).toBe(status);
    expect(() => parseApprovalStatus("Pending")).toThrow(expect.objectContaining({ code: "BAD_USER_INPUT", field: "status" }));
    expect(() => parseApprovalStatus("refused", "filter")).toThrow(expect.objectContaining({ field: "filter" }));
  });
});
