package ratelimiter_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// BenchmarkClockSkew measures what a skewed clock does to the limit: two
// Clients, one on this machine's clock and one offset from it (WithClock),
// stamping by the server's clock (clock=server, the default) or by their
// own (clock=client, WithServerClock(false)), take permits as fast as they can for 8 s; the benchmark reports the
// most grants in any real window of one interval less 5 ms, that count
// over the rate, and the mean grants per interval over the rate. (Records
// are stamped in whole ms and a grant's time is the middle of its call, so
// with no skew a window of exactly one interval can hold two bursts
// 999.x ms apart.)
//
//	go test -run '^$' -bench ClockSkew -benchtime 1x .
func BenchmarkClockSkew(b *testing.B) {
	for _, tc := range []struct {
		rate   int64
		offset time.Duration
	}{
		{10, 0}, {10, 500 * time.Millisecond},
		{50, 0}, {50, 100 * time.Millisecond}, {50, -100 * time.Millisecond},
		{50, 500 * time.Millisecond}, {50, -500 * time.Millisecond},
	} {
		for _, server := range []bool{true, false} {
			clock := map[bool]string{true: "server", false: "client"}[server]
			b.Run(fmt.Sprintf("clock=%s,rate=%d/s,offset=%v", clock, tc.rate, tc.offset), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					worst, total, secs := skewRun(b, tc.rate, time.Second, tc.offset, 8*time.Second, server)
					b.ReportMetric(float64(worst), "worst-window-grants")
					b.ReportMetric(float64(worst)/float64(tc.rate), "worst/rate")
					b.ReportMetric(float64(total)/secs/float64(tc.rate), "mean/rate")
				}
			})
		}
	}
}

// skewRun runs the two Clients (on the server's clock if server) for d
// and returns the most grants in any
// real window of interval less 5 ms, the grants in all and the seconds
// they took.
func skewRun(b *testing.B, rate int64, interval, offset, d time.Duration, server bool) (int, int, float64) {
	ctx := context.Background()
	rdb := newRedis(b)
	name := uniqueName(b)
	clocks := []ratelimiter.Option{
		ratelimiter.WithClock(time.Now),
		ratelimiter.WithClock(func() time.Time { return time.Now().Add(offset) }),
	}
	_, err := ratelimiter.NewClient(rdb).Limiter(name).TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(b, err)
	var mu sync.Mutex
	var grants []time.Duration // real time since start, at the middle of the call
	start := time.Now()
	var wg sync.WaitGroup
	for _, clock := range clocks {
		l := ratelimiter.NewClient(rdb, clock, ratelimiter.WithClockCheck(-1), ratelimiter.WithServerClock(server)).Limiter(name)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < d {
					t0 := time.Since(start)
					ok, err := l.TryAcquire(ctx, 1)
					t1 := time.Since(start)
					if err != nil {
						b.Error(err)
						return
					}
					if ok {
						mu.Lock()
						grants = append(grants, (t0+t1)/2)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	slices.Sort(grants)
	worst, j := 0, 0
	for i := range grants {
		for grants[i]-grants[j] >= interval-5*time.Millisecond {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return worst, len(grants), d.Seconds()
}
