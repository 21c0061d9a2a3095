package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter"
)

// BenchmarkLoneTryAcquire is one caller's TryAcquire(ctx, 1) on a limiter
// far from its rate, one round trip each: what a lone caller costs this
// process (allocations per call are the steady figure; the time is
// mostly the round trip).
//
//	go test -run '^$' -bench LoneTryAcquire -benchmem .
func BenchmarkLoneTryAcquire(b *testing.B) {
	for _, tc := range []struct {
		name     string
		opts     []ratelimiter.Option
		deadline bool // a 1 s deadline per call: the script call runs on a goroutine of its own
	}{
		{"default", nil, false},
		{"deadline", nil, true},
		{"unfair", []ratelimiter.Option{ratelimiter.WithFairness(false)}, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			c := ratelimiter.NewClient(newRedis(b), tc.opts...)
			l := c.Limiter(uniqueName(b))
			if _, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 40, Interval: time.Second}); err != nil {
				b.Fatal(err)
			}
			if _, err := l.TryAcquire(ctx, 1); err != nil { // loads the script, measures the clock
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cctx, cancel := ctx, context.CancelFunc(func() {})
				if tc.deadline {
					cctx, cancel = context.WithTimeout(ctx, time.Second)
				}
				ok, err := l.TryAcquire(cctx, 1)
				cancel()
				if err != nil || !ok {
					b.Fatalf("TryAcquire: %v %v", ok, err)
				}
			}
		})
	}
}
