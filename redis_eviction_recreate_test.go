package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/diag"
	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestEvictionRecreate is issue 22's third item: TestEvictionPolicies'
// run with re-creation on, as httplimit, grpclimit and any careful
// service do it (a call that finds the limiter not initialised calls
// TrySetRate and goes on). It prints the per-policy table of docs/differences.md:
//
//	go test -run TestEvictionRecreate -v .
//
// and asserts the safe rows (noeviction; volatile-lru without keep-alive).
// The other rows are measurements: a limiter whose config stays while its
// value and records are both evicted starts afresh (nothing in Redis tells
// it from a limiter never used), which is where their over-grant comes from.
func TestEvictionRecreate(t *testing.T) {
	redistest.SkipIfShort(t, "the eviction measurement")
	const rate, interval = 50, time.Second
	rows := []struct {
		policy    string
		keepAlive time.Duration
		safe      bool
	}{
		{"noeviction", 0, true},
		{"volatile-lru", 0, true},
		{"volatile-lru", 2 * time.Second, false},
		{"volatile-ttl", 2 * time.Second, false},
		{"allkeys-lru", 0, false},
		{"allkeys-lfu", 0, false},
		{"allkeys-random", 0, false},
	}
	var report []string
	for _, r := range rows {
		res := recreateRun(t, r.policy, r.keepAlive, rate, interval)
		line := fmt.Sprintf("| `%s` | %v | %d | %.2fx | %d | %d | %d |", r.policy, r.keepAlive, res.grants,
			float64(res.worst)/rate, res.evicted, res.recreated, res.errs)
		report = append(report, line)
		if r.safe {
			require.LessOrEqual(t, res.worst, rate, line)
		}
	}
	t.Logf("EVICTION WITH RE-CREATION, rate %d per %v, 3 s of over-demand:\n"+
		"| policy | keep-alive | grants | worst window / rate | keys evicted | re-creations | failed calls |\n"+
		"|---|---|---|---|---|---|---|\n%s", rate, interval, strings.Join(report, "\n"))
}

type recreateResult struct {
	worst, grants, errs, recreated int
	evicted                        int64
}

// recreateRun is evictionRun with re-creation: 8 goroutines take permits
// for 3 s while a filler pushes a 2 MB server to evict; a call that fails
// with ErrNotInitialized re-creates the limiter.
func recreateRun(t *testing.T, policy string, keepAlive time.Duration, rate int, interval time.Duration) recreateResult {
	redistest.Need(t)
	ctx := context.Background()
	srv, err := redisproc.StartWrapped(ctx, nil, "--maxmemory", "2mb", "--maxmemory-policy", policy, "--maxmemory-samples", "3")
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	cfg := ratelimiter.Config{Rate: int64(rate), Interval: interval, KeepAlive: keepAlive}
	l := ratelimiter.NewClient(rdb).Limiter("evict")
	_, err = l.TrySetRate(ctx, cfg)
	require.NoError(t, err)

	var res recreateResult
	var recreated atomic.Int64
	end := time.Now().Add(3 * time.Second)
	fillerDone := make(chan struct{})
	go func() {
		defer close(fillerDone)
		filler := strings.Repeat("x", 4096)
		for i := 0; time.Now().Before(end); i++ {
			_ = rdb.Set(ctx, fmt.Sprintf("filler:%d", i), filler, time.Hour).Err()
		}
	}()
	times, errs := grantTimes(8, end, func(int) (bool, error) {
		ok, err := l.TryAcquire(ctx, 1)
		if errors.Is(err, ratelimiter.ErrNotInitialized) {
			if _, err := l.TrySetRate(ctx, cfg); err == nil {
				recreated.Add(1)
			}
		}
		return ok, err
	})
	<-fillerDone
	worst, _ := redistest.WorstWindow(times, (interval - edgeSlack).Milliseconds())
	info := rdb.Info(ctx, "stats").Val()
	if i := strings.Index(info, "evicted_keys:"); i >= 0 {
		fmt.Sscan(info[i+len("evicted_keys:"):], &res.evicted)
	}
	res.worst, res.grants, res.errs, res.recreated = worst, len(times), errs, int(recreated.Load())
	return res
}

// TestEvictionReadsPolicy: Client.Eviction reads maxmemory-policy,
// maxmemory and evicted_keys, and Evicts says which limiters' keys the
// policy can evict.
func TestEvictionReadsPolicy(t *testing.T) {
	redistest.Need(t)
	ctx := context.Background()
	srv, err := redisproc.StartWrapped(ctx, nil, "--maxmemory", "10mb", "--maxmemory-policy", "volatile-lru")
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	e, err := diag.ReadEviction(ctx, rdb)
	require.NoError(t, err)
	require.Equal(t, diag.Eviction{Policy: "volatile-lru", MaxMemory: 10 << 20}, e)
	require.False(t, e.Evicts(false), "keys without a TTL")
	require.True(t, e.Evicts(true), "keys with a TTL")
	e, err = diag.ReadEviction(ctx, newRedis(t))
	require.NoError(t, err)
	require.False(t, e.Evicts(true), "no maxmemory: %+v", e)
}

// TestEvictingServerStartsFull: on a server whose policy may evict limiter
// keys, a limiter with a config and no state (its value and records
// evicted, or never used) starts with its window full, for a Limiter and
// a composite alike, and TrySetRate sets a limiter up the same way; one
// interval later the whole rate is there.
func TestEvictingServerStartsFull(t *testing.T) {
	redistest.Need(t)
	ctx := context.Background()
	srv, err := redisproc.StartWrapped(ctx, nil, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	for _, how := range []string{"config only", "TrySetRate", "composite"} {
		clock := newFakeClock()
		c := ratelimiter.NewClient(rdb, clock.option())
		l := c.Limiter(uniqueName(t) + how)
		take := l.Allow
		if how == "TrySetRate" {
			ok, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Second})
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			require.NoError(t, rdb.HSet(ctx, l.Keys().Config, "rate", 5, "interval", 1000, "type", 0).Err())
		}
		if how == "composite" {
			take = c.All(l.Name()).Allow
		}
		res, err := take(ctx, 1)
		require.NoError(t, err)
		require.False(t, res.Granted, how)
		require.Equal(t, time.Second+3*time.Millisecond, res.RetryAfter, how)
		require.Equal(t, int64(5), recordPermits(t, rdb, l.Keys().Permits), how)
		clock.Advance(time.Second + 3*time.Millisecond)
		res, err = take(ctx, 5)
		require.NoError(t, err)
		require.True(t, res.Granted, how)
	}
}
