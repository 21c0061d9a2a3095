package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
)

// request returns a request from remote with the X-Forwarded-For values
// given.
func request(remote string, forwarded ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for _, f := range forwarded {
		r.Header.Add("X-Forwarded-For", f)
	}
	return r
}

// Every address of one IPv6 /64 (or IPv4 /24, as asked) shares a key;
// the next network does not; mapped IPv4 is IPv4.
func TestKeyByIPPrefix(t *testing.T) {
	key := httplimit.KeyByIPPrefix(24, 64)
	for remote, want := range map[string]string{
		"[2001:db8:1:2::1]:5000":      "net:2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:5000": "net:2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:5000":      "net:2001:db8:1:3::/64",
		"192.0.2.7:80":                "net:192.0.2.0/24",
		"192.0.2.200:80":              "net:192.0.2.0/24",
		"[::ffff:192.0.2.9]:80":       "net:192.0.2.0/24",
		"198.51.100.1:80":             "net:198.51.100.0/24",
		"[fe80::1%eth0]:80":           "net:fe80::/64",
		"not-an-address":              "",
	} {
		assert.Equal(t, want, key(request(remote)), remote)
	}
	assert.Equal(t, "net:192.0.2.7/32", httplimit.KeyByIPPrefix(40, 200)(request("192.0.2.7:1")), "bits past the length are the length")
}

// Behind trusted proxies the client is the rightmost address that is not
// a trusted proxy's; a client that connects directly and forges the
// header is keyed by its own address.
func TestKeyByForwardedFor(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	key := httplimit.KeyByForwardedFor(trusted, 32, 128)
	for _, tc := range []struct {
		remote    string
		forwarded []string
		want      string
	}{
		{"10.1.1.1:80", []string{"203.0.113.5"}, "net:203.0.113.5/32"},
		{"10.1.1.1:80", []string{"198.51.100.9, 203.0.113.5, 10.2.2.2"}, "net:203.0.113.5/32"},
		{"10.1.1.1:80", []string{"198.51.100.9", "203.0.113.5"}, "net:203.0.113.5/32"},
		{"[fd00::2]:80", []string{"2001:db8::7"}, "net:2001:db8::7/128"},
		{"203.0.113.9:80", []string{"198.51.100.1"}, "net:203.0.113.9/32"},
		{"10.1.1.1:80", nil, "net:10.1.1.1/32"},
		{"10.1.1.1:80", []string{"junk, 10.3.3.3"}, "net:10.3.3.3/32"},
	} {
		assert.Equal(t, tc.want, key(request(tc.remote, tc.forwarded...)), "%s %v", tc.remote, tc.forwarded)
	}
}

// Skipped requests are served with no permits taken, no headers and no
// decision; the others are limited as before.
func TestSkip(t *testing.T) {
	p := prefix(t)
	var decisions atomic.Int64
	lim, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, httplimit.WithPrefix(p),
		httplimit.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }),
		httplimit.WithDecisionHook(func(*http.Request, httplimit.Decision) { decisions.Add(1) }))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	for i := 0; i < 3; i++ {
		res := get(t, srv.URL+"/healthz")
		assert.Equal(t, 200, res.StatusCode)
		assert.Empty(t, res.Header.Get("RateLimit"))
	}
	assert.Equal(t, int64(0), decisions.Load())
	assert.Equal(t, 200, get(t, srv.URL).StatusCode)
	assert.Equal(t, 429, get(t, srv.URL).StatusCode)
	assert.Equal(t, int64(2), decisions.Load())
	_, err = httplimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, httplimit.WithSkip(nil))
	assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
}

// WithLegacyHeaders adds the X-RateLimit-* names with the figures of
// RateLimit: requests per window, left, and seconds to reset (the retry
// hint on a refusal, as Retry-After).
func TestLegacyHeaders(t *testing.T) {
	lim, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 2, Interval: 10 * time.Second},
		httplimit.WithPrefix(prefix(t)), httplimit.WithLegacyHeaders())
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	for i, want := range []string{"1", "0"} {
		res := get(t, srv.URL)
		require.Equal(t, 200, res.StatusCode)
		assert.Equal(t, "2", res.Header.Get("X-RateLimit-Limit"), "request %d", i)
		assert.Equal(t, want, res.Header.Get("X-RateLimit-Remaining"), "request %d", i)
		assert.Contains(t, res.Header.Get("RateLimit"), ";t="+res.Header.Get("X-RateLimit-Reset"), "request %d", i)
	}
	res := get(t, srv.URL)
	require.Equal(t, 429, res.StatusCode)
	assert.Equal(t, "0", res.Header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, res.Header.Get("Retry-After"), res.Header.Get("X-RateLimit-Reset"))

	plain, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 2, Interval: 10 * time.Second}, httplimit.WithPrefix(prefix(t)))
	require.NoError(t, err)
	assert.Empty(t, get(t, serve(t, plain.Handler(&counting{})).URL).Header.Get("X-RateLimit-Limit"), "off by default")

	// WithLegacyResetUnix: the same seconds as RateLimit's t, as a Unix
	// time (bounded by this process's clock before and after the request).
	unix, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 2, Interval: 10 * time.Second},
		httplimit.WithPrefix(prefix(t)), httplimit.WithLegacyResetUnix())
	require.NoError(t, err)
	usrv := serve(t, unix.Handler(&counting{}))
	before := time.Now().Unix()
	res = get(t, usrv.URL)
	after := time.Now().Unix()
	require.Equal(t, 200, res.StatusCode)
	tSec, err := strconv.ParseInt(strings.TrimPrefix(res.Header.Get("RateLimit")[strings.Index(res.Header.Get("RateLimit"), ";t="):], ";t="), 10, 64)
	require.NoError(t, err)
	reset, err := strconv.ParseInt(res.Header.Get("X-RateLimit-Reset"), 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, reset, before+tSec, "X-RateLimit-Reset as a Unix time")
	assert.LessOrEqual(t, reset, after+tSec)
	assert.Equal(t, "2", res.Header.Get("X-RateLimit-Limit"), "legacy headers on")
}

