#!/usr/bin/env bash
# Installs a built release of the pet adoption service beside the others, switches the service to it,
# and back (docs/operations.md, "Under systemd"). The layout petstore.service runs:
#
#   /opt/petstore/releases/NAME  one folder per release, never changed once installed
#   /opt/petstore/current        a symbolic link to the release in use
#   /opt/petstore/previous       a symbolic link to the release in use before the last install
#
# `install SOURCE NAME` copies the release built in SOURCE (a checkout after `npm ci`) to
# releases/NAME and installs its production dependencies there, never in the running release's
# folder; backs the database up (petstore-backup.service, run by the release in use); runs the new
# release's `petstore migrate` as the service runs its commands (a failed migration stops here, with
# nothing changed and the old release serving); then switches `current` to NAME and restarts the
# service. `rollback [NAME]` switches `current` back to `previous` (or to NAME) and restarts the
# service; the database stays migrated, which an older release serves as before (docs/operations.md,
# "Rollout order"). Run again, each does only what is left, then restarts the service.
#
# Each switch is one rename(2) of a new link over the old one: `current` always names a whole release.
# PETSTORE_BASE moves /opt/petstore, PETSTORE_NODE names the node of the units (/usr/bin/node), and
# PETSTORE_SYSTEMD=no runs it without systemd (a test's fake root): no backup and no restart, and
# `petstore migrate` as the user running this, with this environment.
set -euo pipefail
umask 022

base=${PETSTORE_BASE:-/opt/petstore}
node=${PETSTORE_NODE:-/usr/bin/node}
systemd=${PETSTORE_SYSTEMD:-yes}
# What a release is: what the Dockerfile's runtime stage copies, and its production dependencies.
files=(package.json package-lock.json openapi.json dist assets)

# Exits $1: on standard output when asked for (0), else on standard error.
usage() {
  {
    echo 'usage: install-release.sh install SOURCE NAME   install the release built in SOURCE as NAME, migrate, switch, restart'
    echo '       install-release.sh rollback [NAME]       switch back to the previous release (or to NAME), restart'
  } >&"$((${1} == 0 ? 1 : 2))"
  exit "$1"
}
die() {
  echo "install-release.sh: $*" >&2
  exit 1
}

# The release a link names ("" when there is no link).
named() { if [ -L "$base/$1" ]; then basename "$(readlink "$base/$1")"; fi; }

# Points the link $1 at releases/$2: a new link beside it, renamed over it.
point() {
  ln -sfn "releases/$2" "$base/.$1.new"
  mv -T "$base/.$1.new" "$base/$1"
}

# `petstore migrate` of release $1, as the service runs its commands: its user, its environment.
migrate() {
  local dir=$base/releases/$1
  if [ "$systemd" = no ]; then
    (cd "$dir" && "$node" --experimental-sqlite dist/cli/main.js migrate)
    return
  fi
  systemd-run --quiet --wait --pipe --collect --uid=petstore --gid=petstore --working-directory="$dir" \
    -p UMask=0077 -p StateDirectory=petstore -p StateDirectoryMode=0700 \
    -p EnvironmentFile=-/etc/petstore/env -E DATABASE_URL=sqlite:/var/lib/petstore/petstore.db \
    "$node" --experimental-sqlite "$dir/dist/cli/main.js" migrate
}

restart() {
  if [ "$systemd" != no ]; then
    systemctl restart petstore.service ||
      die "petstore.service did not start on $(named current): journalctl -u petstore -e says why; install-release.sh rollback switches back"
  fi
  echo "current: $(named current), previous: $(named previous | grep . || echo none)"
}

install_release() {
  local source=$1 name=$2 current
  current=$(named current)
  if [ -d "$base/releases/$name" ]; then
    echo "$name is installed already; its folder stays as it is"
  else
    for f in "${files[@]}"; do [ -e "$source/$f" ] || die "$source/$f is missing: build the release there first (npm ci)"; done
    # Made whole beside the others, then renamed: a folder named releases/NAME is always complete.
    local partial=$base/releases/.$name.partial
    rm -rf "$partial"
    mkdir -p "$partial"
    cp -R "${files[@]/#/$source/}" "$partial/"
    chmod -R u+rwX,go+rX,go-w "$partial"
    (cd "$partial" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund)
    mv -T "$partial" "$base/releases/$name"
  fi
  if [ -n "$current" ] && [ "$current" != "$name" ] && [ "$systemd" != no ]; then
    backup_first
  fi
  migrate "$name"
  if [ "$current" != "$name" ]; then
    if [ -n "$current" ]; then point previous "$current"; fi
    point current "$name"
  fi
  restart
}

# The database as the units name it: the unit's SQLite file, unless /etc/petstore/env names another.
database_url() {
  local url
  url=$(sed -n 's/^DATABASE_URL=//p' /etc/petstore/env 2>/dev/null | tail -n 1)
  url=${url#\"}
  echo "${url%\"}"
}

# Before a migration, a backup by the backup unit; PostgreSQL's is pg_dump's, which is not this script's.
backup_first() {
  local url
  url=$(database_url)
  case "$url" in
    "" | sqlite:* | file:*)
      systemctl start petstore-backup.service ||
        die "the backup before the upgrade failed, nothing was changed: journalctl -u petstore-backup -e says why"
      ;;
    *) echo "DATABASE_URL is not SQLite: no backup made here; back it up with pg_dump first (docs/operations.md, \"Backups\")" ;;
  esac
}

rollback() {
  local name=${1:-$(named previous)}
  [ -n "$name" ] || die "no previous release in $base: name one (ls $base/releases)"
  [ -d "$base/releases/$name" ] || die "no release $name in $base/releases"
  if [ "$(named current)" != "$name" ]; then point current "$name"; fi
  restart
}

# A release's name: a folder name, never hidden, never a path.
valid() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] || die "not a release name: $1 (letters, digits, . _ + -)"; }

case "${1:-}" in
  install)
    [ $# -eq 3 ] || usage 2
    valid "$3"
    install_release "$2" "$3"
    ;;
  rollback)
    [ $# -le 2 ] || usage 2
    if [ $# -eq 2 ]; then valid "$2"; fi
    rollback "${2:-}"
    ;;
  -h | --help) usage 0 ;;
  *) usage 2 ;;
esac
