package ratelimiter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/hookbench"
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

// BenchmarkAcquireHooks runs TryAcquire on a real Redis with no hook and
// with a trivial hook in alternating rounds and reports the difference
// per call (hookbench.Alternate).
//
//	go test -run '^$' -bench AcquireHooks -benchtime 20000x .
func BenchmarkAcquireHooks(b *testing.B) {
	ctx := context.Background()
	rdb := newRedis(b)
	name := uniqueName(b)
	var n atomic.Int64
	call := func(c *ratelimiter.Client) func() error {
		l := c.Limiter(name)
		return func() error { _, err := l.TryAcquire(ctx, 1); return err }
	}
	plain := ratelimiter.NewClient(rdb, ratelimiter.WithMaxBatch(1))
	hooked := ratelimiter.NewClient(rdb, ratelimiter.WithMaxBatch(1), countingHooks(&n))
	_, err := plain.Limiter(name).TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 40, Interval: time.Hour})
	require.NoError(b, err)
	hookbench.Alternate(b,
		hookbench.Side{Name: "none", Call: call(plain)},
		hookbench.Side{Name: "trivial", Call: call(hooked)})
	require.Positive(b, n.Load(), "the hook saw the grants")
}
