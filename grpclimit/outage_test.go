package grpclimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/grpclimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// With ratelimiter.WithOutageFallback, a fail-closed interceptor whose
// redis-server is stopped keeps answering OK and RESOURCE_EXHAUSTED at
// the fallback's share (Replicas 2: 5 of 10 per minute), never
// UNAVAILABLE, with the Decisions marked Degraded; once the server is
// started again and the outage has ended (within 2 s: probes every
// 100 ms), Redis decides again.
func TestOutageFallbackDecidesLocally(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time outage run")
	redistest.Need(t)
	ctx := context.Background()
	srv, err := redistest.StartWrapped(ctx, nil, "--appendonly", "yes")
	require.NoError(t, err)
	defer srv.Close()
	// No go-redis retries: a stale connection or a refused dial fails the
	// call at once, which begins the outage.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer rdb.Close()
	var mu sync.Mutex
	var decisions []grpclimit.Decision
	l, err := grpclimit.New(rdb, ratelimiter.Config{Rate: 10, Interval: time.Minute},
		grpclimit.WithFailClosed(), grpclimit.WithPrefix(prefix(t)),
		grpclimit.WithClientOptions(ratelimiter.WithOutageFallback(ratelimiter.OutageFallback{Replicas: 2, Probe: 100 * time.Millisecond})),
		grpclimit.WithDecisionHook(func(_ context.Context, d grpclimit.Decision) {
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		}))
	require.NoError(t, err)
	defer l.Client().Close(ctx)
	c := startServer(t, &health{}, interceptors(l)...)
	call := func() (codes.Code, grpclimit.Decision) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Check(cctx, &healthpb.HealthCheckRequest{})
		mu.Lock()
		defer mu.Unlock()
		return status.Code(err), decisions[len(decisions)-1]
	}

	for i := 0; i < 2; i++ { // by Redis: the Client learns the rate
		code, d := call()
		require.Equal(t, codes.OK, code)
		require.False(t, d.Degraded)
	}
	require.NoError(t, srv.Stop())
	got := map[codes.Code]int{}
	for i := 0; i < 8; i++ {
		code, d := call()
		got[code]++
		require.True(t, d.Degraded, "call %d in the outage", i)
	}
	require.Equal(t, map[codes.Code]int{codes.OK: 5, codes.ResourceExhausted: 3}, got, "the local window: 5 of 10 per minute, never UNAVAILABLE")
	require.True(t, l.Client().InOutage())

	require.NoError(t, srv.Resume(ctx))
	require.Eventually(t, func() bool { return !l.Client().InOutage() }, 2*time.Second, 10*time.Millisecond)
	code, d := call()
	require.NotEqual(t, codes.Unavailable, code)
	require.False(t, d.Degraded, "Redis decides again")
}
