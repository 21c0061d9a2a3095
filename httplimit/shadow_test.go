package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// decisions collects what a decision hook and a ratelimiter.Hooks see.
type decisions struct {
	mu   sync.Mutex
	http []httplimit.Decision
	lib  []ratelimiter.Decision
}

func (d *decisions) onHTTP(r *http.Request, x httplimit.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.http = append(d.http, x)
}

func (d *decisions) onLib(x ratelimiter.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lib = append(d.lib, x)
}

// Shadow mode: with a rate of 3, all 5 requests are served and none gets
// Retry-After, but the decision hook, the library's Decision hook, the
// RateLimit fields and Redis all show 3 grants and 2 refusals.
func TestShadowServesAndReports(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	seen := &decisions{}
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 3, Interval: time.Minute},
		httplimit.WithPrefix(p), httplimit.WithShadow(), httplimit.WithWait(time.Hour),
		httplimit.WithDecisionHook(seen.onHTTP),
		httplimit.WithClientOptions(ratelimiter.WithHooks(ratelimiter.Hooks{Decision: seen.onLib})))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	for i, want := range []string{"r=2", "r=1", "r=0", "r=0", "r=0"} {
		resp := get(t, srv.URL)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
		assert.Empty(t, resp.Header.Get("Retry-After"), "request %d", i)
		assert.Contains(t, resp.Header.Get("RateLimit"), want, "request %d", i)
	}
	assert.Equal(t, int64(5), h.n.Load(), "every request reached the handler")

	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Len(t, seen.http, 5)
	require.Len(t, seen.lib, 5, "one acquisition per request: WithWait is not applied")
	for i := range 5 {
		granted := i < 3
		assert.Equal(t, granted, seen.http[i].Granted, "request %d", i)
		assert.True(t, seen.http[i].Shadow)
		assert.Equal(t, granted, seen.lib[i].Granted, "request %d", i)
		assert.Equal(t, ratelimiter.OpAllow, seen.lib[i].Op)
		if !granted {
			assert.Greater(t, seen.http[i].RetryAfter, 58*time.Second)
		}
	}
	n, err := rdb.ZCard(context.Background(), wire.KeysFor(p+"ip:127.0.0.1", "").Permits).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "only the grants hold permits")
}

// Shadow mode never fails closed: with Redis gone every request is served
// and the error goes to the hook; a request without a key is served too.
func TestShadowRedisDownAndNoKey(t *testing.T) {
	port := deadPort(t)
	rdb := redis.NewClient(&redis.Options{Addr: port, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	var hooked []error
	var mu sync.Mutex
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute},
		httplimit.WithShadow(), httplimit.WithFailClosed(), httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	assert.Equal(t, 200, get(t, srv.URL, "X-Key", "a").StatusCode)
	assert.Equal(t, 200, get(t, srv.URL).StatusCode)
	assert.Equal(t, int64(2), h.n.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, hooked, 2)
	assert.NotErrorIs(t, hooked[0], httplimit.ErrNoKey)
	assert.ErrorIs(t, hooked[1], httplimit.ErrNoKey)
}

// The decision hook sees grants and refusals of an enforcing Middleware,
// and the RateLimit fields come from the acquisition's reply: after a
// grant that waited, whose reply has no counts, only RateLimit-Policy.
func TestDecisionHookAndWaitedGrantHeaders(t *testing.T) {
	rdb := newRedis(t)
	seen := &decisions{}
	lim, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: 300 * time.Millisecond},
		httplimit.WithPrefix(prefix(t)), httplimit.WithWait(10*time.Second), httplimit.WithDecisionHook(seen.onHTTP))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	first := get(t, srv.URL)
	require.Equal(t, 200, first.StatusCode)
	assert.Equal(t, `"default";r=0;t=1`, first.Header.Get("RateLimit"))
	second := get(t, srv.URL) // waits for the first record to expire
	require.Equal(t, 200, second.StatusCode)
	assert.Equal(t, `"default";q=1`, second.Header.Get("RateLimit-Policy"), "no w: 300 ms is not whole seconds")
	assert.Empty(t, second.Header.Get("RateLimit"))
	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Len(t, seen.http, 2)
	assert.True(t, seen.http[0].Granted && seen.http[1].Granted)
	assert.False(t, seen.http[1].Shadow)
	assert.Positive(t, seen.http[1].Waited)
}

// deadPort returns a loopback address where nothing listens.
func deadPort(t *testing.T) string {
	t.Helper()
	port, err := redistest.FreePort()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}
