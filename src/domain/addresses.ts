/**
 * Who a request comes from: the address that per-address limits count and the log shows.
 *
 * Without a proxy it is the socket's peer. Behind proxies, X-Forwarded-For is read from the right,
 * the only end a client cannot write: each proxy appends the address it received the request from,
 * so the entry a trusted proxy appended is believed, and the walk stops at the first address that is
 * not a trusted proxy (or after the trusted number of hops). Entries to its left are the client's
 * own text and never believed. An entry that is not an IP address ends the walk at the last address
 * known good, so no arbitrary string ever becomes a limiter key or a log field.
 *
 * Addresses are normalised: an IPv4-mapped IPv6 address is the IPv4 address, IPv6 is written in its
 * canonical form (RFC 5952), and one IPv6 client is limited per /64, the block a single subscriber
 * is usually given, since it can choose any address inside it.
 */
import { BlockList, isIP, isIPv4 } from 'node:net';

/** Which proxies' X-Forwarded-For entries are believed. */
export type ProxyTrust =
  | { kind: 'none' }
  /** A fixed number of proxies in front: the entry the outermost one appended is the client. */
  | { kind: 'hops'; hops: number }
  /** The proxies' own addresses: entries are believed while they come from one of these. */
  | { kind: 'addresses'; proxies: BlockList };

/** proxy-addr's names for address ranges, accepted in TRUST_PROXY. */
const NAMED_RANGES: Record<string, [address: string, prefix: number, family: 'ipv4' | 'ipv6'][]> = {
  loopback: [
    ['127.0.0.0', 8, 'ipv4'],
    ['::1', 128, 'ipv6'],
  ],
  linklocal: [
    ['169.254.0.0', 16, 'ipv4'],
    ['fe80::', 10, 'ipv6'],
  ],
  uniquelocal: [
    ['10.0.0.0', 8, 'ipv4'],
    ['172.16.0.0', 12, 'ipv4'],
    ['192.168.0.0', 16, 'ipv4'],
    ['fc00::', 7, 'ipv6'],
  ],
};

/**
 * The proxies named by a list of addresses, CIDR ranges and range names (validated by the
 * configuration); undefined when an entry is none of these.
 */
export function proxyList(entries: readonly string[]): BlockList | undefined {
  const list = new BlockList();
  for (const entry of entries) {
    const named = NAMED_RANGES[entry];
    if (named) {
      for (const [address, prefix, family] of named) list.addSubnet(address, prefix, family);
      continue;
    }
    const [text = '', bits, ...rest] = entry.split('/');
    const address = normaliseAddress(text);
    if (address === undefined || rest.length > 0) return undefined;
    const family = isIPv4(address) ? 'ipv4' : 'ipv6';
    const max = family === 'ipv4' ? 32 : 128;
    if (bits === undefined) list.addAddress(address, family);
    else if (/^[0-9]{1,3}$/.test(bits) && Number(bits) <= max) list.addSubnet(address, Number(bits), family);
    else return undefined;
  }
  return list;
}

const IPV4_MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/**
 * An address in its one canonical text, or undefined when the text is not an IP address. Also
 * accepts the forms some proxies write into X-Forwarded-For: `[v6]`, `[v6]:port` and `v4:port`.
 */
export function normaliseAddress(raw: string): string | undefined {
  let text = raw.trim();
  if (isIPv4(text)) return text;
  const bracketed = /^\[([^\]]+)\](?::[0-9]{1,5})?$/.exec(text);
  if (bracketed) text = bracketed[1]!;
  else if (/^[0-9.]+:[0-9]{1,5}$/.test(text)) text = text.slice(0, text.indexOf(':'));
  const family = isIP(text);
  if (family === 4) return text;
  if (family !== 6 || text.includes('%')) return undefined; // zone ids name an interface, not a client
  // The URL parser writes IPv6 in the canonical form of RFC 5952, an embedded IPv4 part in hex.
  const canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  const mapped = IPV4_MAPPED.exec(canonical);
  if (!mapped) return canonical;
  const high = parseInt(mapped[1]!, 16);
  const low = parseInt(mapped[2]!, 16);
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** Whether a normalised address is one of the listed proxies. */
export function isListedProxy(proxies: BlockList, address: string): boolean {
  return proxies.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}

/**
 * The client's address as the service reports it: the socket's peer, or what trusted proxies say.
 * `socketAddress` is undefined once a socket has closed; such a client is "unknown".
 */
export function resolveClientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  trust: ProxyTrust,
): string {
  const peer = (socketAddress !== undefined && normaliseAddress(socketAddress)) || 'unknown';
  if (trust.kind === 'none' || forwardedFor === undefined) return peer;
  // Repeated header fields are one list, in order (RFC 9110 §5.3).
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let current = peer;
  for (let hop = 0; hop < entries.length; hop++) {
    const trusted = trust.kind === 'hops' ? hop < trust.hops : current !== 'unknown' && isListedProxy(trust.proxies, current);
    if (!trusted) break;
    const next = normaliseAddress(entries[entries.length - 1 - hop]!);
    if (next === undefined) break;
    current = next;
  }
  return current;
}

/**
 * The subject a per-address limit counts: the address itself for IPv4, its /64 for IPv6. `unknown`
 * (a socket already gone) stays as it is.
 */
export function addressBucket(address: string): string {
  if (isIPv4(address) || !address.includes(':')) return address;
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined ? headGroups : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return `${groups.slice(0, 4).join(':')}::/64`;
}
