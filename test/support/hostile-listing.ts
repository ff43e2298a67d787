/**
 * The most expensive listing one key can ask for, as the caches see it (bench/cache-memory.ts and the
 * cache budgets test run it against a server process): pets whose names are 99 control characters
 * (each escaped to six bytes of JSON) and one two-byte character (so V8 holds the text of a whole page
 * at two bytes a character), every cursor of a one-pet walk fetched again at limit=100 in identity,
 * gzip and br, so that every full page is kept in every coding, and every pet read by id.
 */

/** Control characters that are not white space, so the name is valid; JSON escapes each as \u00XX. */
const CONTROLS = [...Array.from({ length: 8 }, (_, i) => i + 1), ...Array.from({ length: 18 }, (_, i) => i + 14)];

export const hostileName = (seed: number) =>
  Array.from({ length: 99 }, (_, i) => String.fromCharCode(CONTROLS[(seed * 31 + i * 7) % CONTROLS.length]!)).join('') + '\u20ac';

export const CODINGS = ['identity', 'gzip', 'br'] as const;

async function inParallel<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

export interface HostileListing {
  /** The API's base URL, ending in /v1. */
  base: string;
  /** A key whose limits the listing does not reach. */
  key: string;
  pets: number;
  /** Requests under way at once. */
  concurrency: number;
}

/** Creates the pets, then reads every page of 100 in every coding and every pet by id. */
export async function hostileListing({ base, key, pets, concurrency }: HostileListing): Promise<void> {
  const auth = { Authorization: `Bearer ${key}` };
  const read = async (url: string, headers: Record<string, string> = {}) => {
    const answer = await fetch(url, { headers: { ...auth, ...headers } });
    await answer.arrayBuffer();
    if (answer.status !== 200) throw new Error(`${url} answered ${answer.status}`);
    return answer;
  };
  await inParallel(
    Array.from({ length: pets }, (_, i) => i),
    concurrency,
    async (i) => {
      const answer = await fetch(`${base}/pets`, {
        method: 'POST',
        headers: { ...auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: hostileName(i), categoryId: 1 }),
      });
      if (answer.status !== 201) throw new Error(`create answered ${answer.status}: ${await answer.text()}`);
    },
  );
  // A one-pet walk gives a cursor after every pet; each opens its own 100-pet page.
  const cursors: (string | undefined)[] = [undefined];
  for (let url: string | undefined = `${base}/pets?limit=1`; url;) {
    const link: string = (await read(url)).headers.get('link') ?? '';
    const next: string | undefined = /<([^>]+)>; rel="next"/.exec(link)?.[1];
    if (next) cursors.push(new URL(next, base).searchParams.get('cursor')!);
    url = next && new URL(next, base).href;
  }
  const fetches = cursors.flatMap((cursor) => CODINGS.map((coding) => ({ cursor, coding })));
  await inParallel(fetches, concurrency, async ({ cursor, coding }) => {
    const query = cursor === undefined ? '' : `&cursor=${cursor}`;
    // undici decompresses on its own; asking for one coding alone makes the server send it.
    await read(`${base}/pets?limit=100${query}`, { 'Accept-Encoding': coding });
  });
  await inParallel(
    Array.from({ length: pets }, (_, i) => i + 1),
    concurrency,
    async (id) => void (await read(`${base}/pets/${id}`)),
  );
}
