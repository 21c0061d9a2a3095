package ratelimiter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestEvictionPolicies measures what a limiter under steady over-demand
// grants in its worst window while filler keys push a redis-server with a
// small maxmemory to evict, under each policy (docs/differences.md, "Eviction"):
//
//	go test -run TestEvictionPolicies -v .
//
// It asserts what the policies guarantee: under noeviction, and under
// volatile-lru for a limiter without keep-alive (its keys have no TTL, so
// volatile-* never evicts them), no window holds more than the rate. The
// other rows are measurements.
func TestEvictionPolicies(t *testing.T) {
	redistest.SkipIfShort(t, "the eviction measurement")
	const rate, interval = 50, time.Second
	type row struct {
		policy    string
		keepAlive time.Duration
		safe      bool
	}
	rows := []row{
		{"noeviction", 0, true},
		{"volatile-lru", 0, true},
		{"volatile-lru", 2 * time.Second, false},
		{"allkeys-lru", 0, false},
		{"allkeys-random", 0, false},
	}
	var report []string
	for _, r := range rows {
		worst, grants, evicted, errs := evictionRun(t, r.policy, r.keepAlive, rate, interval)
		line := fmt.Sprintf("| %s | %v | %d | %.2fx | %d | %d |", r.policy, r.keepAlive, grants, float64(worst)/rate, evicted, errs)
		report = append(report, line)
		if r.safe {
			require.LessOrEqual(t, worst, int64(rate), line)
		}
	}
	t.Logf("EVICTION, rate %d per %v, 3 s of over-demand:\n| policy | keep-alive | grants | worst window / rate | keys evicted | failed calls |\n|---|---|---|---|---|---|\n%s",
		rate, interval, strings.Join(report, "\n"))
}

// edgeSlack is how much shorter than the interval the windows are that the
// eviction and skew measurements report (docs/differences.md, "Racing calls and the
// window edge"): grant times are read when calls return.
const edgeSlack = 100 * time.Millisecond

// evictionRun runs 8 goroutines taking permits for 3 s while a filler
// writes 4 KB values (with a TTL, so volatile policies can evict them) into
// a 2 MB server. It returns the most grants in any window of the interval
// less edgeSlack, the grants, the keys evicted and the calls that failed.
func evictionRun(t *testing.T, policy string, keepAlive time.Duration, rate int64, interval time.Duration) (int64, int, int64, int) {
	redistest.Need(t)
	ctx := context.Background()
	srv, err := redisproc.StartWrapped(ctx, nil, "--maxmemory", "2mb", "--maxmemory-policy", policy, "--maxmemory-samples", "3")
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	l := ratelimiter.NewClient(rdb).Limiter("evict")
	_, err = l.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval, KeepAlive: keepAlive})
	require.NoError(t, err)

	end := time.Now().Add(3 * time.Second)
	fillerDone := make(chan struct{})
	go func() {
		defer close(fillerDone)
		filler := strings.Repeat("x", 4096)
		for i := 0; time.Now().Before(end); i++ {
			_ = rdb.Set(ctx, fmt.Sprintf("filler:%d", i), filler, time.Hour).Err()
		}
	}()
	times, errs := grantTimes(8, end, func(int) (bool, error) { return l.TryAcquire(ctx, 1) })
	<-fillerDone
	worst, _ := redistest.WorstWindow(times, (interval - edgeSlack).Milliseconds())
	var evicted int64
	info := rdb.Info(ctx, "stats").Val()
	if i := strings.Index(info, "evicted_keys:"); i >= 0 {
		fmt.Sscan(info[i+len("evicted_keys:"):], &evicted)
	}
	return int64(worst), len(times), evicted, errs
}
