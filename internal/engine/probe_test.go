package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Probe windows are the first interval, at most half of probeEvery, of
// every probeEvery of the wall clock; every probeFullEvery-th is full.
func TestProbeWindow(t *testing.T) {
	full := time.Unix(0, 0).Add(1000 * probeFullEvery * probeEvery) // a full window's start
	cases := []struct {
		at             time.Time
		interval       time.Duration
		wantIn, wantFl bool
	}{
		{full, time.Second, true, true},
		{full.Add(999 * time.Millisecond), time.Second, true, true},
		{full.Add(time.Second), time.Second, false, false},
		{full.Add(probeEvery), time.Second, true, false},
		{full.Add(probeEvery + 500*time.Millisecond), 500 * time.Millisecond, false, false},
		{full.Add(probeEvery/2 - time.Millisecond), time.Hour, true, true},
		{full.Add(probeEvery / 2), time.Hour, false, false},
		{full.Add(probeFullEvery * probeEvery), time.Second, true, true},
		{full.Add(probeEvery + time.Millisecond), 0, true, false}, // no interval known: 1 s
	}
	for _, c := range cases {
		in, fl := probeWindow(c.at, c.interval)
		if in != c.wantIn || fl != c.wantFl {
			t.Errorf("%v into the cycle, interval %v: in %v full %v, want %v %v", c.at.Sub(full), c.interval, in, fl, c.wantIn, c.wantFl)
		}
	}
}

// A request's hold: none for non-blocking calls or callers whose limit or
// deadline comes within probeSlot; for one never held, the
// window's; once held, all permits for probeFullSlot (full windows), one
// until probeSlot, then none, whatever the window says.
func TestHoldOf(t *testing.T) {
	now := fakeStart
	bg := context.Background()
	waiter := &request{blocking: true, ctx: bg}
	short, cancel := context.WithDeadline(bg, now.Add(probeSlot/2))
	defer cancel()
	for _, c := range []struct {
		q        *request
		in, full bool
		want     int64
	}{
		{&request{ctx: bg}, true, true, 0},
		{&request{blocking: true, ctx: bg, limit: now.Add(probeSlot / 2)}, true, false, 0},
		{&request{blocking: true, ctx: short}, true, true, 0},
		{waiter, false, false, 0},
		{waiter, true, false, 1},
		{waiter, true, true, holdAll},
		{&request{blocking: true, ctx: bg, heldAt: now.Add(-10 * time.Millisecond), heldFull: true}, false, false, holdAll},
		{&request{blocking: true, ctx: bg, heldAt: now.Add(-probeFullSlot), heldFull: true}, true, true, 1},
		{&request{blocking: true, ctx: bg, heldAt: now.Add(-10 * time.Millisecond)}, true, true, 1},
		{&request{blocking: true, ctx: bg, heldAt: now.Add(-probeSlot)}, true, true, 0},
	} {
		if got := holdOf(c.q, now, c.in, c.full); got != c.want {
			t.Errorf("blocking %v held %v ago (full %v), window in %v full %v: hold %d, want %d",
				c.q.blocking, now.Sub(c.q.heldAt), c.q.heldFull, c.in, c.full, got, c.want)
		}
	}
	at := now.Add(-time.Millisecond)
	if got := holdEnds(at, true, now); !got.Equal(at.Add(probeFullSlot)) {
		t.Errorf("full hold: ends %v after, want %v", got.Sub(at), probeFullSlot)
	}
	if got := holdEnds(at, false, now); !got.Equal(at.Add(probeSlot)) {
		t.Errorf("one permit held: ends %v after, want %v", got.Sub(at), probeSlot)
	}
}

