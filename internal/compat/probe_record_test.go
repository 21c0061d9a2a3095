package compat

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// TestProbeRecordWithJava: the probe record (docs/protocol.md), expired
// and within wire.ProbeHold, keeps its permit out for this library and
// gives it to Redisson, which reads it as a record of one permit, for
// every version whose format has one. The Go Client's clock is fixed 10 ms
// after the record's expiry, so its side is inside the hold however long
// the calls take; Java reads its own clock, later than that.
func TestProbeRecordWithJava(t *testing.T) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			f := formatFor(v)
			if wire.ProbeRecord(f) == nil {
				t.Skipf("Redisson %s writes %v, which has no probe record", v, f)
			}
			ctx := ctxT(t, time.Minute)
			c := rdb(t)
			j := javaSide{peerFor(t, v)}
			now := time.Now()
			gc := newGoClient(t, v, ratelimiter.WithClockCheck(-1), ratelimiter.WithServerClock(false),
				ratelimiter.WithClock(func() time.Time { return now }))
			l := gc.Limiter(limName(t, "probe"))
			check(t, errOnly(l.TrySetRate(ctx, ratelimiter.Config{Rate: 3, Interval: time.Second})), "trySetRate")
			if !must[bool](t, "tryAcquire")(l.TryAcquire(ctx, 2)) {
				t.Fatal("Go's first 2 permits refused")
			}
			k := goKeys(gc, l.Name())
			probe := string(wire.ProbeRecord(f))
			check(t, c.ZAdd(ctx, k.Permits, redis.Z{Score: float64(now.Add(-time.Second - 10*time.Millisecond).UnixMilli()), Member: probe}).Err(), "zadd")
			check(t, c.DecrBy(ctx, k.Value, 1).Err(), "decrby")

			if got := must[int64](t, "AvailablePermits")(l.AvailablePermits(ctx)); got != 0 {
				t.Fatalf("Go sees %d permits in the hold, want 0", got)
			}
			if must[bool](t, "tryAcquire")(l.TryAcquire(ctx, 1)) {
				t.Fatal("Go took the held probe record's permit")
			}
			if !must[bool](t, "java tryAcquire")(j.tryAcquire(ctx, l.Name(), 1)) {
				t.Fatalf("Redisson %s was refused the expired probe record's permit", v)
			}
			if err := c.ZScore(ctx, k.Permits, probe).Err(); err != redis.Nil {
				t.Fatalf("the probe record is still there after Redisson's call: %v", err)
			}
			if got := must[int64](t, "java availablePermits")(j.available(ctx, l.Name())); got != 0 {
				t.Fatalf("Redisson sees %d permits after its grant, want 0", got)
			}
		})
	}
}
