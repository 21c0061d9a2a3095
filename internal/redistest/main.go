package redistest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Main is the body of a package's TestMain that shares one server among
// its tests: it starts a server, stores its address in *addr, runs setup
// (if not nil; it must not need the server) and m, stops the server and
// returns the exit code.
//
// When no server can be started, Main returns 1 under CI (Required), before
// running anything. Elsewhere it still runs setup and m, so that the tests
// which need no Redis (pure unit tests, fuzz seeds, internal tests) run:
// *addr is then NoServerAddr, and Need, Client, StartCluster and
// StartSentinel skip the tests that ask for Redis. An example cannot skip,
// so Main then leaves every example out (it adds ^Example to -test.skip)
// and says so on stderr.
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }
func Main(m *testing.M, addr *string, setup func() (cleanup func(), err error)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	srv, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start redis-server:", err)
		if Required() {
			return 1
		}
		noServer = err
		*addr = NoServerAddr
		if err := skipExamples(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "redistest: no redis-server (make deps installs it): the tests that need one skip, the examples are left out, the rest run")
	} else {
		defer srv.Close()
		*addr = srv.Addr()
	}
	if setup != nil {
		cleanup, err := setup()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
	}
	return m.Run()
}

// NoServerAddr is the address Main stores when it could not start a
// server: a loopback port nothing listens on, so that a test reading the
// address without Need fails with "connection refused" instead of reaching
// a Redis on go-redis's default, localhost:6379.
const NoServerAddr = "127.0.0.1:0"

// noServer is why Main could not start the package's server; nil when it
// did, or when Main did not run. It is written before m.Run, so the tests
// read it without a lock.
var noServer error

// Need skips t when Main could not start the test binary's redis-server
// (outside CI; under CI Main fails the run instead). Every test that talks
// to the package's Redis, or starts a redis-server of its own, calls it
// first, directly or through Client or a package helper.
func Need(t testing.TB) {
	t.Helper()
	if noServer != nil {
		t.Skipf("needs a redis-server: %v", noServer)
	}
}

// skipExamples adds ^Example to the -test.skip pattern (as an alternative,
// so that a -skip given on the command line still holds): most examples
// print what a live Redis answers, and an example cannot skip itself.
func skipExamples() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.skip")
	if f == nil {
		return errors.New("redistest: no -test.skip flag (testing.Init not run?)")
	}
	v := "^Example"
	if old := f.Value.String(); old != "" {
		v = old + "|" + v
	}
	return flag.Set("test.skip", v)
}

// Client returns a go-redis client on addr that is closed when t ends. It
// skips t first when the binary has no server (Need).
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	Need(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

var nameSeq atomic.Int64

// Name returns a name unique to this test binary's run, made from t's
// name, so that tests sharing a server keep to keys of their own.
func Name(t testing.TB) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), nameSeq.Add(1))
}
