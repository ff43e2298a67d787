# The pet adoption service as a container. Multi-stage: the build stage compiles TypeScript and copies
# the documentation page's renderer into assets/; the runtime stage holds production dependencies
# (installed without running any package's scripts: none needs a compiler), dist/, assets/ and the
# OpenAPI document it serves (openapi.json) only, runs as a non-root user, and keeps the embedded
# SQLite database in a volume.

FROM node:26-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.mjs scripts/build-record.mjs scripts/build-docs-assets.mjs ./scripts/
COPY src ./src
# `npm ci` runs the prepare script, which also builds the typed client.
COPY client ./client
RUN npm ci --no-audit --no-fund

FROM node:26-slim
# Two server threads on SQLite, sharing one limiter (docs/workers.md): about 185 MB resident at peak under load,
# 50 MB more for each further worker. Set WORKERS to the container's CPUs (`docker run --cpus`) and its memory
# limit to match.
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=1 \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATABASE_URL=sqlite:/data/petstore.db \
    WORKERS=2 \
    LOG_LEVEL=info
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/assets ./assets
COPY openapi.json ./
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const tls = !!process.env.TLS_CERT; if (tls) process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0'; fetch(`http${tls ? 's' : ''}://127.0.0.1:${process.env.PORT || 8080}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The server runs as `npm start` runs it, with the same Node.js flags (and variables, in ENV above;
# docs/platform.md, "Runtime settings"); keys are managed with: docker exec <container> ./dist/cli/main.js keys ...
CMD ["node", "--max-semi-space-size=2", "--no-allocation-site-pretenuring", "--heap-growing-percent=30", "--experimental-sqlite", "dist/cli/main.js", "serve"]
