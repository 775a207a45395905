# planfence's container image (docs/containers.md).
#
# Two ways to fill the same runtime stage:
#
#   docker build -t planfence:dev .
#       from the source, in a build stage: npm ci, npm run build, then the runtime files are
#       selected (scripts/image-files). Needs the npm registry and BuildKit (the default
#       builder of Docker 23 and later).
#
#   npm run image                    (scripts/image.sh; PLANFENCE_NODE_IMAGE chooses the base)
#       from this checkout's own dist/ and node_modules/ (`--target prebuilt`, the build
#       context being the folder scripts/image-files writes): no registry at all when the
#       base image is on the machine. The checkout's compiled SQLite driver must suit the
#       base's node: same Node.js major version, a glibc at least as recent as the build's.
#
# NODE_IMAGE is the runtime's base: anything with node on PATH (at /usr/local/bin/node for the
# health check's sake). Nothing in the runtime stage runs a shell or a package manager, so a
# base made FROM scratch with a node binary and its libraries serves as well.

ARG NODE_IMAGE=node:20-bookworm-slim
ARG BUILD_IMAGE=node:20-bookworm

# The runtime: settings shared by both ways; no files of planfence yet.
FROM ${NODE_IMAGE} AS runtime
# Listen on every interface of the container; SQLite on the /data volume unless DATABASE_URL
# says otherwise; the generated admin token (first start without PLANFENCE_ADMIN_TOKEN) is
# written to /data too, and so are SQLite's temporary files (a statement's journal: with a
# read-only root file system, /data is the only folder it can write); JSON log lines on stdout
# whether or not a terminal is attached.
ENV HOST=0.0.0.0 \
    PORT=4000 \
    DATABASE_URL=sqlite:/data/planfence.db \
    PLANFENCE_ADMIN_TOKEN_FILE=/data/admin-token \
    SQLITE_TMPDIR=/data \
    PLANFENCE_LOG_FORMAT=json
WORKDIR /app
EXPOSE 4000
# Not root, numerically (Kubernetes' runAsNonRoot can check it; no /etc/passwd entry is needed).
USER 10001:10001
# No curl in the image: node asks /health (200 when the database takes writes).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||4000)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node is PID 1 and the service handles SIGTERM: stop accepting, finish what is in flight,
# exit 0 (PLANFENCE_SHUTDOWN_TIMEOUT_SECONDS, 10 s by default, bounds it).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--max-semi-space-size=8", "--v8-pool-size=1", "/app/bin/planfence"]
CMD ["serve"]

# From a folder written by `node scripts/image-files OUT` (the build context).
FROM runtime AS prebuilt
COPY --chown=10001:10001 data /data
COPY app/node_modules /app/node_modules
COPY app/package.json /app/package.json
COPY app/public /app/public
COPY app/bin /app/bin
COPY app/dist /app/dist
VOLUME ["/data"]

# From the source (the default target below).
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build && node scripts/image-files /out

FROM runtime AS image
COPY --from=build --chown=10001:10001 /out/data /data
COPY --from=build /out/app/node_modules /app/node_modules
COPY --from=build /out/app/package.json /app/package.json
COPY --from=build /out/app/public /app/public
COPY --from=build /out/app/bin /app/bin
COPY --from=build /out/app/dist /app/dist
VOLUME ["/data"]
