package ratelimiter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter"
)

// BenchmarkManyKeysTryAcquire is a server limiting per user: 64 callers,
// each opening a limiter by name (Client.Limiter) for every decision and
// calling TryAcquire(ctx, 1) on it, over 20,000 limiters far from their
// rate. The allocations per decision are the steady figure (the time is
// the machine's: Redis shares it):
//
//	go test -run '^$' -bench ManyKeysTryAcquire -benchmem .
func BenchmarkManyKeysTryAcquire(b *testing.B) {
	ctx := context.Background()
	c := ratelimiter.NewClient(newRedis(b))
	base := uniqueName(b)
	names := make([]string, 20_000)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", base, i)
		if _, err := c.Limiter(names[i]).TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 40, Interval: time.Second}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 callers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ok, err := c.Limiter(names[rand.IntN(len(names))]).TryAcquire(ctx, 1)
			if err != nil || !ok {
				b.Errorf("TryAcquire: %v %v", ok, err)
				return
			}
		}
	})
}
