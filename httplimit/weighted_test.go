package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
)

// tokens is a Rule.Cost: the tokens a request asks for (X-Tokens).
func tokens(r *http.Request) int64 {
	n, _ := strconv.ParseInt(r.Header.Get("X-Tokens"), 10, 64)
	return n
}

// TestRuleCost, end to end over a real HTTP server: an LLM-style budget
// of 3 requests and 1,000 tokens per minute. Each request takes 1 from
// the requests rule and its X-Tokens from the tokens rule, at once or
// not at all; the handler gives back the tokens it did not use
// (Middleware.Release); the headers name the binding rule with its own
// figures; a cost above the rule's rate is refused and reported.
func TestRuleCost(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	var mu sync.Mutex
	var hooked []error
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(p),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithRules(
			httplimit.Rule{Name: "requests", Config: ratelimiter.Config{Rate: 3, Interval: time.Minute}},
			httplimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 1000, Interval: time.Minute}, Cost: tokens}),
		httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
	require.NoError(t, err)
	var served, releaseErrs []string
	srv := serve(t, lim.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := httplimit.FromContext(r.Context())
		used, _ := strconv.ParseInt(r.Header.Get("X-Used"), 10, 64)
		mu.Lock()
		served = append(served, r.Header.Get("X-Tokens"))
		mu.Unlock()
		if ok && used < tokens(r) {
			if err := lim.Release(r.Context(), d.Key, 0, tokens(r)-used); err != nil {
				mu.Lock()
				releaseErrs = append(releaseErrs, err.Error())
				mu.Unlock()
			}
		}
		fmt.Fprint(w, "ok")
	})))
	names := lim.Names("X-Key:a")

	resp := get(t, srv.URL, "X-Key", "a", "X-Tokens", "750", "X-Used", "300")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	mu.Lock()
	require.Empty(t, hooked)
	mu.Unlock()
	assert.Regexp(t, `^"tokens";r=250;t=(59|60)$`, resp.Header.Get("RateLimit"), "the tokens rule binds with its own figures")
	assert.Equal(t, int64(2), available(t, lim, names[0]))
	assert.Equal(t, int64(700), available(t, lim, names[1]), "450 unused tokens given back")

	// 800 tokens do not fit: refused by the tokens rule, nothing taken.
	resp = get(t, srv.URL, "X-Key", "a", "X-Tokens", "800", "X-Used", "800")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf(`"tokens";r=0;t=%d`, ra), resp.Header.Get("RateLimit"), "the tokens rule refuses")
	assert.True(t, ra > 55 && ra <= 61, "Retry-After %d: the tokens' record expires within the minute", ra)
	assert.Equal(t, int64(2), available(t, lim, names[0]), "the refusal took no request")
	assert.Equal(t, int64(700), available(t, lim, names[1]))

	// No tokens: the tokens rule is not touched, the request is counted.
	resp = get(t, srv.URL, "X-Key", "a")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Regexp(t, `^"requests";r=1;t=(59|60)$`, resp.Header.Get("RateLimit"), "the requests rule binds now")
	assert.Equal(t, int64(1), available(t, lim, names[0]))
	assert.Equal(t, int64(700), available(t, lim, names[1]))

	// Above the tokens rule's rate: refused and reported.
	resp = get(t, srv.URL, "X-Key", "a", "X-Tokens", "1001")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	mu.Lock()
	require.Len(t, hooked, 1)
	require.ErrorIs(t, hooked[0], ratelimiter.ErrPermitsExceedRate)
	mu.Unlock()
	assert.Equal(t, int64(1), available(t, lim, names[0]))

	resp = get(t, srv.URL, "X-Key", "a", "X-Tokens", "700", "X-Used", "700")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = get(t, srv.URL, "X-Key", "a", "X-Tokens", "1")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "both budgets are spent")
	assert.Equal(t, int64(0), available(t, lim, names[0]))
	assert.Equal(t, int64(0), available(t, lim, names[1]))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"750", "", "700"}, served)
	assert.Empty(t, releaseErrs)

	_, err = httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPermits(5),
		httplimit.WithRules(httplimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 3, Interval: time.Minute}, Cost: tokens}))
	require.NoError(t, err, "WithPermits is not checked against a rule with its own cost")
	plain, err := httplimit.New(rdb, ratelimiter.Config{Rate: 1, Interval: time.Minute})
	require.NoError(t, err)
	require.ErrorIs(t, plain.Release(context.Background(), "k", 1), httplimit.ErrInvalidOption)
}

// TestRuleCostConcurrent: many requests of varied token costs at once
// never take more than either rule's rate, and each rule's limiter holds
// exactly what the granted requests took.
func TestRuleCostConcurrent(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(prefix(t)),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithRules(
			httplimit.Rule{Name: "requests", Config: ratelimiter.Config{Rate: 30, Interval: time.Hour}},
			httplimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 1000, Interval: time.Hour}, Cost: tokens}))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	var mu sync.Mutex
	var reqs, toks int64
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				n := int64(20 + 13*((g*10+i)%7))
				resp := get(t, srv.URL, "X-Key", "k", "X-Tokens", strconv.FormatInt(n, 10))
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					reqs, toks = reqs+1, toks+n
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	names := lim.Names("X-Key:k")
	require.LessOrEqual(t, reqs, int64(30))
	require.LessOrEqual(t, toks, int64(1000))
	require.Equal(t, 30-reqs, available(t, lim, names[0]))
	require.Equal(t, 1000-toks, available(t, lim, names[1]))
}

// With WithCost and a Rule.Cost, WithCost's cost is what the rules
// without Cost take (below 1: they are left alone); a request is free
// only when no rule takes anything.
func TestRuleCostWithCost(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(prefix(t)),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithCost(func(r *http.Request) int64 { n, _ := strconv.ParseInt(r.Header.Get("X-Units"), 10, 64); return n }),
		httplimit.WithRules(
			httplimit.Rule{Name: "units", Config: ratelimiter.Config{Rate: 10, Interval: time.Hour}},
			httplimit.Rule{Name: "tokens", Config: ratelimiter.Config{Rate: 100, Interval: time.Hour}, Cost: tokens}))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	names := lim.Names("X-Key:k")
	require.Equal(t, http.StatusOK, get(t, srv.URL, "X-Key", "k", "X-Units", "3", "X-Tokens", "40").StatusCode)
	require.Equal(t, int64(7), available(t, lim, names[0]))
	require.Equal(t, int64(60), available(t, lim, names[1]))
	require.Equal(t, http.StatusOK, get(t, srv.URL, "X-Key", "k", "X-Units", "0", "X-Tokens", "20").StatusCode)
	require.Equal(t, int64(7), available(t, lim, names[0]), "units left alone")
	require.Equal(t, int64(40), available(t, lim, names[1]))
	require.Equal(t, http.StatusOK, get(t, srv.URL, "X-Key", "k").StatusCode, "free: nothing taken")
	require.Equal(t, int64(7), available(t, lim, names[0]))
	require.Equal(t, int64(40), available(t, lim, names[1]))
	require.Equal(t, int64(3), h.n.Load())
}
