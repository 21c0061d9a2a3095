package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

var (
	minuteRule = httplimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 5, Interval: time.Minute}}
	hourRule   = httplimit.Rule{Name: "hour", Config: ratelimiter.Config{Rate: 3, Interval: time.Hour}}
)

// available returns the permits left in the limiter called name.
func available(t testing.TB, lim *httplimit.Middleware, name string) int64 {
	t.Helper()
	n, err := lim.Client().Limiter(name).AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// Every rule's limiter is configured on first use with its own Config
// (an existing one keeps its own); each request takes from all or none;
// the headers, Retry-After and the Decision name the rule that binds,
// whichever it is.
func TestRulesAllOrNothing(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	seen := &decisions{}
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(p),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")), httplimit.WithRules(minuteRule, hourRule),
		httplimit.WithDecisionHook(seen.onHTTP))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))

	// Key a: the hourly rule (3) binds before the per-minute one (5).
	a := lim.Names("X-Key:a")
	require.Equal(t, []string{p + "{X-Key:a}:minute", p + "{X-Key:a}:hour"}, a)
	for i, want := range []string{"2", "1", "0"} {
		resp := get(t, srv.URL, "X-Key", "a")
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
		assert.Equal(t, `"hour";q=3;w=3600, "minute";q=5;w=60`, resp.Header.Get("RateLimit-Policy"), "request %d: the binding rule first, then every other", i)
		assert.Regexp(t, `^"hour";r=`+want+`;t=(3599|3600)$`, resp.Header.Get("RateLimit"), "request %d", i)
	}
	resp := get(t, srv.URL, "X-Key", "a")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, ra > 3500 && ra <= 3601, "Retry-After %d: the hourly rule's wait", ra)
	assert.Equal(t, `"hour";q=3;w=3600, "minute";q=5;w=60`, resp.Header.Get("RateLimit-Policy"))
	assert.Equal(t, fmt.Sprintf(`"hour";r=0;t=%d`, ra), resp.Header.Get("RateLimit"))
	assert.Equal(t, int64(2), available(t, lim, a[0]), "the refusal took nothing from the per-minute rule")
	assert.Equal(t, int64(0), available(t, lim, a[1]))
	for i, rule := range []httplimit.Rule{minuteRule, hourRule} {
		cfg, err := lim.Client().Limiter(a[i]).Config(context.Background())
		require.NoError(t, err)
		assert.Equal(t, rule.Config, cfg, "configured on first use: %s", a[i])
	}

	// Key b: its per-minute limiter exists with a rate of 1 (an operator's
	// or a Java service's): that configuration wins, and it binds.
	b := lim.Names("X-Key:b")
	_, err = lim.Client().Limiter(b[0]).TrySetRate(context.Background(), ratelimiter.Config{Rate: 1, Interval: time.Minute})
	require.NoError(t, err)
	resp = get(t, srv.URL, "X-Key", "b")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `"minute";q=1;w=60, "hour";q=3;w=3600`, resp.Header.Get("RateLimit-Policy"), "the binding rule as Redis holds it, the other as configured")
	resp = get(t, srv.URL, "X-Key", "b")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	ra, err = strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, ra > 55 && ra <= 61, "Retry-After %d: the per-minute rule's wait", ra)
	assert.Equal(t, `"minute";q=1;w=60, "hour";q=3;w=3600`, resp.Header.Get("RateLimit-Policy"), "the binding rule as Redis holds it, the other as configured")
	assert.Equal(t, int64(2), available(t, lim, b[1]), "the refusal took nothing from the hourly rule")
	assert.Equal(t, int64(4), h.n.Load())

	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Len(t, seen.http, 6)
	last := seen.http[3]
	assert.Equal(t, httplimit.Decision{Key: "X-Key:a", Name: a[1], Rule: "hour", RetryAfter: last.RetryAfter, Waited: last.Waited}, last)
	assert.Greater(t, last.RetryAfter, 59*time.Minute)
	assert.Equal(t, "minute", seen.http[5].Rule)
	assert.Equal(t, b[0], seen.http[5].Name)
}