// WithCost: each request takes its own number of permits (here from a
// header); the RateLimit fields count permits; a cost below 1 is free;
// a cost above the rate is refused.
func TestCost(t *testing.T) {
	cost := func(r *http.Request) int64 {
		n, _ := strconv.ParseInt(r.Header.Get("X-Cost"), 10, 64)
		return n
	}
	lim, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 10, Interval: time.Minute},
		httplimit.WithPrefix(prefix(t)), httplimit.WithCost(cost))
	require.NoError(t, err)
	h := &counting{}
	srv := serve(t, lim.Handler(h))
	for _, tc := range []struct {
		cost, status int
		left         string
	}{{4, 200, "6"}, {7, 429, "0"}, {6, 200, "0"}, {0, 200, ""}, {11, 429, ""}} {
		res := get(t, srv.URL, "X-Cost", strconv.Itoa(tc.cost))
		assert.Equal(t, tc.status, res.StatusCode, "cost %d", tc.cost)
		if tc.left != "" {
			assert.Contains(t, res.Header.Get("RateLimit"), ";r="+tc.left+";", "cost %d", tc.cost)
		}
	}
	assert.Equal(t, int64(3), h.n.Load(), "4, 6 and the free request served")
	_, err = httplimit.New(newRedis(t), ratelimiter.Config{Rate: 10, Interval: time.Minute}, httplimit.WithCost(cost), httplimit.WithPermits(2))
	assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
	_, err = httplimit.New(newRedis(t), ratelimiter.Config{Rate: 10, Interval: time.Minute}, httplimit.WithCost(nil))
	assert.ErrorIs(t, err, httplimit.ErrInvalidOption)
}

// WithTiers: a request of the "pro" tier (by header) takes from a limiter
// of its own with the tier's limit, named by the tier; others use the
// default limit; the tier names the RateLimit policy and the Decision.
func TestTiers(t *testing.T) {
	p := prefix(t)
	var last atomic.Value
	lim, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute}, httplimit.WithPrefix(p),
		httplimit.WithKey(httplimit.KeyByHeader("X-Key")),
		httplimit.WithTiers(func(r *http.Request) string { return r.Header.Get("X-Plan") },
			map[string]ratelimiter.Config{"pro": {Rate: 3, Interval: time.Minute}}),
		httplimit.WithDecisionHook(func(_ *http.Request, d httplimit.Decision) { last.Store(d) }))
	require.NoError(t, err)
	srv := serve(t, lim.Handler(&counting{}))
	pro := func() *http.Response { return get(t, srv.URL, "X-Key", "a", "X-Plan", "pro") }
	for i := 0; i < 3; i++ {
		res := pro()
		require.Equal(t, 200, res.StatusCode, "pro request %d", i)
		assert.Equal(t, `"pro";q=3;w=60`, res.Header.Get("RateLimit-Policy"))
	}
	assert.Equal(t, 429, pro().StatusCode)
	d := last.Load().(httplimit.Decision)
	assert.Equal(t, "pro", d.Tier)
	assert.Equal(t, p+"pro:X-Key:a", d.Name)
	assert.Equal(t, 200, get(t, srv.URL, "X-Key", "a").StatusCode, "the default tier has its own limiter")
	assert.Equal(t, 429, get(t, srv.URL, "X-Key", "a", "X-Plan", "free").StatusCode, "an unknown tier is the default")
	assert.Equal(t, "", last.Load().(httplimit.Decision).Tier)

	for _, tiers := range []map[string]ratelimiter.Config{
		{"bad name": {Rate: 1, Interval: time.Second}},
		{"pro": {Rate: 0, Interval: time.Second}},
		{},
	} {
		_, err := httplimit.New(newRedis(t), ratelimiter.Config{Rate: 1, Interval: time.Minute},
			httplimit.WithTiers(func(*http.Request) string { return "" }, tiers))
		assert.ErrorIs(t, err, httplimit.ErrInvalidOption, "%v", tiers)
	}
}
