package compat

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestScriptInstructions compares the Redis work of one tryAcquire by
// Redisson 4.7.0 and by this library without the noise that makes time
// measurements on a shared machine swing by half: redis-server runs under
// valgrind's callgrind, and the instructions it executes while one side
// makes its calls are counted (instrumentation is switched on only around
// them). The count covers everything Redis does for the call, its network
// handling included, so a one-command script is counted too for scale.
// Each side uses its own limiter in the same state, and Redisson runs its
// own script through the real Java client. The counts are repeatable to a
// fraction of a percent, so the test asserts that ours is not larger.
//
// Run: go test ./internal/compat -run TestScriptInstructions -v
func TestScriptInstructions(t *testing.T) {
	needJava(t)
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			if redistest.Required() {
				t.Fatalf("%s not found (make deps installs valgrind)", tool)
			}
			t.Skipf("%s not found", tool)
		}
	}
	const (
		fill = 2000 // records in the window before counting
		n    = 1000 // calls counted per side
	)
	ctx := ctxT(t, 10*time.Minute)
	out := t.TempDir()
	srv, err := redistest.StartWrapped(ctx, []string{"valgrind", "--tool=callgrind", "--instr-atstart=no",
		"--callgrind-out-file=" + filepath.Join(out, "cg.out")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = c.Close() })
	peer, err := StartPeer(ctx, PeerOptions{Version: "4.7.0", Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	g := ratelimiter.NewClient(c)

	dumps := 0
	count := func(run func()) float64 {
		pid := strconv.Itoa(srv.Pid())
		for _, arg := range []string{"-i on", "-z"} { // instrument, then zero what went before
			if b, err := exec.Command("callgrind_control", append(strings.Fields(arg), pid)...).CombinedOutput(); err != nil {
				t.Fatalf("callgrind_control %s: %v: %s", arg, err, b)
			}
		}
		run()
		if b, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -d: %v: %s", err, b)
		}
		if b, err := exec.Command("callgrind_control", "-i", "off", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -i off: %v: %s", err, b)
		}
		dumps++
		return float64(summary(t, filepath.Join(out, fmt.Sprintf("cg.out.%d", dumps)))) / n
	}

	baseline := redis.NewScript(`return redis.call('EXISTS', KEYS[1])`)
	for _, path := range []struct {
		name    string
		cfg     ratelimiter.Config
		granted bool
	}{
		// An hour-long window: nothing leaves it while counting.
		{"granted", ratelimiter.Config{Rate: 1_000_000, Interval: time.Hour}, true},
		{"refused", ratelimiter.Config{Rate: 10, Interval: time.Hour}, false},
	} {
		calls := map[string]func(k int){}
		for _, who := range []string{"redisson", "go"} {
			name := limName(t, path.name+"."+who)
			rl := g.Limiter(name)
			if _, err := rl.TrySetRate(ctx, path.cfg); err != nil {
				t.Fatal(err)
			}
			if who == "redisson" {
				calls[who] = func(k int) {
					if _, err := peer.Do(ctx, "bench", name, k); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				calls[who] = func(k int) {
					for i := 0; i < k; i++ {
						if _, err := rl.TryAcquire(ctx, 1); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			calls[who](min(fill, int(path.cfg.Rate))) // fill the window, warm the script cache
		}
		base := count(func() {
			for i := 0; i < n; i++ {
				if err := baseline.Run(ctx, c, []string{"x"}).Err(); err != nil {
					t.Fatal(err)
				}
			}
		})
		java := count(func() { calls["redisson"](n) })
		ours := count(func() { calls["go"](n) })
		for _, who := range []string{"redisson", "go"} {
			l := g.Limiter(limName(t, path.name+"."+who))
			left, err := l.AvailablePermits(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := path.cfg.Rate - int64(min(fill, int(path.cfg.Rate)))
			if path.granted {
				want -= n
			}
			if left != want {
				t.Fatalf("%s %s: %d permits left, want %d (the calls did not take the path measured)", who, path.name, left, want)
			}
		}
		t.Logf("REDIS INSTRUCTIONS per tryAcquire, %s path (window of %d records): Redisson 4.7.0 %.0f, Go %.0f, Go/Redisson %.3f; one-command script %.0f (Redisson %.2fx, Go %.2fx)",
			path.name, min(fill, int(path.cfg.Rate)), java, ours, ours/java, base, java/base, ours/base)
		if ours > java {
			t.Errorf("%s path: our script costs Redis %.0f instructions per call, Redisson's %.0f", path.name, ours, java)
		}
	}
}

// summary reads the total instruction count of a callgrind dump.
func summary(t *testing.T, file string) int64 {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no summary line in %s", file)
	return 0
}
