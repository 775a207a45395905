#!/usr/bin/env bash
# Writes the secret files docker-compose.yml reads, into deploy/compose/secrets/ (or DIR):
#   admin-token        the admin's bearer token (PLANFENCE_ADMIN_TOKEN of both instances)
#   postgres-password  the password of PostgreSQL's role planfence
#   database-url       DATABASE_URL of both instances, with that password
#   oidc.json          the OIDC issuers (docs/identity.md): {} here, read only once
#                      PLANFENCE_OIDC_CONFIG=/run/secrets/oidc.json is set for compose
# An existing file is kept. Compose mounts each file as it is, and the containers' users
# (planfence's 10001, PostgreSQL's 999) must read it: the files are readable by all (0644),
# the folder by its owner only (0700), which keeps other users of this machine out.
#
#   bash deploy/compose/init-secrets.sh [DIR]
set -euo pipefail
dir="${1:-$(dirname "$0")/secrets}"
mkdir -p "$dir"
chmod 700 "$dir"
random() { node -e 'process.stdout.write(require("node:crypto").randomBytes(24).toString("base64url"))'; }
write() {
  local file="$dir/$1"
  if [ -e "$file" ]; then
    echo "kept $file"
    return
  fi
  printf '%s' "$2" >"$file"
  chmod 644 "$file"
  echo "wrote $file"
}
write admin-token "pf_$(random)"
write postgres-password "$(random)"
write database-url "postgres://planfence:$(cat "$dir/postgres-password")@postgres:5432/planfence"
write oidc.json '{}'
