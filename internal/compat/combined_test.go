package compat

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// TestCombinedRecords: a combined script call writes one record holding the
// sum of the permits it granted. Every Redisson version, in its member
// format, reads, counts, releases and expires such records exactly as it
// does one record per acquisition. The same Go grants are made twice, by
// concurrent callers of one Client (combined: the Decision hook must see
// batches of more than one) and with WithMaxBatch(1); in both runs Redisson
// must see the same budget at every step:
//   - after two rounds of grants (A, then B 600 ms later): availablePermits;
//   - after a Go Release of 3, which shrinks or removes the oldest records
//     (round A's): availablePermits, then tryAcquire of exactly what is
//     left and of one more;
//   - after a Java release (3.52+): availablePermits;
//   - when round A's records have expired but not round B's: Redisson adds
//     back exactly what A's records still hold, 9 less the 3 released (3.16
//     adds them without a cap, so a record holding a wrong count, a shrunk
//     one's too, would show);
//   - when every record has expired: the full rate (and the permit of
//     Java's release again, Redisson's own defect).
func TestCombinedRecords(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			comb, combRecords, batch := combinedRun(t, v, true)
			sep, sepRecords, _ := combinedRun(t, v, false)
			t.Logf("Redisson %s: combined %+v in %d records (largest batch %d); uncombined %+v in %d records",
				v, comb, combRecords, batch, sep, sepRecords)
			if batch < 2 {
				t.Fatalf("no batch formed (largest %d)", batch)
			}
			if combRecords >= sepRecords {
				t.Fatalf("combined wrote %d records, uncombined %d", combRecords, sepRecords)
			}
			// 18 of 20 granted; Go releases 3 out of A's records (5 left);
			// Java takes 3 (2 left) and, 3.52+, gives 1 back; the 6 left in
			// A's records come back, then all.
			want := budgetSeen{afterGo: 2, afterGoRelease: 5, javaTook3: true, javaTook3More: false, afterJava: 2, afterA: 8, afterAll: 20}
			if versionAtLeast(v, "3.52.0") {
				// Redisson's release raises the value and leaves the records,
				// so the permit comes back again when they expire (docs/
				// differences.md): 21, in both runs.
				want.afterJava, want.afterA, want.afterAll = 3, 9, 21
			}
			if comb != want || sep != want {
				t.Fatalf("Redisson %s saw combined %+v, uncombined %+v; want %+v for both", v, comb, sep, want)
			}
		})
	}
}

// budgetSeen is what Redisson saw at each step of TestCombinedRecords.
type budgetSeen struct {
	afterGo, afterGoRelease     int64
	javaTook3, javaTook3More    bool
	afterJava, afterA, afterAll int64
}

const (
	combRate     = 20
	combInterval = 1500 * time.Millisecond
)

// combinedRun makes TestCombinedRecords' grants, combined or not, and
// returns what Redisson saw, the records the Go grants wrote and the
// largest batch a Decision reported.
func combinedRun(t *testing.T, v string, combined bool) (budgetSeen, int64, int) {
	ctx := ctxT(t, time.Minute)
	c := rdb(t)
	j := javaSide{peerFor(t, v)}
	var maxBatch atomic.Int64
	opts := []ratelimiter.Option{ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
		for b := maxBatch.Load(); int64(d.Batch) > b && !maxBatch.CompareAndSwap(b, int64(d.Batch)); b = maxBatch.Load() {
		}
	}})}
	if !combined {
		opts = append(opts, ratelimiter.WithMaxBatch(1))
	}
	gc := newGoClient(t, v, opts...)
	l := gc.Limiter(limName(t, "comb"))
	check(t, errOnly(l.TrySetRate(ctx, ratelimiter.Config{Rate: combRate, Interval: combInterval})), "trySetRate")
	key := goKeys(gc, l.Name()).Permits

	grantRound(t, ctx, c, l)
	aRecords := c.ZRangeWithScores(ctx, key, 0, -1).Val()
	if len(aRecords) == 0 {
		t.Fatalf("no records at %s after round A: the Go Client wrote elsewhere", key)
	}
	newestA := time.UnixMilli(int64(aRecords[len(aRecords)-1].Score))
	time.Sleep(time.Until(time.UnixMilli(int64(aRecords[0].Score)).Add(600 * time.Millisecond)))
	grantRound(t, ctx, c, l)
	records := c.ZCard(ctx, key).Val()
	oldestB := c.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{
		Min: fmt.Sprintf("(%d", newestA.UnixMilli()), Max: "+inf", Count: 1}).Val()
	if len(oldestB) != 1 {
		t.Fatalf("no record of round B after %v", newestA)
	}

	var s budgetSeen
	s.afterGo = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
	check(t, l.Release(ctx, 3), "release")
	s.afterGoRelease = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
	s.javaTook3 = must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), 3))
	s.javaTook3More = must[bool](t, "tryAcquire")(j.tryAcquire(ctx, l.Name(), 3))
	if versionAtLeast(v, "3.52.0") {
		check(t, j.release(ctx, l.Name(), 1), "java release")
	}
	s.afterJava = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))

	time.Sleep(time.Until(newestA.Add(combInterval + 5*time.Millisecond)))
	s.afterA = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
	if time.Until(time.UnixMilli(int64(oldestB[0].Score)).Add(combInterval)) < 0 {
		t.Fatalf("round B's records %v expired before the check of round A's (a stall of the test)", oldestB)
	}
	newest := c.ZRangeWithScores(ctx, key, -1, -1).Val()
	time.Sleep(time.Until(time.UnixMilli(int64(newest[0].Score)).Add(combInterval + 5*time.Millisecond)))
	s.afterAll = must[int64](t, "availablePermits")(j.available(ctx, l.Name()))
	return s, records, int(maxBatch.Load())
}

// grantRound makes six acquisitions of 1 and 2 permits (9 in all) at once
// while Redis holds writes back: combined, the first goes alone and the
// rest queue for one call.
func grantRound(t *testing.T, ctx context.Context, c *redis.Client, l *ratelimiter.Limiter) {
	check(t, c.Do(ctx, "CLIENT", "PAUSE", 250, "WRITE").Err(), "pause")
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !must[bool](t, "tryAcquire")(l.TryAcquire(ctx, int64(i%2+1))) {
				t.Error("refused within the rate")
			}
		}()
	}
	wg.Wait()
}
