package ratelimiterotel_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/httplimit"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// An httplimit middleware with HTTPDecisionHook counts its requests in
// ratelimiter.requests by policy and result: with rules, the binding
// rule is the policy.
func TestHTTPRequestMetrics(t *testing.T) {
	s := newSDK(t)
	lim, err := httplimit.New(newRedis(t), ratelimiter.Config{}, httplimit.WithPrefix(redistest.Name(t)+":"),
		httplimit.WithRules(
			httplimit.Rule{Name: "sec", Config: ratelimiter.Config{Rate: 10, Interval: time.Second}},
			httplimit.Rule{Name: "hour", Config: ratelimiter.Config{Rate: 2, Interval: time.Hour}}),
		httplimit.WithDecisionHook(s.m.HTTPDecisionHook("default")))
	require.NoError(t, err)
	srv := httptest.NewServer(lim.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	for i := 0; i < 3; i++ {
		res, err := http.Get(srv.URL)
		require.NoError(t, err)
		res.Body.Close()
	}
	got := s.collect(t)["ratelimiter.requests {request}"]
	require.NotNil(t, got)
	require.Equal(t, int64(2), sumOf(t, got, map[string]string{"ratelimiter.policy": "hour", "ratelimiter.result": "acquired"}))
	require.Equal(t, int64(1), sumOf(t, got, map[string]string{"ratelimiter.policy": "hour", "ratelimiter.result": "limited"}))
}
