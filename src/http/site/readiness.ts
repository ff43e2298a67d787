/**
 * Whether this instance is ready: not draining, and storage answers (on SQLite, takes writes again after
 * they failed: see store.ping). The one check behind /readyz and the petstore_ready gauge, so the two
 * cannot disagree.
 */
import type { Store } from '../../storage/store.ts';
import { StorageUnavailableError } from '../../storage/errors.ts';

/**
 * A ping still unanswered after this is not ready. A healthy store answers in milliseconds; this keeps
 * /readyz under a probe's timeout (Kubernetes' default is 1 s) and a scrape short while storage hangs.
 */
export const READY_WITHIN_MS = 1000;

export type Readiness =
  | { ready: true }
  /** `cause`: what failed, when it is still to be logged (a cause the store logged already is left out). */
  | { ready: false; message: string; cause?: unknown };

/** A ping that took longer than READY_WITHIN_MS; the ping itself is left to end on its own. */
class PingTimeoutError extends Error {}

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new PingTimeoutError(`storage did not answer a ping within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

export async function readiness(app: { readonly draining: boolean }, store: Store): Promise<Readiness> {
  if (app.draining) return { ready: false, message: 'Shutting down' };
  try {
    await within(store.ping(), READY_WITHIN_MS);
    return { ready: true };
  } catch (err) {
    const message =
      err instanceof PingTimeoutError
        ? `Storage did not answer within ${READY_WITHIN_MS / 1000} s`
        : err instanceof StorageUnavailableError && err.reason !== undefined
          ? `Storage cannot take writes: ${err.reason}`
          : 'Storage is not reachable';
    return err instanceof StorageUnavailableError && err.logged ? { ready: false, message } : { ready: false, message, cause: err };
  }
}
