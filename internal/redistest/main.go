package redistest

import (
	"context"
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
// (if not nil) and m, stops the server and returns the exit code. A
// missing redis-server fails the run under CI and skips it elsewhere.
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
		fmt.Fprintln(os.Stderr, "SKIP: the tests need a redis-server (make deps installs it)")
		return 0
	}
	defer srv.Close()
	*addr = srv.Addr()
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

// Client returns a go-redis client on addr that is closed when t ends.
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
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