// Many requests of one key at once, its hourly budget partly taken by a
// single-limiter caller: exactly the hourly permits left are granted, and
// the per-minute rule lost nothing to the refused requests.
func TestRulesConcurrent(t *testing.T) {
	rdb := newRedis(t)
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(prefix(t)),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithRules(
			httplimit.Rule{Name: "minute", Config: ratelimiter.Config{Rate: 20, Interval: time.Minute}},
			httplimit.Rule{Name: "hour", Config: ratelimiter.Config{Rate: 12, Interval: time.Hour}}))
	require.NoError(t, err)
	names := lim.Names("X-Key:k")
	hour := lim.Client().Limiter(names[1])
	_, err = hour.TrySetRate(context.Background(), ratelimiter.Config{Rate: 12, Interval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, hour.Acquire(context.Background(), 7))
	h := &counting{}
	srv := serve(t, lim.Handler(h))

	var wg sync.WaitGroup
	codes := make([]int, 40)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = get(t, srv.URL, "X-Key", "k").StatusCode
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	assert.Equal(t, map[int]int{200: 5, 429: 35}, count)
	assert.Equal(t, int64(5), h.n.Load())
	assert.Equal(t, int64(15), available(t, lim, names[0]), "20 - the 5 granted")
	assert.Equal(t, int64(0), available(t, lim, names[1]))
}

// A key that is not a safe name (braces, too long) is hashed inside the
// one hash tag; distinct such keys get distinct limiters.
func TestRulesUnsafeKeys(t *testing.T) {
	rdb := newRedis(t)
	p := prefix(t)
	seen := &decisions{}
	lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithPrefix(p),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")), httplimit.WithRules(minuteRule, hourRule),
		httplimit.WithDecisionHook(seen.onHTTP))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	for _, key := range []string{"a{b}", "a{c}", "}{", strings.Repeat("k", 200)} {
		names := lim.Names("X-Key:" + key)
		for i, suffix := range []string{":minute", ":hour"} {
			require.True(t, strings.HasPrefix(names[i], p+"{sha256:"), names[i])
			require.True(t, strings.HasSuffix(names[i], "}"+suffix), names[i])
			require.Equal(t, 1, strings.Count(names[i], "{")+strings.Count(names[i], "}")-1, names[i])
		}
		resp := get(t, srv.URL, "X-Key", key)
		require.Equal(t, http.StatusOK, resp.StatusCode, key)
		assert.Equal(t, int64(2), available(t, lim, names[1]), key)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	assert.NotEqual(t, seen.http[0].Name, seen.http[1].Name)
}

// Bad rules are refused by New with a typed error, before Redis.
func TestNewRejectsBadRules(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	defer rdb.Close()
	tooMany := make([]httplimit.Rule, ratelimiter.MaxParts+1)
	for i := range tooMany {
		tooMany[i] = httplimit.Rule{Name: fmt.Sprint("r", i), Config: minuteRule.Config}
	}
	cases := map[string]struct {
		cfg  ratelimiter.Config
		opts []httplimit.Option
	}{
		"none":           {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules()}},
		"too many":       {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(tooMany...)}},
		"twice":          {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(minuteRule, httplimit.Rule{Name: "minute", Config: hourRule.Config})}},
		"bad name":       {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(httplimit.Rule{Name: "a:b", Config: hourRule.Config})}},
		"invalid config": {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(minuteRule, httplimit.Rule{Name: "x", Config: ratelimiter.Config{Rate: 1}})}},
		"permits > rate": {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(minuteRule, hourRule), httplimit.WithPermits(4)}},
		"New's config":   {minuteRule.Config, []httplimit.Option{httplimit.WithRules(hourRule)}},
		"policy name":    {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(hourRule), httplimit.WithPolicyName("p")}},
		"rules twice":    {ratelimiter.Config{}, []httplimit.Option{httplimit.WithRules(hourRule), httplimit.WithRules(minuteRule)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			lim, err := httplimit.New(rdb, c.cfg, c.opts...)
			assert.Nil(t, lim)
			assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
			assert.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
		})
	}
}

