/**
 * Plain-text output: aligned tables and key/value blocks. Columns are separated by two spaces,
 * widths are measured in code points, and no line ends in spaces. Values are printed as given
 * (hashes are never shortened: a hash is meant to be copied).
 */

export interface Column {
  readonly header: string;
  /** Amounts and counts are right-aligned. */
  readonly align?: "left" | "right";
}

const GAP = "  ";

function width(text: string): number {
  return [...text].length;
}

function pad(text: string, size: number, align: "left" | "right"): string {
  const fill = " ".repeat(Math.max(0, size - width(text)));
  return align === "right" ? fill + text : text + fill;
}

/** A header line and one line per row; every cell of a column starts (or ends) at the same place. */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  for (const row of rows) {
    if (row.length !== columns.length) throw new RangeError(`row has ${row.length} cells for ${columns.length} columns`);
  }
  const widths = columns.map((column, index) => Math.max(width(column.header), ...rows.map((row) => width(oneLine(row[index]!)))));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, index) => pad(oneLine(cell), widths[index]!, columns[index]!.align ?? "left"))
      .join(GAP)
      .trimEnd();
  return [line(columns.map((column) => column.header)), ...rows.map(line)].join("\n");
}

/** `Label:  value` lines with the values aligned. */
export function formatFields(fields: readonly (readonly [string, string])[]): string {
  const size = Math.max(0, ...fields.map(([label]) => width(label) + 1));
  return fields.map(([label, value]) => `${pad(`${label}:`, size, "left")}${GAP}${oneLine(value)}`.trimEnd()).join("\n");
}

/** Control characters (a newline in an endpoint) would break the alignment and could fake rows. */
function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what it replaces
  return text.replace(/[\u0000-\u001f\u007f]/g, "?");
}
