package compat

import (
	"testing"
	"time"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// TestCompositeWithJava: each part of a Go composite stays a plain
// Redisson limiter. Java configures both parts (one OVERALL, one
// PER_CLIENT shared through the client id); Java's tryAcquire and
// availablePermits on one part see the composite's grants, the composite
// sees Java's, a refused composite takes nothing from either part, and
// Redisson expires the composite's records as its own.
func TestCompositeWithJava(t *testing.T) {
	for _, v := range []string{"4.7.0", "3.16.3"} {
		t.Run(v, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			j := javaSide{peerFor(t, v)}
			sec, hour := limName(t, "{q}:sec"), limName(t, "{q}:hour")
			const secInterval = 1500 * time.Millisecond
			check(t, errOnly(j.trySetRate(ctx, sec, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: secInterval})), "java trySetRate sec")
			check(t, errOnly(j.trySetRate(ctx, hour, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 8, Interval: time.Hour})), "java trySetRate hour")
			quota := newGoClient(t, v, ratelimiter.WithClientID(j.id())).All(sec, hour)
			avail := func(name string, want int64) {
				t.Helper()
				if got := must[int64](t, "java availablePermits")(j.available(ctx, name)); got != want {
					t.Fatalf("Redisson %s availablePermits(%s) = %d, want %d", v, name, got, want)
				}
			}
			take := func(n int64, want bool) {
				t.Helper()
				if got := must[bool](t, "composite tryAcquire")(quota.TryAcquire(ctx, n)); got != want {
					t.Fatalf("composite TryAcquire(%d) = %v, want %v", n, got, want)
				}
			}

			take(3, true)
			avail(sec, 2) // Java sees the composite's grant in both parts
			avail(hour, 5)
			if !must[bool](t, "java tryAcquire")(j.tryAcquire(ctx, sec, 2)) {
				t.Fatal("java tryAcquire(sec, 2) refused with 2 left")
			}
			take(1, false) // the composite sees Java's grant
			res := must[ratelimiter.Result](t, "composite allow")(quota.Allow(ctx, 1))
			if res.Granted || res.Limit != 5 || res.RetryAfter <= 0 || res.RetryAfter > secInterval+3*time.Millisecond {
				t.Fatalf("composite Allow(1) = %+v; want refused by the per-second part", res)
			}
			avail(hour, 5) // refused: nothing taken from the other part
			if !must[bool](t, "java tryAcquire")(j.tryAcquire(ctx, hour, 4)) {
				t.Fatal("java tryAcquire(hour, 4) refused with 5 left")
			}

			// The per-second records expire: the hint is the composite's
			// record's; Java's, a call later, may be some ms younger.
			sk := goKeys(newGoClient(t, v), sec).Permits
			newest := rdb(t).ZRangeWithScores(ctx, sk, -1, -1).Val()
			if len(newest) != 1 || res.RetryAfter <= 0 {
				t.Fatalf("per-second records %v, hint %v", newest, res.RetryAfter)
			}
			time.Sleep(time.Until(time.UnixMilli(int64(newest[0].Score)).Add(secInterval + 5*time.Millisecond)))
			take(2, false) // the hourly part has 1 left
			avail(sec, 5)  // Redisson expired the composite's record and Java's alike
			avail(hour, 1)
			take(1, true)
			avail(sec, 4)
			avail(hour, 0)
			if must[bool](t, "java tryAcquire")(j.tryAcquire(ctx, hour, 1)) {
				t.Fatal("java tryAcquire(hour, 1) granted with the budget spent")
			}
		})
	}
}