// noteHolds marks the held requests of a call (once per window: a hold of
// an earlier window is replaced), and shortens their hint to the end of
// the hold, counted from the reply; it leaves the others and longer-held
// hints alone.
func TestNoteHolds(t *testing.T) {
	sent := time.Unix(1000, 0)
	replied := sent.Add(2 * time.Millisecond)
	long := time.Minute
	fresh, other := &request{blocking: true}, &request{blocking: true}
	stale := &request{blocking: true, heldAt: sent.Add(-probeEvery)}
	recent := &request{blocking: true, heldAt: sent.Add(-20 * time.Millisecond)}
	batch := []*request{fresh, other, stale, recent}
	b := Reply{Verdicts: []Verdict{
		{Held: true, Res: Result{RetryAfter: long}},
		{Res: Result{RetryAfter: long}},
		{Held: true, Res: Result{RetryAfter: long}},
		{Held: true, Res: Result{RetryAfter: 5 * time.Millisecond}},
	}}
	noteHolds(batch, &b, sent, holdAll, replied)
	if !fresh.heldAt.Equal(sent) || !fresh.heldFull || b.Verdicts[0].Res.RetryAfter != probeFullSlot-2*time.Millisecond {
		t.Errorf("fresh: held at %v full %v, retry after %v; want the call's time, full, %v", fresh.heldAt.Sub(sent), fresh.heldFull, b.Verdicts[0].Res.RetryAfter, probeFullSlot-2*time.Millisecond)
	}
	if !other.heldAt.IsZero() || b.Verdicts[1].Res.RetryAfter != long {
		t.Errorf("not held: marked %v, retry after %v", other.heldAt, b.Verdicts[1].Res.RetryAfter)
	}
	if !stale.heldAt.Equal(sent) {
		t.Errorf("a hold of an earlier window kept (%v before the call)", sent.Sub(stale.heldAt))
	}
	if !recent.heldAt.Equal(sent.Add(-20*time.Millisecond)) || recent.heldFull || b.Verdicts[3].Res.RetryAfter != 5*time.Millisecond {
		t.Errorf("held earlier in the window: held at %v full %v, retry after %v", sent.Sub(recent.heldAt), recent.heldFull, b.Verdicts[3].Res.RetryAfter)
	}
	if d := b.Verdicts[2].Res.RetryAfter; d != probeFullSlot-2*time.Millisecond {
		t.Errorf("stale: retry after %v, want %v", d, probeFullSlot-2*time.Millisecond)
	}
	// A reply that comes after the hold has ended: the least retry.
	late := []*request{{blocking: true}}
	lb := Reply{Verdicts: []Verdict{{Held: true, Res: Result{RetryAfter: long}}}}
	noteHolds(late, &lb, sent, 1, sent.Add(probeSlot+time.Millisecond))
	if d := lb.Verdicts[0].Res.RetryAfter; d != time.Millisecond {
		t.Errorf("reply after the hold ended: retry after %v, want 1ms", d)
	}
	failed := Reply{Err: context.Canceled, Verdicts: []Verdict{{Held: true}}}
	q := &request{blocking: true}
	noteHolds([]*request{q}, &failed, sent, 1, replied)
	if !q.heldAt.IsZero() {
		t.Error("a failed call marked a hold")
	}
}

