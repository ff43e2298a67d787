/**
 * Configuration (src/config.ts): What the service shows beyond the API and to whom: metrics, traces,
 * browsers of other origins (CORS), and TLS.
 */
import { ConfigError, pair, variable, Schema } from '../variable.ts';
import { HOST_NAME } from './deployment.ts';

export const EXPOSURE_VARIABLES = [
  variable({
    env: 'METRICS_TOKEN',
    field: 'metricsToken',
    schema: Schema.String({ pattern: /^[\x21-\x7e]{16,256}$/.source }),
    accepts: '16 to 256 printable ASCII characters without spaces',
    secret: true,
    default: undefined,
    description:
      'When set, `/metrics` is served on the public listener to requests with `Authorization: Bearer <token>`. ' +
      'Unset: `/metrics` is a 404 there.',
    app: true,
  }),
  variable({
    env: 'METRICS_PORT',
    field: 'metricsPort',
    schema: Schema.Integer({ minimum: 1, maximum: 65535 }),
    default: undefined,
    description: 'When set, a second listener serves `GET /metrics` without a token, on `METRICS_HOST`.',
    app: false,
  }),
  variable({
    env: 'METRICS_HOST',
    field: 'metricsHost',
    schema: Schema.String({ pattern: HOST_NAME }),
    accepts: 'a host name or address',
    default: '127.0.0.1',
    description: 'Address of the metrics listener (a private interface, for a scraper on the same host or network).',
    app: false,
  }),
  variable({
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    field: 'otlpEndpoint',
    schema: Schema.String({ pattern: /^https?:\/\/./.source }),
    accepts: 'an `http://` or `https://` URL',
    // A collector's URL may carry credentials: never echo it.
    secret: true,
    default: undefined,
    description:
      'When set, every request is traced (OpenTelemetry) and its spans sent, in batches, to this OTLP/HTTP collector ' +
      '(`/v1/traces` is appended). Unset: tracing is off and not even loaded. The exporter reads the other standard ' +
      '`OTEL_EXPORTER_OTLP_*` variables (headers, timeout) itself; see Tracing in docs/operations.md.',
    app: false,
    parse(raw, refuse): string | undefined {
      if (raw !== undefined && !URL.canParse(raw)) refuse();
      return raw;
    },
  }),
  variable({
    env: 'OTEL_SERVICE_NAME',
    field: 'otelServiceName',
    schema: Schema.String({ pattern: /^[\x21-\x7e]{1,128}$/.source }),
    accepts: '1 to 128 printable ASCII characters without spaces',
    default: 'petstore',
    description: "The `service.name` of this instance's spans (with tracing on).",
    app: false,
  }),
  variable({
    env: 'CORS_ORIGINS',
    field: 'corsOrigins',
    schema: Schema.String(),
    accepts: '`*` or a comma-separated list of origins like `https://app.example.com`',
    default: undefined,
    description: 'Origins allowed to call the API from browsers. Unset: no CORS headers at all.',
    app: true,
    parse(raw, refuse): readonly string[] | '*' {
      if (raw === undefined || raw.trim() === '') return Object.freeze([]);
      if (raw.trim() === '*') return '*';
      const origins = raw.split(',').map((o) => o.trim());
      for (const origin of origins) {
        const url = URL.parse(origin);
        if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin) refuse(origin);
      }
      return Object.freeze(origins);
    },
  }),
  pair({
    env: ['TLS_CERT', 'TLS_KEY'],
    field: 'tls',
    schema: Schema.String(),
    accepts: 'paths of PEM files',
    default: undefined,
    description: 'Certificate and key: the server listens with HTTPS itself. Both or neither.',
    app: false,
    parse([certPath, keyPath]): { certPath: string; keyPath: string } | undefined {
      if (!certPath && !keyPath) return undefined;
      if (!certPath || !keyPath) throw new ConfigError('TLS_CERT and TLS_KEY must be set together (PEM files), or neither');
      return { certPath, keyPath };
    },
  }),
] as const;
