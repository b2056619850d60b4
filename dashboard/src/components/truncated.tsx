/**
 * A long value (an id, endpoint, domain, address) in a cell of fixed width: cut with an ellipsis
 * at the end of the cell, never broken inside a word and never pushing other columns away. The
 * whole value is the element's text (copying a selection copies all of it; one click selects it
 * all), shown on hover (title) and on keyboard focus (the element unfolds while focused).
 */
import type { ReactNode } from "react";

export function Truncated({ text, className, testId }: { text: string; className?: string; testId?: string }): ReactNode {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: focus is how a keyboard user reads the whole value.
    <span className={`trunc${className === undefined ? "" : ` ${className}`}`} title={text} tabIndex={0} data-testid={testId}>
      {text}
    </span>
  );
}