// A call's hold (batchHold): the least of its requests' holds, and only
// while the limiter is contended (a blocked caller of it refused within
// two intervals), not shared with other writers, with fair wakes on and
// combining, and for one limiter (not a composite).
func TestBatchHold(t *testing.T) {
	var in, full atomic.Bool
	e, c := newFakeEngine(Options{MaxBatch: 128,
		Probe: func(time.Time, time.Duration) (bool, bool) { return in.Load(), full.Load() }})
	lim := &fakeLimiter{fakeTarget: fakeTarget{key: "p"}}
	l := &lane{key: "p"}
	bg := context.Background()
	now := c.Now()
	waiter := func() *request { return newWaiter(bg, lim, 1, time.Time{}) }
	hold := func(batch ...*request) int64 { return e.batchHold(l, batch, now) }
	in.Store(true)
	if k := hold(waiter()); k != 0 {
		t.Errorf("nobody refused yet: hold %d", k)
	}
	e.MarkRefused("p", now.Add(-2*time.Second), time.Second)
	if k := hold(waiter(), waiter()); k != 1 {
		t.Errorf("refused two intervals ago, in a window: hold %d, want 1", k)
	}
	e.MarkRefused("p", now.Add(-2*time.Second-1), time.Second)
	if k := hold(waiter()); k != 0 {
		t.Errorf("refused over two intervals ago: hold %d, want 0", k)
	}
	e.MarkRefused("p", now, time.Second)
	full.Store(true)
	if k := hold(waiter()); k != holdAll {
		t.Errorf("a full window: hold %d, want all", k)
	}
	full.Store(false)
	in.Store(false)
	if k := hold(waiter()); k != 0 {
		t.Errorf("out of a window: hold %d", k)
	}
	in.Store(true)
	held := waiter()
	held.heldAt = now.Add(-probeSlot)
	for _, c := range []struct {
		name  string
		batch []*request
	}{
		{"a non-blocking request", []*request{waiter(), newRequest(bg, lim, 1, false)}},
		{"a waiter whose limit comes within probeSlot", []*request{waiter(), newWaiter(bg, lim, 1, now.Add(probeSlot-1))}},
		{"a waiter held earlier in this window", []*request{waiter(), held}},
		{"a composite's waiter", []*request{newWaiter(bg, &fakeTarget{key: "p"}, 1, time.Time{})}},
	} {
		if k := hold(c.batch...); k != 0 {
			t.Errorf("with %s: hold %d, want 0", c.name, k)
		}
	}
	if k := hold(newWaiter(bg, lim, 1, now.Add(probeSlot))); k != 1 {
		t.Errorf("a waiter whose limit is probeSlot away: hold %d, want 1", k)
	}
	e.lanes.mu.Lock()
	e.lanes.fleets["p"].foreignUntil = now.Add(time.Second)
	e.lanes.mu.Unlock()
	if k := hold(waiter()); k != 0 {
		t.Errorf("shared: hold %d, want 0", k)
	}
	e.lanes.mu.Lock()
	e.lanes.fleets["p"].foreignUntil = now
	e.lanes.mu.Unlock()
	if k := hold(waiter()); k != 1 {
		t.Errorf("no longer shared: hold %d, want 1", k)
	}
	e.unfair = true
	if k := hold(waiter()); k != 0 {
		t.Errorf("fair wakes off: hold %d", k)
	}
	e.unfair, e.maxBatch = false, 1
	if k := hold(waiter()); k != 0 {
		t.Errorf("without combining: hold %d", k)
	}
}

// In a full probe window a contended Go-only limiter's waiters hold every
// permit: the one held calls again probeFullSlot after, holding one, and
// is granted.
func TestProbeFullWindow(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128,
		Probe: func(time.Time, time.Duration) (bool, bool) { return true, true }})
	w := newSimWindow(c, 2, time.Second)
	lim := simLimiter("p", w)
	bg := context.Background()
	if o := e.Try(bg, lim, 2, false); !o.Res.Granted {
		t.Fatalf("filling Try: %+v", o)
	}
	ch := goWait(bg, e, lim, 1, time.Time{})
	waitTimers(t, c, 1003*ms)
	waitFor(t, "census ended", func() bool { f := fleetCopy(e, "p"); return f != nil && f.censuses == 1 })
	c.AdvanceTo(at(1003 * ms))
	calls := lim.seen()
	if got := calls[len(calls)-1].form; got != (Form{Kind: Strict, Hold: holdAll}) {
		t.Errorf("the waiter's call in a full window: %v, want Strict holding all", got)
	}
	waitTimers(t, c, 1003*ms+probeFullSlot)
	c.AdvanceTo(at(1003*ms + probeFullSlot))
	calls = lim.seen()
	if got := calls[len(calls)-1].form; got != (Form{Kind: Strict, Hold: 1}) {
		t.Errorf("its call after probeFullSlot: %v, want Strict holding 1", got)
	}
	if o := recv(t, "caller", ch); !o.Res.Granted || o.Waited != 1003*ms+probeFullSlot {
		t.Errorf("waiter: %+v; want granted after %v", o, 1003*ms+probeFullSlot)
	}
}
