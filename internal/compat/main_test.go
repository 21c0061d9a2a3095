package compat

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// One redis-server and one default peer per Redisson version serve the whole
// package; they are started on first use and stopped by TestMain.
var (
	srvOnce sync.Once
	srv     *redistest.Server
	srvErr  error

	peersMu sync.Mutex
	peers   = map[string]*Peer{}
)

func TestMain(m *testing.M) {
	code := m.Run()
	peersMu.Lock()
	for _, p := range peers {
		_ = p.Close()
	}
	peersMu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	os.Exit(code)
}

// redisAddr returns the package's Redis, failing under CI and skipping
// elsewhere when redis-server is missing.
func redisAddr(t testing.TB) string {
	t.Helper()
	srvOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv, srvErr = redistest.Start(ctx)
	})
	if srvErr != nil {
		if redistest.Required() {
			t.Fatalf("redis-server required (CI=true): %v", srvErr)
		}
		t.Skipf("needs a redis-server: %v", srvErr)
	}
	return srv.Addr()
}

// needServer skips t (fails it under CI) when there is no redis-server
// binary to start (redisproc.Binary): for the tests that start a server of
// their own instead of using redisAddr's.
func needServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(redisproc.Binary()); err != nil {
		if redistest.Required() {
			t.Fatalf("redis-server required (CI=true): %v", err)
		}
		t.Skipf("needs a redis-server: %v", err)
	}
}

// needJava fails under CI (CI=true) and skips elsewhere when Java or Maven is missing.
func needJava(t testing.TB) {
	t.Helper()
	redistest.SkipIfShort(t, "the Java compatibility suite")
	if tool := ToolsMissing(); tool != "" {
		if redistest.Required() {
			t.Fatalf("%s not found: the Redisson compatibility suite needs Java 17 and Maven (CI=true: failing, not skipping)", tool)
		}
		t.Skipf("%s not found: skipping the Redisson compatibility suite (install Java 17 and Maven to run it)", tool)
	}
}

// peerFor returns the package's shared peer for a Redisson version.
func peerFor(t testing.TB, version string) *Peer {
	t.Helper()
	needJava(t)
	addr := redisAddr(t)
	peersMu.Lock()
	defer peersMu.Unlock()
	if p, ok := peers[version]; ok {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // first run may download
	defer cancel()
	p, err := StartPeer(ctx, PeerOptions{Version: version, Addr: addr})
	if err != nil {
		t.Fatalf("start peer %s: %v", version, err)
	}
	peers[version] = p
	return p
}

// newPeer starts an extra peer that the test owns (closed at its end).
func newPeer(t testing.TB, version, prefix string) *Peer {
	t.Helper()
	p := startPeer(t, version, prefix)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close peer: %v", err)
		}
	})
	return p
}

// startPeer starts an extra peer on the package's Redis; the caller
// closes it.
func startPeer(t testing.TB, version, prefix string) *Peer {
	t.Helper()
	needJava(t)
	addr := redisAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := StartPeer(ctx, PeerOptions{Version: version, Addr: addr, NamePrefix: prefix})
	if err != nil {
		t.Fatalf("start peer %s: %v", version, err)
	}
	return p
}

// rdb returns a go-redis client on the package's Redis, closed at the test's end.
func rdb(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// formatFor is the member format a Go client must write next to a Redisson
// version (observed; see observedFormat and TestMemberFormatMatters).
// 3.20.1 unpacks "Bc0I", which reads the library's 16-byte wire.Bc0I
// records correctly and misreads wire.Lc0I ones; 3.16.8 unpacks "Lc0I", so
// it needs wire.Lc0I; 3.16.3 unpacks "fI".
func formatFor(version string) wire.Format {
	switch version {
	case "3.16.8":
		return wire.Lc0I
	case "3.16.3":
		return wire.FI
	}
	return wire.Bc0I
}

// versionAtLeast compares dotted versions numerically.
func versionAtLeast(v, min string) bool {
	var a, b [3]int
	fmt.Sscanf(v, "%d.%d.%d", &a[0], &a[1], &a[2])
	fmt.Sscanf(min, "%d.%d.%d", &b[0], &b[1], &b[2])
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

// limName makes a limiter name unique to the test (no spaces: the peer protocol splits on them).
func limName(t testing.TB, suffix string) string {
	n := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return n + "." + suffix
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
