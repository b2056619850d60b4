/**
 * Cursor paging of a `transactions` list: the cursors of the pages before the current one (the
 * first page has none), started over when the filters (`key`) change, and the pager under the
 * list: newer, "Rows a–b", older.
 */
import { type ReactNode, useState } from "react";

export interface CursorPages {
  /** Cursors of the pages before the current one. */
  readonly cursors: readonly string[];
  /** The `after` argument of the current page. */
  readonly after: string | null;
  readonly back: () => void;
  readonly forward: (endCursor: string) => void;
}

export function useCursorPages(key: string): CursorPages {
  const [paging, setPaging] = useState<{ key: string; cursors: string[] }>({ key, cursors: [] });
  const cursors = paging.key === key ? paging.cursors : [];
  return {
    cursors,
    after: cursors.at(-1) ?? null,
    back: () => setPaging({ key, cursors: cursors.slice(0, -1) }),
    forward: (endCursor) => setPaging({ key, cursors: [...cursors, endCursor] }),
  };
}

export function CursorPager({
  label,
  testId,
  pages,
  size,
  shown,
  pageInfo,
}: {
  label: string;
  testId: string;
  pages: CursorPages;
  size: number;
  shown: number;
  pageInfo: { readonly hasNextPage: boolean; readonly endCursor: string | null } | undefined;
}): ReactNode {
  const first = pages.cursors.length * size + 1;
  const next = pageInfo?.hasNextPage === true ? pageInfo.endCursor : null;
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" disabled={pages.cursors.length === 0} onClick={pages.back}>
        ← Newer
      </button>
      <span data-testid={testId} aria-live="polite">
        {shown === 0 ? "" : `Rows ${first}–${first + shown - 1}`}
      </span>
      <button type="button" disabled={next === null} onClick={() => next !== null && pages.forward(next)}>
        Older →
      </button>
    </nav>
  );
}
