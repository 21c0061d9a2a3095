package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
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
