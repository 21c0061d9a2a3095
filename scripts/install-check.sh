#!/usr/bin/env bash
# Installs the published modules as a stranger would: from a module proxy
# built from this repository's HEAD (internal/modproxy, file://), in a new
# module outside the repository, with no workspace and no replace. It
# builds a program that uses the core, httplimit, grpclimit and otel,
# installs the CLI (its own module, cmd/ratelimiter) with go install
# ...@version, and runs both against a throwaway redis-server.
# Commit first: the modules are zipped from HEAD.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${VERSION:-v0.1.0}
tmp=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# x/mod/zip zips only from a repository whose .git is a directory; a git
# worktree's .git is a file, so from one the modules are zipped from a
# clone checked out at the same HEAD.
src=$root
if [ ! -d "$root/.git" ]; then
  git clone -q --no-checkout "$root" "$tmp/repo"
  git -C "$tmp/repo" checkout -q --detach "$(git -C "$root" rev-parse HEAD)"
  src=$tmp/repo
fi
(cd "$root/internal/modproxy" && GOWORK=off go run . -repo "$src" -out "$tmp/proxy" -version "$version" . otel grpclimit cmd/ratelimiter)

# A module cache of its own, kept between runs for the upstream modules;
# this repository's modules are dropped from it first, so that each run
# installs what HEAD holds, never an earlier run's v0.1.0.
cache=${INSTALL_CHECK_CACHE:-$HOME/.cache/ratelimiter/install-check-mod}
for d in "$cache/github.com/goredisson" "$cache/cache/download/github.com/goredisson"; do
  [ -e "$d" ] && chmod -R u+w "$d" && rm -rf "$d"
done
# The go command indexes module cache directories once, as if a version
# never changed (GOCACHE's modindex): with this repository's modules
# re-extracted at the same version, a stale index would hide new imports.
export GOWORK=off GOFLAGS=-mod=mod GOMODCACHE="$cache" GODEBUG=goindex=0
export GOPROXY="file://$tmp/proxy,${GOPROXY_UPSTREAM:-https://proxy.golang.org}"
export GONOSUMDB=github.com/goredisson
mkdir "$tmp/consumer"
cd "$tmp/consumer"
cat > go.mod <<MOD
module example.com/consumer

go 1.26.0
MOD
cat > main.go <<'GO'
// A stranger's program: one limiter through the core, the HTTP and gRPC
// middlewares and the OTel hooks, on the server at REDIS_ADDR.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
	"github.com/goredisson/ratelimiter/httplimit"
	ratelimiterotel "github.com/goredisson/ratelimiter/otel"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	m, err := ratelimiterotel.New()
	check(err)
	l := ratelimiter.NewClient(rdb, ratelimiter.WithHooks(m.Hooks())).Limiter("install-check")
	_, err = l.TrySetRate(ctx, ratelimiter.Config{Rate: 2, Interval: time.Minute})
	check(err)
	for i := 0; i < 3; i++ {
		ok, err := l.TryAcquire(ctx, 1)
		check(err)
		fmt.Println("granted", ok)
	}
	_, err = httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Second})
	check(err)
	_, err = grpclimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Second})
	check(err)
	fmt.Println("middlewares ok")
}

func check(err error) {
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
GO
go get "github.com/goredisson/ratelimiter@$version" "github.com/goredisson/ratelimiter/grpclimit@$version" "github.com/goredisson/ratelimiter/otel@$version"
go build -o consumer .
GOBIN="$tmp/bin" go install "github.com/goredisson/ratelimiter/cmd/ratelimiter@$version"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
want=$'granted true\ngranted true\ngranted false\nmiddlewares ok'
got=$(REDIS_ADDR="127.0.0.1:$port" ./consumer)
if [ "$got" != "$want" ]; then
  echo "install-check: the consumer printed:"; echo "$got"; exit 1
fi
"$tmp/bin/ratelimiter" --version
REDIS_URL="redis://127.0.0.1:$port/0" "$tmp/bin/ratelimiter" available install-check
# The help is read whole before it is searched: with pipefail, grep -q
# leaving at the first line's match would end the CLI with SIGPIPE.
help=$("$tmp/bin/ratelimiter" exporter -h 2>&1)
case $help in
  *--web.config.file*) ;;
  *) echo "install-check: the installed CLI's exporter has no --web.config.file"; exit 1 ;;
esac
echo "install-check: core, otel, grpclimit and the CLI $version installed from the local proxy, built and ran"
