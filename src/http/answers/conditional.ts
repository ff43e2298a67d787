/**
 * Entity tags and `If-None-Match` (RFC 9110 §8.8.3, §13.1.2): a client that kept an answer sends its
 * ETag back and gets `304 Not Modified`, without the body, while the representation is unchanged.
 */
import { hash } from 'node:crypto';

/**
 * The strong entity tag of an answer: a digest of everything that makes it (the body, and the next
 * page's link on a list page), so equal answers get equal tags on every instance and any change gives
 * a new one. 22 base64url characters (132 bits) are far beyond any chance of two bodies colliding.
 */
export function entityTag(...parts: string[]): string {
  return `"${hash('sha256', parts.join('\n'), 'base64url').slice(0, 22)}"`;
}

/**
 * The tag of the same answer in a content coding: another representation, so another validator
 * (RFC 9110 §8.8.3), recognisable as a sibling of the identity one.
 */
export function codedTag(identityTag: string, coding: string): string {
  return `${identityTag.slice(0, -1)}-${coding}"`;
}

/**
 * Whether `If-None-Match` names the representation about to be sent, by the weak comparison the field
 * uses (§13.1.2): `*`, or a listed tag with the same opaque part, `W/` or not. An element that is not
 * a quoted tag is skipped; it matches nothing. Not `fresh`: it takes a tab between tags (valid OWS) as
 * part of the tag, and answers `Cache-Control: no-cache` with 200 as a cache would (conditional.test.ts).
 */
export function noneMatchHits(ifNoneMatch: string | undefined, tag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  if (ifNoneMatch === tag) return true; // what a client that kept the answer sends back
  let i = 0;
  const end = ifNoneMatch.length;
  while (i < end) {
    const c = ifNoneMatch[i]!;
    if (c === ' ' || c === '\t' || c === ',') {
      i++;
      continue;
    }
    if (c === '*') return true;
    if (c === 'W' && ifNoneMatch[i + 1] === '/') i += 2;
    if (ifNoneMatch[i] === '"') {
      // An opaque tag runs to the next quote: a comma inside it is part of the tag (etagc allows it).
      const close = ifNoneMatch.indexOf('"', i + 1);
      if (close < 0) return false;
      if (ifNoneMatch.slice(i, close + 1) === tag) return true;
      i = close + 1;
      continue;
    }
    const comma = ifNoneMatch.indexOf(',', i);
    if (comma < 0) return false;
    i = comma + 1;
  }
  return false;
}
