package script

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// probeConn returns a Conn on a fresh redis-server that stamps records
// with a clock the test sets (ms), and a limiter of rate per second.
func probeConn(t *testing.T, f wire.Format, rate int) (*Conn, context.Context, Keys, wire.Keys, *atomic.Int64) {
	t.Helper()
	c, ctx := pipeConn(t, newPipeHook())
	var ms atomic.Int64
	ms.Store(time.Now().UnixMilli())
	c = New(c.rdb, Options{Format: f, Tag: wire.Tag{1, 2, 3, 4}, ClientClock: true,
		Clock: func() time.Time { return time.UnixMilli(ms.Load()) }})
	wk := wire.KeysFor("probe", "client")
	if err := c.rdb.HSet(ctx, wk.Config, "rate", rate, "interval", 1000, "type", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return c, ctx, KeysOf(wk), wk, &ms
}

// The acquire script's probe record, on a real server, in each format:
//   - a call that may write it and grants writes one permit as the probe
//     record (and the rest in its own record) when none is in place, and
//     says so (Wrote, not Found);
//   - the next such call finds it and leaves it, with the ms until it
//     expires;
//   - expired, it stays with its permit out for wire.ProbeHold: a call
//     then grants only what the other records freed, removes them (those
//     before it and after it in score order), and finds it there, expired;
//   - no hint waits for it: a refused call's hint is the next other
//     record's expiry;
//   - after the hold a call settles it and writes it anew (Found, Wrote).
func TestProbeRecordScript(t *testing.T) {
	for _, f := range []wire.Format{wire.Bc0I, wire.Lc0I, wire.FI} {
		t.Run(f.String(), func(t *testing.T) { probeRecordScript(t, f) })
	}
}

func probeRecordScript(t *testing.T, f wire.Format) {
	c, ctx, k, wk, ms := probeConn(t, f, 4)
	t0 := ms.Load()
	probe := engine.Form{Kind: engine.Strict, Probe: true}
	pm := string(wire.ProbeRecord(f))
	score := func() (float64, bool) {
		s, err := c.rdb.ZScore(ctx, wk.Permits, pm).Result()
		if err == redis.Nil {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return s, true
	}
	decide := func(what string, form engine.Form, ns []int64) engine.Reply {
		t.Helper()
		r := c.Acquire(ctx, k, form, ns)
		if r.Err != nil {
			t.Fatalf("%s: %v", what, r.Err)
		}
		return r
	}

	// An earlier record of 1, then a call granting 2 writes the probe record.
	decide("first", engine.Form{Kind: engine.Single}, []int64{1})
	ms.Store(t0 + 50)
	r := decide("writes", probe, []int64{2})
	if !r.Verdicts[0].Res.Granted || !r.Probe.Read || r.Probe.Found || !r.Probe.Wrote || r.Probe.Until != time.Second {
		t.Fatalf("the writing call: %+v, probe %+v; want granted, written, found none, 1s", r.Verdicts, r.Probe)
	}
	if s, ok := score(); !ok || int64(s) != t0+50 {
		t.Fatalf("probe record: score %v, %v; want %d", s, ok, t0+50)
	}
	zs, err := c.rdb.ZRangeWithScores(ctx, wk.Permits, 0, -1).Result()
	if err != nil || len(zs) != 3 {
		t.Fatalf("records: %v, %v; want 3 (the first, the call's own of 1, the probe record)", zs, err)
	}
	ms.Store(t0 + 100)
	r = decide("finds", probe, []int64{1})
	if !r.Verdicts[0].Res.Granted || !r.Probe.Found || r.Probe.Wrote || r.Probe.Until != 950*time.Millisecond {
		t.Fatalf("the next call: %+v, probe %+v; want granted, found, 950ms", r.Verdicts, r.Probe)
	}

	// At t0+1060 the first record (t0) and the call's own (t0+50) have
	// expired, and the probe record (t0+50) is held: 2 permits free, not 3.
	ms.Store(t0 + 1060)
	r = decide("held", probe, []int64{1, 1, 1})
	if g := granted3(r); g != 2 || !r.Probe.Found || r.Probe.Wrote || r.Probe.Until != -10*time.Millisecond {
		t.Fatalf("in the hold: %d granted (%+v), probe %+v; want 2, found, -10ms", g, r.Verdicts, r.Probe)
	}
	if _, ok := score(); !ok {
		t.Fatal("the held probe record was removed")
	}
	n, err := c.rdb.ZCard(ctx, wk.Permits).Result()
	if err != nil || n != 3 {
		t.Fatalf("%d records, %v; want 3: the held probe record, t0+100's, this call's", n, err)
	}
	// The refusal's hint: the next record other than the probe record,
	// t0+100's, expires at t0+1100 (and the scripts' 3 ms).
	if h := r.Verdicts[2].Res.RetryAfter; h != 43*time.Millisecond {
		t.Fatalf("hint %v, want 43ms (the probe record skipped)", h)
	}

	// After the hold (t0+50+1000+110) a call settles it and writes it anew.
	ms.Store(t0 + 1170)
	r = decide("renews", probe, []int64{1, 1})
	if g := granted3(r); g != 2 || !r.Probe.Found || !r.Probe.Wrote || r.Probe.Until != time.Second {
		t.Fatalf("after the hold: %d granted (%+v), probe %+v; want 2 (the probe's and t0+100's), renewed", g, r.Verdicts, r.Probe)
	}
	if s, ok := score(); !ok || int64(s) != t0+1170 {
		t.Fatalf("renewed probe record: score %v, %v; want %d", s, ok, t0+1170)
	}
	// The budget: 4 permits, all out (t0+1060's 2, t0+1170's 2).
	if v, err := c.rdb.Get(ctx, wk.Value).Int64(); err != nil || v != 0 {
		t.Fatalf("value %d, %v; want 0", v, err)
	}
}

// granted3 counts r's grants.
func granted3(r engine.Reply) int {
	n := 0
	for _, v := range r.Verdicts {
		if v.Res.Granted {
			n++
		}
	}
	return n
}
