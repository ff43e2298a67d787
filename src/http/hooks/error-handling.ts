/**
 * The one mapping of every failure, the framework's included, to an ApiError, and the error handler
 * that answers with it.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { LimiterFullError } from '../../limits/subject-records.ts';
import { StorageUnavailableError } from '../../storage/errors.ts';
import { ApiError, errorBody, noResourceError } from '../contract/api-error.ts';
import { validationDetails, validationMessage, type SchemaError } from '../contract/validation-details.ts';

const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** Maps a framework error (or anything thrown) to an ApiError. */
export function toApiError(error: FastifyError | ApiError | Error): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StorageUnavailableError) {
    return new ApiError('unavailable', 'The service is temporarily unavailable; retry shortly', {
      headers: { 'Retry-After': String(error.retryAfterSeconds) },
    });
  }
  if (error instanceof LimiterFullError) {
    // Room comes back as windows end: most are a minute long.
    return new ApiError('unavailable', 'The service is counting as many clients as it can; retry shortly', {
      headers: { 'Retry-After': '60' },
    });
  }
  const fe = error as FastifyError & { validationContext?: string };
  if (fe.validation) {
    const part = PART_NAMES[fe.validationContext ?? ''] ?? 'request';
    const details = validationDetails(fe.validation as SchemaError[], part);
    return new ApiError('invalid_request', validationMessage(details, part), { details });
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'Request body is larger than 64 KiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Request body must be application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'Request body is empty; a JSON object is required');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the request body');
  }
  const status = fe.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    // A client error the framework found that has no code of its own above (e.g. a bad encoding).
    return new ApiError('invalid_request', 'The request could not be understood');
  }
  return new ApiError('internal_error', 'Internal server error');
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(error.status).type('application/json').send(errorBody(error, reply.request.id));
}

/** The error handler and the answer for paths no route or scope knows, set before any scope inherits them. */
export const errorHandling = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const apiError = toApiError(error);
      if (apiError.code === 'unavailable') {
        // Not again per request: a cause the store logged when it began (SQLite's write faults), or a
        // deliberate answer with no cause (a probe's).
        const logged =
          (error instanceof StorageUnavailableError && error.logged) || (error instanceof ApiError && error.cause === undefined);
        if (!logged)
          request.log.warn({ err: error.cause ?? error }, error instanceof LimiterFullError ? 'rate limiter full' : 'storage unavailable');
      } else if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
      return sendError(reply, apiError);
    });
    app.setNotFoundHandler((request, reply) => sendError(reply, noResourceError(request.method, request.url)));
  },
  { name: 'error-handling' },
);
