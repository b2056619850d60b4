/**
 * `DataTable`: the one shape of every list table: an optional scrolling wrapper, the caption
 * (hidden for a screen reader only, or shown), the column widths and the header row, all from one
 * list of columns; the rows are the children.
 */
import type { ReactNode } from "react";

export interface Column {
  /** The header: text, or a sort button. */
  readonly head: ReactNode;
  /** Width class of the column's `<col>` (`w-time`, ...); "" lets it take the rest. */
  readonly width?: string;
  /** A number column: right-aligned. */
  readonly num?: boolean;
  /** Optional: hidden on a narrow screen (its `<col>` too). */
  readonly opt?: boolean;
  /** `aria-sort` of a sortable column. */
  readonly sort?: "descending" | "none";
}

function classes(...names: (string | false | undefined)[]): string | undefined {
  const joined = names.filter((name) => name !== false && name !== undefined && name !== "").join(" ");
  return joined === "" ? undefined : joined;
}

export function DataTable({
  testId,
  caption,
  captionHidden = false,
  columns,
  className = "data",
  wrap = true,
  foot,
  children,
}: {
  testId: string;
  caption: ReactNode;
  captionHidden?: boolean;
  columns: readonly Column[];
  className?: string;
  /** In a horizontally scrolling wrapper (a list's main table); compact side tables are not. */
  wrap?: boolean;
  foot?: ReactNode;
  children: ReactNode;
}): ReactNode {
  const table = (
    <table className={className} data-testid={testId}>
      <caption className={captionHidden ? "visually-hidden" : undefined}>{caption}</caption>
      {columns.some((column) => column.width !== undefined) ? (
        <colgroup>
          {columns.map((column, index) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: columns are fixed per table
            <col key={index} className={classes(column.width, column.opt && "opt")} />
          ))}
        </colgroup>
      ) : null}
      <thead>
        <tr>
          {columns.map((column, index) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: columns are fixed per table
            <th key={index} scope="col" className={classes(column.num && "num", column.opt && "opt")} aria-sort={column.sort}>
              {column.head}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
      {foot !== undefined ? <tfoot>{foot}</tfoot> : null}
    </table>
  );
  return wrap ? <div className="table-wrap">{table}</div> : table;
}
