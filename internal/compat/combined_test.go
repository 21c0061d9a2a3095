package compat

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// TestCombinedRecords: a combined script call writes one record holding the
// sum of the permits it granted. Every Redisson version reads, counts and
// expires such records exactly as it does one record per acquisition:
// after the same Go grants, made combined and uncombined, Redisson's
// availablePermits, tryAcquire and expiry see the same budget.
func TestCombinedRecords(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			j := javaSide{peerFor(t, v)}
			type seen struct {
				afterGo, afterExpiry int64
				javaTook3, javaTook2 bool
			}
			run := func(t *testing.T, combined bool) (seen, int64, int) {
				ctx := ctxT(t, time.Minute)
				c := rdb(t)
				var maxBatch atomic.Int64
				opts := []ratelimiter.Option{ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
					for b := maxBatch.Load(); int64(d.Batch) > b && !maxBatch.CompareAndSwap(b, int64(d.Batch)); b = maxBatch.Load() {
					}
				}})}
				if !combined {
					opts = append(opts, ratelimiter.WithMaxBatch(1))
				}
				const rate, interval = 20, 1500 * time.Millisecond
				l := newGoClient(t, v, opts...).Limiter(limName(t, "comb"))
				check(t, errOnly(l.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})), "trySetRate")

				// Twelve acquisitions at once while Redis holds scripts back:
				// the first goes alone, the rest queue for one call.
				check(t, c.Do(ctx, "CLIENT", "PAUSE", 500, "WRITE").Err(), "pause")
				var wg sync.WaitGroup
				for i := 0; i < 12; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if !must[bool](t, "tryAcquire")(l.TryAcquire(ctx, int64(i%2+1))) {
							t.Error("refused within the rate")
						}
					}()
				}
				wg.Wait()
				records := c.ZCard(ctx, l.Keys().Permits).Val()

				var s seen
				s.afterGo = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
				s.javaTook3 = must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), 3))
				s.javaTook2 = must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), 2))
				zs := c.ZRangeWithScores(ctx, l.Keys().Permits, -1, -1).Val()
				time.Sleep(time.Until(time.UnixMilli(int64(zs[0].Score)).Add(interval + 5*time.Millisecond)))
				s.afterExpiry = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
				return s, records, int(maxBatch.Load())
			}
			comb, combRecords, batch := run(t, true)
			sep, sepRecords, _ := run(t, false)
			t.Logf("Redisson %s: combined %+v in %d records (largest batch %d); uncombined %+v in %d records",
				v, comb, combRecords, batch, sep, sepRecords)
			if batch < 2 {
				t.Fatalf("no batch formed (largest %d)", batch)
			}
			if combRecords >= sepRecords {
				t.Fatalf("combined wrote %d records, uncombined %d", combRecords, sepRecords)
			}
			want := seen{afterGo: 2, javaTook3: false, javaTook2: true, afterExpiry: 20}
			if comb != want || sep != want {
				t.Fatalf("Redisson %s saw combined %+v, uncombined %+v; want %+v for both", v, comb, sep, want)
			}
		})
	}
}
