#!/usr/bin/env bash
# Builds the Java Redisson peer used by the Go compatibility tests (package compat),
# once per Redisson version, into internal/compat/peer/target/<version>/ (git-ignored):
#   peer.jar  the peer's classes
#   lib/      the real org.redisson:redisson artifact and its runtime dependencies
#   .stamp    hash of the sources it was built from
# Idempotent: a version whose build is current is skipped. Maven resolves into the
# usual local repository (~/.m2 unless MAVEN_OPTS/-Dmaven.repo.local say otherwise),
# so run this before `go test` (CI does) to keep downloads out of test timeouts.
#
# usage: internal/compat/build-peer.sh [VERSION...]   (default: all versions the suite covers)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
peer="$here/peer"
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
  versions=(4.7.0 3.52.0 3.20.1 3.16.8 3.16.3)
fi

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-peer.sh: $tool not found (need Java 17+ and Maven 3.8+)" >&2
    exit 1
  fi
done

# Hash of everything the build depends on.
src_hash="$(cd "$peer" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"

for v in "${versions[@]}"; do
  case "$v" in
    *[!0-9A-Za-z.-]*|'') echo "build-peer.sh: bad version '$v'" >&2; exit 2 ;;
  esac
  out="$peer/target/$v"
  if [ -f "$out/peer.jar" ] && [ -d "$out/lib" ] && [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$src_hash" ]; then
    echo "build-peer.sh: redisson $v peer is up to date ($out)"
    continue
  fi
  echo "build-peer.sh: building peer for redisson $v"
  # Serialize concurrent builds of one version (parallel go test processes).
  mkdir -p "$peer/target"
  (
    flock 9
    if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$src_hash" ]; then exit 0; fi
    rm -rf "$out"
    mvn -q -B -Dstyle.color=never -f "$peer/pom.xml" -Dredisson.version="$v" package
    echo "$src_hash" > "$out/.stamp"
  ) 9>"$peer/target/.lock-$v"
  echo "build-peer.sh: built $out"
done
