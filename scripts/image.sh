#!/usr/bin/env bash
# npm run image: builds planfence's container image from this checkout (docs/containers.md),
# tagged planfence:dev and planfence:<version>, from the checkout's own dist/ (npm run build)
# and node_modules/ (npm ci): no registry is needed when the base image is on the machine.
#
#   PLANFENCE_NODE_IMAGE=<image>   the base (default node:20-bookworm-slim, pulled if absent)
#   PLANFENCE_NODE_IMAGE=host      a base made here, FROM scratch: this machine's node binary
#                                  and the libraries it links (tagged planfence-node-base:local)
#   PLANFENCE_IMAGE_NAME=<name>    the repository to tag (default planfence)
#
# The base's node must run the checkout's compiled SQLite driver: the script stops when its
# Node.js ABI or architecture differs from this machine's node.
set -euo pipefail
cd "$(dirname "$0")/.."

base="${PLANFENCE_NODE_IMAGE:-node:20-bookworm-slim}"
name="${PLANFENCE_IMAGE_NAME:-planfence}"
version="$(node -p 'require("./package.json").version')"
out="dist/image"

say() { printf 'image: %s\n' "$*" >&2; }

# docker build with BuildKit where a client on PATH has it (its context is sent as a diff,
# which makes a rebuild of an unchanged checkout take seconds): a client with the buildx
# plugin, or one older than 23 (BuildKit built in); else the legacy builder.
build() {
  local client client_version
  for client in $(type -ap docker); do
    if "$client" buildx version >/dev/null 2>&1; then
      DOCKER_BUILDKIT=1 "$client" build "$@"
      return
    fi
    client_version="$("$client" version --format '{{.Client.Version}}' 2>/dev/null || true)"
    if [ -n "$client_version" ] && [ "${client_version%%.*}" -lt 23 ] 2>/dev/null; then
      DOCKER_BUILDKIT=1 "$client" build "$@"
      return
    fi
  done
  DOCKER_BUILDKIT=0 docker build "$@"
}

if [ ! -f dist/src/main.js ]; then
  say "dist/src/main.js is missing: run npm run build first"
  exit 1
fi
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || {
  say "no Docker engine answers (docker version): start dockerd, or set DOCKER_HOST"
  exit 1
}

if [ "$base" = host ]; then
  # A base image without a registry: node and the shared libraries it loads, nothing else.
  # Built again only when this machine's node binary changed (its digest is a label).
  node_bin="$(readlink -f "$(command -v node)")"
  base="planfence-node-base:local"
  digest="$(sha256sum "$node_bin" | cut -d' ' -f1)"
  label='{{index .Config.Labels "planfence.node.sha256"}}'
  if [ "$(docker image inspect "$base" --format "$label" 2>/dev/null)" != "$digest" ]; then
    base_dir="$(mktemp -d)"
    trap 'rm -rf "$base_dir"' EXIT
    mkdir -p "$base_dir/root/usr/local/bin" "$base_dir/root/tmp"
    chmod 1777 "$base_dir/root/tmp"
    cp "$node_bin" "$base_dir/root/usr/local/bin/node"
    for lib in $(ldd "$node_bin" | grep -o '/[^ ]*'); do
      mkdir -p "$base_dir/root$(dirname "$lib")"
      cp -L "$lib" "$base_dir/root$lib"
    done
    printf '%s\n' 'FROM scratch' 'COPY root/ /' 'ENV PATH=/usr/local/bin:/usr/bin:/bin' 'CMD ["node"]' \
      >"$base_dir/Dockerfile"
    say "base $base: $node_bin ($(node --version)) and the $(ldd "$node_bin" | grep -c '/') libraries it loads"
    build -q -t "$base" --label "planfence.node.sha256=$digest" \
      --label "org.opencontainers.image.description=node $(node --version) of the build machine" \
      "$base_dir" >/dev/null
  fi
fi

if ! docker image inspect "$base" >/dev/null 2>&1; then
  say "pulling $base (no registry? PLANFENCE_NODE_IMAGE=host builds a base from this machine's node)"
  docker pull "$base" >/dev/null
fi
host_abi="$(node -p 'process.versions.modules + " " + process.arch')"
base_abi="$(docker run --rm --network none --entrypoint node "$base" -p 'process.versions.modules + " " + process.arch')"
if [ "$host_abi" != "$base_abi" ]; then
  say "$base runs Node.js ABI/arch $base_abi; this checkout's node_modules were built for $host_abi"
  say "choose a base with the same Node.js major version (PLANFENCE_NODE_IMAGE), or build from the source: docker build ."
  exit 1
fi

node scripts/image-files "$out" >&2
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
say "building $name:dev and $name:$version on $base"
build --target prebuilt \
  --build-arg "NODE_IMAGE=$base" \
  --label "org.opencontainers.image.title=planfence" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  -t "$name:dev" -t "$name:$version" \
  -f Dockerfile "$out" >&2
size="$(docker image inspect "$name:dev" --format '{{.Size}}')"
say "$name:dev = $name:$version, $((size / 1000000)) MB"