// With rules, WithWait waits for every rule at once, shadow mode serves
// what the rules refuse, and Redis failures fail open or closed.
func TestRulesWaitShadowFailure(t *testing.T) {
	fast := httplimit.Rule{Name: "fast", Config: ratelimiter.Config{Rate: 1, Interval: 200 * time.Millisecond}}
	t.Run("wait", func(t *testing.T) {
		seen := &decisions{}
		lim, err := httplimit.New(newRedis(t), ratelimiter.Config{}, httplimit.WithPrefix(prefix(t)),
			httplimit.WithRules(hourRule, fast), httplimit.WithWait(10*time.Second), httplimit.WithDecisionHook(seen.onHTTP))
		require.NoError(t, err)
		srv := serve(t, lim.Handler(&counting{}))
		for i := 0; i < 2; i++ {
			require.Equal(t, http.StatusOK, get(t, srv.URL).StatusCode)
		}
		seen.mu.Lock()
		defer seen.mu.Unlock()
		d := seen.http[1]
		assert.True(t, d.Granted)
		assert.Equal(t, "fast", d.Rule, "the rule it waited for")
		assert.Positive(t, d.Waited)
		assert.Equal(t, int64(1), available(t, lim, lim.Names(d.Key)[0]), "3 - the 2 granted")
	})
	t.Run("shadow", func(t *testing.T) {
		seen := &decisions{}
		lim, err := httplimit.New(newRedis(t), ratelimiter.Config{}, httplimit.WithPrefix(prefix(t)),
			httplimit.WithRules(fast, hourRule), httplimit.WithShadow(), httplimit.WithDecisionHook(seen.onHTTP))
		require.NoError(t, err)
		h := &counting{}
		srv := serve(t, lim.Handler(h))
		for i := 0; i < 3; i++ {
			resp := get(t, srv.URL)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Empty(t, resp.Header.Get("Retry-After"))
		}
		assert.Equal(t, int64(3), h.n.Load())
		seen.mu.Lock()
		defer seen.mu.Unlock()
		assert.False(t, seen.http[1].Granted)
		assert.True(t, seen.http[1].Shadow)
		assert.Equal(t, "fast", seen.http[1].Rule)
		assert.Equal(t, int64(2), available(t, lim, lim.Names(seen.http[1].Key)[1]), "refusals took nothing from the hourly rule")
	})
	for _, mode := range []httplimit.FailureMode{httplimit.FailOpen, httplimit.FailClosed} {
		t.Run(fmt.Sprintf("redis down/mode%d", mode), func(t *testing.T) {
			port, err := redistest.FreePort()
			require.NoError(t, err)
			rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1,
				DialTimeout: time.Second, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
			defer rdb.Close()
			var mu sync.Mutex
			var hooked []error
			lim, err := httplimit.New(rdb, ratelimiter.Config{}, httplimit.WithRules(fast, hourRule), httplimit.WithFailureMode(mode),
				httplimit.WithErrorHook(func(r *http.Request, err error) { mu.Lock(); hooked = append(hooked, err); mu.Unlock() }))
			require.NoError(t, err)
			want := map[httplimit.FailureMode]int{httplimit.FailOpen: 200, httplimit.FailClosed: 503}[mode]
			assert.Equal(t, want, get(t, serve(t, lim.Handler(&counting{})).URL).StatusCode)
			mu.Lock()
			defer mu.Unlock()
			assert.Len(t, hooked, 1)
		})
	}
}

// A Transport with a Composite takes every request's permit from every
// part at once, configuring each part with its Config on first use; a
// request the hourly part refuses fails with ErrLimited, unsent, and
// takes nothing from the per-minute part. Fields that do not fit
// together fail with ErrInvalidOption, unsent.
func TestTransportComposite(t *testing.T) {
	recv := &arrivals{}
	srv := serve(t, recv)
	c := ratelimiter.NewClient(newRedis(t))
	p := prefix(t)
	api := c.All(p+"{api}:minute", p+"{api}:hour")
	hc := &http.Client{Transport: &httplimit.Transport{Composite: api, MaxWait: 50 * time.Millisecond,
		Configs: []ratelimiter.Config{minuteRule.Config, hourRule.Config}}}
	for i := 0; i < 3; i++ {
		resp, err := hc.Get(srv.URL)
		require.NoError(t, err, "request %d", i)
		resp.Body.Close()
	}
	_, err := hc.Get(srv.URL)
	require.ErrorIs(t, err, httplimit.ErrLimited)
	assert.Contains(t, err.Error(), p+"{api}:minute+"+p+"{api}:hour")
	parts := api.Parts()
	for i, want := range []ratelimiter.Config{minuteRule.Config, hourRule.Config} {
		cfg, err := parts[i].Config(context.Background())
		require.NoError(t, err)
		assert.Equal(t, want, cfg)
	}
	n, err := parts[0].AvailablePermits(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the refused request took nothing from the per-minute part")

	lim := c.Limiter(p + "single")
	for name, tr := range map[string]*httplimit.Transport{
		"neither":            {},
		"both":               {Limiter: lim, Composite: api},
		"Config, Composite":  {Composite: api, Config: minuteRule.Config},
		"Configs, Limiter":   {Limiter: lim, Configs: []ratelimiter.Config{minuteRule.Config}},
		"Configs too few":    {Composite: api, Configs: []ratelimiter.Config{minuteRule.Config}},
		"Configs[1] invalid": {Composite: api, Configs: []ratelimiter.Config{minuteRule.Config, {Rate: 1}}},
	} {
		_, err := (&http.Client{Transport: tr}).Get(srv.URL)
		assert.ErrorIs(t, err, httplimit.ErrInvalidOption, name)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	assert.Len(t, recv.at, 3)
}
