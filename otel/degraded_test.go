package ratelimiterotel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// A decision made locally in an outage (ratelimiter.WithOutageFallback)
// counts on ratelimiter.decisions with ratelimiter.degraded=true; others
// do not carry the attribute.
func TestMetricsMarkDegradedDecisions(t *testing.T) {
	s := newSDK(t)
	h := s.m.Hooks()
	h.Decision(ratelimiter.Decision{Limiter: "a", Op: ratelimiter.OpAllow, Permits: 1, Granted: true, Degraded: true})
	h.Decision(ratelimiter.Decision{Limiter: "a", Op: ratelimiter.OpAllow, Permits: 1, RetryAfter: time.Second, Degraded: true})
	h.Decision(ratelimiter.Decision{Limiter: "a", Op: ratelimiter.OpAllow, Permits: 1, Granted: true, RoundTrip: time.Millisecond, Batch: 1})

	dec := s.collect(t)["ratelimiter.decisions {decision}"]
	require.NotNil(t, dec)
	at := func(out string, degraded bool) map[string]string {
		m := map[string]string{"ratelimiter.name": "a", "ratelimiter.operation": "allow", "ratelimiter.outcome": out}
		if degraded {
			m["ratelimiter.degraded"] = "true"
		}
		return m
	}
	require.Equal(t, int64(1), sumOf(t, dec, at("granted", true)))
	require.Equal(t, int64(1), sumOf(t, dec, at("refused", true)))
	require.Equal(t, int64(1), sumOf(t, dec, at("granted", false)), "Redis's grant carries no ratelimiter.degraded")
}
