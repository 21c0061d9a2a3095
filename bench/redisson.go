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

// redissonVersion is the Redisson release the Java contender runs.
const redissonVersion = "4.7.0"

// redissonName is the Java contender's name in the tables.
const redissonName = "Redisson " + redissonVersion + " (Java)"

// javaPeer is Java Redisson's RRateLimiter in a JVM, driven through the
// compatibility suite's peer (internal/compat): one line command at a
// time, each run by Redisson's own client.
type javaPeer struct {
	p *compat.Peer
}

// startRedisson starts the peer on addr. It returns a nil peer and the
// reason when the peer cannot run here: Java missing or the peer jar not
// built (make peer builds it).
func startRedisson(ctx context.Context, addr string) (*javaPeer, string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, "java is not on PATH", nil
	}
	jar := filepath.Join(compat.BuildDir(redissonVersion), "peer.jar")
	if _, err := os.Stat(jar); err != nil {
		return nil, "the peer jar " + jar + " is not built (make peer builds it)", nil
	}
	p, err := compat.StartPeer(ctx, compat.PeerOptions{Version: redissonVersion, Addr: addr})
	if err != nil {
		return nil, "", err
	}
	return &javaPeer{p: p}, "", nil
}

// Close stops the JVM.
func (j *javaPeer) Close() error { return j.p.Close() }

// redisson is the Java contender: RRateLimiter.trySetRate(OVERALL, rate,
// interval) and tryAcquire(1), run by the peer's threads.
func redisson(j *javaPeer) contender {
	return contender{name: redissonName, open: func(ctx context.Context, key string, rate int64, interval time.Duration) (limiter, error) {
		if _, err := j.p.Do(ctx, "trySetRate", key, "OVERALL", rate, interval.Milliseconds()); err != nil {
			return nil, err
		}
		return javaLimiter{p: j.p, key: key}, nil
	}, blocking: func(ctx context.Context, key string, callers int, d time.Duration) (int64, error) {
		o, err := javaLimiter{p: j.p, key: key}.load(ctx, callers, d, "acquire", false)
		return o.grants, err
	}}
}

type javaLimiter struct {
	p   *compat.Peer
	key string
}

// run has the peer's threads call tryAcquire(1) for d. The peer reports
// grants with their times (milliseconds, read before each call), not its
// decisions: those are counted from Redis's script calls by the caller.
func (j javaLimiter) run(ctx context.Context, callers int, d time.Duration, stamps bool) (outcome, error) {
	return j.load(ctx, callers, d, "try", stamps)
}

// load has the peer's threads call tryAcquire(1) ("try") or acquire(1)
// ("acquire") for d; a thread blocked in acquire at d returns with its
// next grant.
func (j javaLimiter) load(ctx context.Context, callers int, d time.Duration, how string, stamps bool) (outcome, error) {
	ms := max(d.Milliseconds(), 1)
	ans, err := j.p.Do(ctx, "load", j.key, callers, ms, how, 1)
	if err != nil {
		return outcome{}, err
	}
	f := strings.Fields(ans)
	if len(f) == 0 {
		return outcome{}, fmt.Errorf("redisson load: empty answer")
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || int64(len(f)-1) != n {
		return outcome{}, fmt.Errorf("redisson load: malformed answer (%d fields, count %q)", len(f), f[0])
	}
	o := outcome{decisions: -1, grants: n}
	if stamps {
		o.stamps = make([]int64, 0, n)
		for _, s := range f[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return outcome{}, fmt.Errorf("redisson load: stamp %q: %w", s, err)
			}
			o.stamps = append(o.stamps, v*int64(time.Millisecond))
		}
	}
	return o, nil
}

// latency has the peer call tryAcquire(1) n times in a row; the peer
// reports only the total time, so only the mean is known.
func (j javaLimiter) latency(ctx context.Context, n int) (latencies, error) {
	ans, err := j.p.Do(ctx, "bench", j.key, n)
	if err != nil {
		return latencies{}, err
	}
	f := strings.Fields(ans)
	if len(f) != 3 {
		return latencies{}, fmt.Errorf("redisson bench: malformed answer %q", ans)
	}
	ns, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return latencies{}, fmt.Errorf("redisson bench: %q: %w", ans, err)
	}
	return latencies{mean: time.Duration(ns / int64(max(n, 1)))}, nil
}

// once calls tryAcquire(1).
func (j javaLimiter) once(ctx context.Context) (bool, error) {
	return j.p.Bool(ctx, "tryAcquire", j.key, 1)
}
