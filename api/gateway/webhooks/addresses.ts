/**
 * The one classification of an IP address for outbound requests to customer-given URLs: used when
 * a webhook URL is registered (its literal host) and when a delivery connects (every address a
 * name resolves to, and the literal of an IP URL). Only `public` may be reached in production.
 *
 * IPv6 forms that carry an IPv4 address are judged by that address: IPv4-mapped `::ffff:a.b.c.d`
 * (any spelling, hex or dotted), IPv4-compatible `::a.b.c.d` / `::7f00:1`, the SIIT form
 * `::ffff:0:a.b.c.d`, 6to4 `2002:AABB:CCDD::/16`. The NAT64 prefixes (64:ff9b::/96 and the
 * local-use 64:ff9b:1::/48) translate to whatever IPv4 they embed through a gateway we do not
 * control, and Teredo (2001::/32) hides its IPv4, so they are refused whole. Outside 2000::/3
 * nothing is globally routed; inside it the special-purpose blocks are refused too.
 */
import { isIP } from "node:net";

export type AddressClass =
  | "public"
  | "loopback"
  | "unspecified"
  | "private"
  | "shared"
  | "link_local"
  | "metadata"
  | "unique_local"
  | "multicast"
  | "documentation"
  | "reserved"
  | "translated"
  | "invalid";

/** The class of an IPv4 or IPv6 literal (brackets and a `%zone` suffix allowed); `invalid` for anything else. */
export function classifyAddress(text: string): AddressClass {
  const literal = text.replace(/^\[(.*)\]$/, "$1").replace(/%[^%]*$/, "");
  const family = isIP(literal);
  if (family === 4) return classifyIpv4(ipv4Bytes(literal)!);
  if (family === 6) {
    const bytes = ipv6Bytes(literal);
    return bytes === null ? "invalid" : classifyIpv6(bytes);
  }
  return "invalid";
}

/** True for every address a customer's URL must not reach. */
export function isNonPublicAddress(text: string): boolean {
  return classifyAddress(text) !== "public";
}

function ipv4Bytes(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((part) => /^\d{1,3}$/.test(part) && Number(part) <= 255)) return null;
  return parts.map(Number);
}

/** 16 bytes of an IPv6 literal (`::` shorthand and a trailing dotted IPv4 allowed). */
function ipv6Bytes(text: string): number[] | null {
  let head = text.toLowerCase();
  const tail: number[] = [];
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(head);
  if (dotted !== null) {
    const v4 = ipv4Bytes(dotted[2]!);
    if (v4 === null) return null;
    head = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1);
    tail.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
  }
  const halves = head.split("::");
  if (halves.length > 2) return null;
  const words = (part: string): number[] | null => {
    if (part === "") return [];
    const out: number[] = [];
    for (const group of part.split(":")) {
      if (!/^[0-9a-f]{1,4}$/.test(group)) return null;
      out.push(Number.parseInt(group, 16));
    }
    return out;
  };
  const left = words(halves[0]!);
  const right = halves.length === 2 ? words(halves[1]!) : [];
  if (left === null || right === null) return null;
  const given = left.length + right.length + tail.length;
  if (halves.length === 1 ? given !== 8 : given > 7) return null;
  const groups = [...left, ...new Array<number>(8 - given).fill(0), ...right, ...tail];
  return groups.flatMap((group) => [group >> 8, group & 0xff]);
}

function classifyIpv4(b: readonly number[]): AddressClass {
  const [a, b1, c, d] = b as [number, number, number, number];
  if (a === 0) return b1 === 0 && c === 0 && d === 0 ? "unspecified" : "reserved";
  if (a === 127) return "loopback";
  if (a === 10 || (a === 172 && b1 >= 16 && b1 <= 31) || (a === 192 && b1 === 168)) return "private";
  if (a === 100 && b1 >= 64 && b1 <= 127) return "shared";
  if (a === 169 && b1 === 254) return c === 169 && d === 254 ? "metadata" : "link_local";
  if (a === 192 && b1 === 0 && c === 0) return "reserved";
  if ((a === 192 && b1 === 0 && c === 2) || (a === 198 && b1 === 51 && c === 100) || (a === 203 && b1 === 0 && c === 113)) {
    return "documentation";
  }
  if (a === 198 && (b1 === 18 || b1 === 19)) return "reserved";
  if (a === 192 && b1 === 88 && c === 99) return "reserved";
  if (a >= 224 && a <= 239) return "multicast";
  if (a >= 240) return "reserved";
  return "public";
}

function classifyIpv6(b: readonly number[]): AddressClass {
  const zeroUpTo = (end: number) => b.slice(0, end).every((byte) => byte === 0);
  const v4 = (from: number) => b.slice(from, from + 4);
  if (zeroUpTo(16)) return "unspecified";
  if (zeroUpTo(15) && b[15] === 1) return "loopback";
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (SIIT translated): the IPv4 address itself.
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return classifyIpv4(v4(12));
  if (zeroUpTo(8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return classifyIpv4(v4(12));
  // ::a.b.c.d (IPv4-compatible, deprecated): never routed, but judged by the address it names.
  if (zeroUpTo(12)) {
    const inner = classifyIpv4(v4(12));
    return inner === "public" ? "reserved" : inner;
  }
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    const inner = classifyIpv4(v4(12));
    return inner === "public" ? "translated" : inner;
  }
  if (b[0] === 0x20 && b[1] === 0x02) return classifyIpv4(v4(2));
  if (b[0] === 0xff) return "multicast";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return "link_local";
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return "reserved";
  if ((b[0]! & 0xfe) === 0xfc) return "unique_local";
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return "documentation";
  if (b[0] === 0x3f && b[1] === 0xff && (b[2]! & 0xf0) === 0) return "documentation";
  // 2001::/23: IETF protocol assignments (Teredo, benchmarking, ORCHID, ...), never a receiver.
  if (b[0] === 0x20 && b[1] === 0x01 && b[2]! <= 0x01) return "reserved";
  if ((b[0]! & 0xe0) !== 0x20) return "reserved";
  return "public";
}
