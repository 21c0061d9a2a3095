package ratelimiter_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter"
)

// A trivial Decision hook: counts grants, as a metric would.
func countingHooks(n *atomic.Int64) ratelimiter.Option {
	return ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
		if d.Granted {
			n.Add(1)
		}
	}})
}

// BenchmarkHookCost is the cost of reporting one decision, Redis left
// out: the clock check alone (no hook) and with a trivial hook.
//
//	go test -run '^$' -bench HookCost -benchmem .
func BenchmarkHookCost(b *testing.B) {
	var n atomic.Int64
	d := ratelimiter.Decision{Limiter: "bench", Op: ratelimiter.OpAllow, Permits: 1, Granted: true,
		RoundTrip: 50 * time.Microsecond, Batch: 1}
	for _, tc := range []struct {
		name string
		opts []ratelimiter.Option
	}{
		{"none", nil},
		{"trivial", []ratelimiter.Option{countingHooks(&n)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := ratelimiter.NewClient(newRedis(b), tc.opts...)
			ratelimiter.Decide(c, d) // the first decision starts the first clock measurement
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ratelimiter.Decide(c, d)
			}
		})
	}
}
