package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter/internal/compat"
)

// javaFleet is a JVM that runs several RedissonClients (the peer jar's
// peer.Fleet, internal/compat/peer): the fleet section's Redisson side,
// driven through the compatibility suite's peer (compat.Peer).
type javaFleet struct{ p *compat.Peer }

// startJavaFleet starts peer.Fleet on addr. It returns nil and the reason
// when it cannot run here; the peer jar is brought up to date first
// (build-peer.sh, which skips a current build), as the bench's other
// Redisson runs do.
func startJavaFleet(ctx context.Context, addr string) (*javaFleet, string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, "java is not on PATH", nil
	}
	jar := filepath.Join(compat.BuildDir(redissonVersion), "peer.jar")
	if _, err := os.Stat(jar); err != nil {
		return nil, "the peer jar " + jar + " is not built (make peer builds it)", nil
	}
	p, err := compat.StartPeer(ctx, compat.PeerOptions{Version: redissonVersion, Addr: addr, Main: "peer.Fleet"})
	if err != nil {
		return nil, "", fmt.Errorf("the Java fleet did not start: %w", err)
	}
	return &javaFleet{p: p}, "", nil
}

// do sends one command and returns what follows "OK"; a command with no
// answer within timeout leaves the JVM unusable, and it is killed.
func (f *javaFleet) do(ctx context.Context, timeout time.Duration, args ...any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ans, err := f.p.Do(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("java fleet: %w", err)
	}
	return ans, nil
}

// fleet makes (once) the fleet of n RedissonClients, pool connections each.
func (f *javaFleet) fleet(ctx context.Context, n, pool int) error {
	_, err := f.do(ctx, time.Duration(n+1)*10*time.Second, "fleet", n, pool)
	return err
}

// trySetRate sets an OVERALL rate on the limiter called key.
func (f *javaFleet) trySetRate(ctx context.Context, key string, rate int64, interval time.Duration) error {
	_, err := f.do(ctx, 30*time.Second, "trySetRate", key, rate, interval.Milliseconds())
	return err
}

// load has threads threads over fleet n's clients call tryAcquire(1) on
// key for d; it returns the decisions, the grants and the most grants
// stamped in any window of w.
func (f *javaFleet) load(ctx context.Context, n int, key string, threads int, d, w time.Duration) (decisions, grants, most int64, err error) {
	ans, err := f.do(ctx, d+30*time.Second, "load", n, key, threads, max(d.Milliseconds(), 1), max(w.Milliseconds(), 1))
	if err != nil {
		return 0, 0, 0, err
	}
	fs := strings.Fields(ans)
	if len(fs) != 3 {
		return 0, 0, 0, fmt.Errorf("java fleet load: malformed answer %q", ans)
	}
	var v [3]int64
	for i, s := range fs {
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("java fleet load: %q: %w", ans, err)
		}
	}
	return v[0], v[1], v[2], nil
}

// Close asks the JVM to quit (it shuts its clients down) and waits for it;
// one that has not exited in 10 seconds is killed.
func (f *javaFleet) Close() error { return f.p.Close() }
