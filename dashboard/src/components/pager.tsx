/** Page controls of an offset-paged list: previous, "rows a–b of n", next. */
import type { ReactNode } from "react";

export function Pager({
  label,
  offset,
  size,
  shown,
  total,
  onPage,
}: {
  label: string;
  offset: number;
  size: number;
  shown: number;
  total: number;
  onPage: (offset: number) => void;
}): ReactNode {
  if (total <= size && offset === 0) return null;
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

/** "1 payment", "3 payments". */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count.toLocaleString("en-GB")} ${count === 1 ? one : many}`;
}
