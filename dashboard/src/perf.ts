/**
 * Performance marks for the dashboard bench (bench/dashboard): the first time a view has drawn
 * what a person came for, the page records `performance.mark(name)`; the bench reads its time
 * since navigation started. Harmless in normal use (a handful of marks per page load).
 */
const marked = new Set<string>();

export function markOnce(name: string): void {
  if (marked.has(name)) return;
  marked.add(name);
  performance.mark(name);
}
