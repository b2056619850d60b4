/** Page controls of an offset-paged list: previous, "rows a–b of n", next. */
import type { ReactNode } from "react";
import { setParams } from "../router";

export function Pager({
  label,
  offset,
  size,
  shown,
  total,
  onPage = (next) => setParams({ offset: next === 0 ? null : String(next) }),
}: {
  label: string;
  offset: number;
  size: number;
  shown: number;
  /** Unknown until the list's first answer: no pager yet. */
  total: number | undefined;
  /** Where the page goes; by default the URL's `offset` parameter (see `offsetParam`). */
  onPage?: (offset: number) => void;
}): ReactNode {
  if (total === undefined || (total <= size && offset === 0)) return null;
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" disabled={offset === 0} onClick={() => onPage(Math.max(0, offset - size))}>
        ← Previous
      </button>
      <span aria-live="polite" data-testid="pager-range">
        {shown === 0 ? `none of ${total.toLocaleString("en-GB")}` : `${offset + 1}–${offset + shown} of ${total.toLocaleString("en-GB")}`}
      </span>
      <button type="button" disabled={offset + shown >= total} onClick={() => onPage(offset + size)}>
        Next →
      </button>
    </nav>
  );
}

/** The page's offset from the URL's `offset` parameter: a whole number from 0, else 0. */
export function offsetParam(params: URLSearchParams): number {
  const offset = Number(params.get("offset") ?? "0");
  return Number.isInteger(offset) && offset >= 0 ? offset : 0;
}

/** "1 payment", "3 payments". */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count.toLocaleString("en-GB")} ${count === 1 ? one : many}`;
}
