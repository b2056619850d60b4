/**
 * Times: the API answers ISO 8601 UTC; the dashboard shows them in the viewer's zone, with the UTC
 * text on hover (components/time.tsx).
 */

const LOCAL = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

export function localTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : LOCAL.format(date);
}

/** "2026-11-24 10:15:00 UTC" */
export function utcTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** The value of an <input type="datetime-local"> (the viewer's zone) as ISO UTC, or null. */
export function localInputToIso(value: string): string | null {
  if (value === "") return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
}

/** A Date as an <input type="datetime-local"> value in the viewer's zone (minutes). */
export function isoToLocalInput(date: Date): string {
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** The zone the viewer's times are shown in, e.g. "Europe/Paris". */
export function viewerZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}
