package httplimit_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// With ratelimiter.WithOutageFallback, a fail-closed middleware whose
// redis-server is stopped keeps answering 200 and 429 at the fallback's
// share (Replicas 2: 5 of 10 per minute), never 503, with the Decisions
// marked Degraded; once the server is started again and the outage has
// ended (within 2 s: probes every 100 ms), Redis decides again.
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
	var decisions []httplimit.Decision
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 10, Interval: time.Minute},
		httplimit.WithFailClosed(), httplimit.WithPrefix(redistest.Name(t)+":"),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithClientOptions(ratelimiter.WithOutageFallback(ratelimiter.OutageFallback{Replicas: 2, Probe: 100 * time.Millisecond})),
		httplimit.WithDecisionHook(func(r *http.Request, d httplimit.Decision) {
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		}))
	require.NoError(t, err)
	defer lim.Client().Close(ctx)
	web := serve(t, lim.Handler(&counting{}))
	last := func() httplimit.Decision {
		mu.Lock()
		defer mu.Unlock()
		return decisions[len(decisions)-1]
	}

	for i := 0; i < 2; i++ { // by Redis: the Client learns the rate
		require.Equal(t, 200, get(t, web.URL, "X-Key", "a").StatusCode)
		require.False(t, last().Degraded)
	}
	require.NoError(t, srv.Stop())
	codes := map[int]int{}
	for i := 0; i < 8; i++ {
		resp := get(t, web.URL, "X-Key", "a")
		codes[resp.StatusCode]++
		require.True(t, last().Degraded, "request %d in the outage", i)
		if resp.StatusCode == 429 {
			require.NotEmpty(t, resp.Header.Get("Retry-After"))
			require.Contains(t, resp.Header.Get("RateLimit-Policy"), "q=5", "the local limit")
		}
	}
	require.Equal(t, map[int]int{200: 5, 429: 3}, codes, "the local window: 5 of 10 per minute, never 503")
	require.True(t, lim.Client().InOutage())
	// A key the Client never saw has no known rate: the failure mode.
	require.Equal(t, 503, get(t, web.URL, "X-Key", "new").StatusCode)

	require.NoError(t, srv.Resume(ctx))
	require.Eventually(t, func() bool { return !lim.Client().InOutage() }, 2*time.Second, 10*time.Millisecond)
	resp := get(t, web.URL, "X-Key", "a")
	require.NotEqual(t, 503, resp.StatusCode)
	require.False(t, last().Degraded, "Redis decides again")
}
