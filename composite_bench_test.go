package ratelimiter_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// scriptStats returns the server's EVALSHA calls and their total time in
// microseconds since the last CONFIG RESETSTAT.
func scriptStats(t testing.TB, rdb *redis.Client) (calls, usec int64) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				require.NoError(t, err)
				calls = n
			case "usec":
				require.NoError(t, err)
				usec = n
			}
		}
	}
	return calls, usec
}

// BenchmarkCompositeRedisTime: the Redis time of one decision over k limits
// (k = 2, 3) made by one composite call against k separate TryAcquire
// calls, one per limiter, in rounds that alternate the two, on a client
// without combining (one script call per call):
//
//	go test -run '^$' -bench CompositeRedisTime -benchtime 1x -v .
//
// It logs and reports the median of the rounds for each (server time from
// INFO commandstats, all of it inside EVALSHA; and the caller's time over
// loopback, round trips included) and the ratios. "granted"
// limiters never run out; "refused" ones are full, so every call is
// refused and computes its hint. It asserts only the script calls per
// decision: 1 for the composite, k for separate calls.
func BenchmarkCompositeRedisTime(b *testing.B) {
	ctx := context.Background()
	const rounds, perRound = 9, 2000
	for _, k := range []int{2, 3} {
		for _, granted := range []bool{true, false} {
			name := fmt.Sprintf("k=%d/refused", k)
			if granted {
				name = fmt.Sprintf("k=%d/granted", k)
			}
			b.Run(name, func(b *testing.B) {
				rdb := newRedis(b)
				c := ratelimiter.NewClient(rdb, ratelimiter.WithMaxBatch(1))
				base := uniqueName(b)
				var parts []*ratelimiter.Limiter
				var ns []string
				for i := 0; i < k; i++ {
					l := c.Limiter(fmt.Sprintf("%s:{t}:%d", base, i))
					b.Cleanup(func() { _, _ = l.Delete(ctx) })
					cfg := ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}
					if !granted {
						cfg.Rate = 1
					}
					require.NoError(b, l.SetRate(ctx, cfg))
					if !granted {
						ok, err := l.TryAcquire(ctx, 1)
						require.NoError(b, err)
						require.True(b, ok)
					}
					parts, ns = append(parts, l), append(ns, l.Name())
				}
				all := c.All(ns...)
				check := func(ok bool, err error) {
					if err == nil && ok != granted {
						err = fmt.Errorf("granted = %v, want %v", ok, granted)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				// round returns the Redis time and the caller's time per
				// decision, and the script calls made.
				round := func(one func()) (redisUs, callerUs float64, calls int64) {
					require.NoError(b, rdb.ConfigResetStat(ctx).Err())
					start := time.Now()
					for i := 0; i < perRound; i++ {
						one()
					}
					wall := time.Since(start)
					calls, total := scriptStats(b, rdb)
					return float64(total) / perRound, float64(wall.Microseconds()) / perRound, calls
				}
				var comp, sep, compWall, sepWall []float64
				for r := 0; r < rounds; r++ {
					u, w, calls := round(func() { check(all.TryAcquire(ctx, 1)) })
					require.EqualValues(b, perRound, calls, "one script call per composite decision")
					comp, compWall = append(comp, u), append(compWall, w)
					u, w, calls = round(func() {
						for _, l := range parts {
							check(l.TryAcquire(ctx, 1))
						}
					})
					require.EqualValues(b, k*perRound, calls, "k script calls per decision")
					sep, sepWall = append(sep, u), append(sepWall, w)
				}
				mc, ms := median(comp), median(sep)
				wc, ws := median(compWall), median(sepWall)
				b.ReportMetric(mc, "composite-redis-us")
				b.ReportMetric(ms, "separate-redis-us")
				b.ReportMetric(mc/ms, "x-separate-redis")
				b.ReportMetric(wc/ws, "x-separate-caller")
				b.Logf("%s, per decision, median of %d rounds of %d: Redis time composite %.2f us (1 call), %d separate calls %.2f us, ratio %.2f; caller's time %.1f us vs %.1f us, ratio %.2f",
					name, rounds, perRound, mc, k, ms, mc/ms, wc, ws, wc/ws)
			})
		}
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
