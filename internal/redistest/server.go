// Package redistest holds what the tests share: one TestMain body that
// starts a throwaway redis-server (internal/redisproc), a client and unique
// limiter names per test, and Redis Cluster and Sentinel deployments on
// loopback.
package redistest

import (
	"os"
	"testing"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// The process control of internal/redisproc, under the names the tests use.
type Server = redisproc.Server

var (
	Start        = redisproc.Start
	StartTLS     = redisproc.StartTLS
	StartWrapped = redisproc.StartWrapped
	FreePort     = redisproc.FreePort
	Ping         = redisproc.Ping
	ErrNoServer  = redisproc.ErrNoServer
)

// Required reports whether tests must fail rather than skip when a tool they
// need (redis-server, Java) is missing. It is true under CI (CI=true).
func Required() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// SkipIfShort skips t under -short: the quick loop (go test -short ./...)
// runs the core suite against one redis-server and leaves out Java,
// Cluster, Sentinel, failover and the benchmarks' long runs.
func SkipIfShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s left out of the quick loop", what)
	}
}
