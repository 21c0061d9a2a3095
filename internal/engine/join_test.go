package engine

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// joinRig is an Engine in a probe window (on demand) and a simulated
// limiter of 2 permits a second on a fake clock; the spread's draw is half
// its bound. Its probe windows come every interval (a ProbeBudget of 1;
// at 2 per second the default's come every 50 s).
type joinRig struct {
	e       *Engine
	c       *fakeClock
	w       *simWindow
	lim     *fakeLimiter
	probeIn atomic.Bool
}

func newJoinRig() *joinRig { return newJoinRigLag(0) }

// newJoinRigLag returns a rig whose censuses read the window lag after
// the refusal that starts them (0: at the refusal).
func newJoinRigLag(lag time.Duration) *joinRig {
	r := &joinRig{}
	r.e, r.c = newFakeEngine(Options{MaxBatch: 128, ProbeBudget: 1, CensusLag: lag,
		Probe: func(time.Time, time.Duration) (bool, bool) { return r.probeIn.Load(), false }})
	r.w = newSimWindow(r.c, 2, time.Second)
	r.w.noProbe = true // the probe windows alone: TestSimJoin has the probe record
	r.lim = simLimiter("j", r.w)
	return r
}

// censuses waits until n censuses of the limiter have ended.
func (r *joinRig) censuses(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "census ended", func() bool {
		f := fleetCopy(r.e, "j")
		return f != nil && f.censuses == n
	})
}

// lastCall returns the form of the latest Decide.
func (r *joinRig) lastCall() call {
	s := r.lim.seen()
	return s[len(s)-1]
}

// foreign has Redisson take n permits now.
func (r *joinRig) foreign(t *testing.T, n int64) {
	t.Helper()
	if !r.w.foreign(n) {
		t.Fatalf("%v: no %d permits free for the other writer", since(r.c.Now()), n)
	}
}

// A Redisson writer joins a limiter that only this library wrote. Before,
// the census sees marked records only: the waiters queue in the lane and
// wake together on the head's hint, and in a probe window, while
// contended, their call leaves a permit free, once per waiter and window.
// Once a census sees Redisson's records the limiter counts as shared for
// foreignHold: the waiters' calls hold nothing, a refused waiter wakes on
// its own at its hint plus a draw less hintPad, a new blocking call waits
// a draw before its first call, and a census where Redisson holds all
// steps the spread down. When foreignHold has passed with no foreign
// record seen, the waiters queue and hold again.
func TestJoin(t *testing.T) {
	r := newJoinRig()
	bg := context.Background()
	if o := r.e.Try(bg, r.lim, 2, false); !o.Res.Granted {
		t.Fatalf("filling Try: %+v", o)
	}

	// Go only: the census sees marked records; the waiters queue.
	w1 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitTimers(t, r.c, 1003*ms) // the records free at 1 s, and the scripts' 3 ms
	r.censuses(t, 1)
	if f := fleetCopy(r.e, "j"); f.shared(r.c.Now()) || f.spread != spreadStart {
		t.Fatalf("Go-only census: shared %v, spread %v", f.shared(r.c.Now()), f.spread)
	}
	w2 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitFor(t, "w2 queued", func() bool { return r.e.Waiters("j") == 2 })
	r.probeIn.Store(true)
	r.c.AdvanceTo(at(1003 * ms))
	if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict, Hold: 1}) || len(c.ns) != 2 {
		t.Errorf("the waiters' call in a probe window: %v %v, want Strict holding 1 for both", c.form, c.ns)
	}
	if o := recv(t, "w1", w1); !o.Res.Granted {
		t.Errorf("w1: %+v", o)
	}
	waitTimers(t, r.c, 2006*ms) // w2 was held: it keeps its hint, the next expiry
	r.censuses(t, 2)

	// Redisson takes the permit the hold left free. Out of the windows
	// from here (the next window's hold is TestHoldEveryWindow's), until
	// Go-only again below.
	r.c.AdvanceTo(at(1050 * ms))
	r.foreign(t, 1)
	r.probeIn.Store(false)
	r.c.AdvanceTo(at(2006 * ms))
	if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict}) {
		t.Errorf("w2's call out of the windows: %v, want Strict without a hold", c.form)
	}
	if o := recv(t, "w2", w2); !o.Res.Granted {
		t.Errorf("w2: %+v", o)
	}

	// The next refusal's census sees Redisson's record: shared. w3 was
	// queued for the next expiry's wake at 2053 ms, as on a Go-only
	// limiter; the census moves the lane's wake on by a draw less hintPad,
	// as an own wake's (joined).
	w3 := goWait(bg, r.e, r.lim, 1, time.Time{})
	joinWake := 2053*ms + spreadStart/2 - hintPad
	waitTimers(t, r.c, joinWake)
	r.censuses(t, 3)
	f := fleetCopy(r.e, "j")
	if !f.foreignUntil.Equal(at(2006*ms).Add(foreignHold(time.Second))) || f.spread != spreadStart {
		t.Fatalf("census with an even split: shared until %v, spread %v; want %v, unchanged",
			since(f.foreignUntil), f.spread, 2006*ms+foreignHold(time.Second))
	}

	// Shared: no hold in a probe window; the refused waiter leaves the
	// queue and wakes on its own at its hint plus spread/2 less hintPad.
	r.c.AdvanceTo(at(2050 * ms))
	r.foreign(t, 1)
	r.c.AdvanceTo(at(joinWake))
	if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict}) {
		t.Errorf("the waiters' call while shared: %v, want Strict without a hold", c.form)
	}
	own := joinWake + 944*ms + spreadStart/2 - hintPad // refused at 2065 ms with a 944 ms hint
	waitTimers(t, r.c, own)
	if n := r.e.Waiters("j"); n != 0 {
		t.Errorf("%d queued waiters while shared, want 0", n)
	}

	// A new blocking call waits a draw before its first call.
	calls := len(r.lim.seen())
	ctx4, cancel4 := context.WithCancel(bg)
	w4 := goWait(ctx4, r.e, r.lim, 1, time.Time{})
	waitTimers(t, r.c, joinWake+spreadStart/2, own)
	if n := len(r.lim.seen()); n != calls {
		t.Errorf("a deferred call made %d calls", n-calls)
	}
	cancel4()
	if o := recv(t, "w4", w4); !errors.Is(o.Err, context.Canceled) {
		t.Errorf("w4: %+v", o)
	}
	waitTimers(t, r.c, own)

	// Redisson holds the whole window at the next census: the spread
	// steps down, by exp(2 x (0.5 - 1)).
	r.c.AdvanceTo(at(3009 * ms))
	r.foreign(t, 1)
	r.c.AdvanceTo(at(own))
	next := own + 32*ms + spreadStart/2 - hintPad // the 2050 ms record frees 32 ms later; drawn before the census
	waitTimers(t, r.c, next)
	r.censuses(t, 4)
	f = fleetCopy(r.e, "j")
	down := time.Duration(float64(spreadStart) * math.Exp(-1))
	if f.spread != down || !f.foreignUntil.Equal(at(own).Add(foreignHold(time.Second))) {
		t.Errorf("census with Redisson holding all: spread %v, shared until %v; want %v, %v",
			f.spread, since(f.foreignUntil), down, own+foreignHold(time.Second))
	}
	r.c.AdvanceTo(at(next))
	if o := recv(t, "w3", w3); !o.Res.Granted {
		t.Errorf("w3: %+v", o)
	}

	// foreignHold later, no foreign record seen: Go only again.
	r.c.AdvanceTo(f.foreignUntil)
	if o := r.e.Try(bg, r.lim, 2, false); !o.Res.Granted {
		t.Fatalf("filling Try: %+v", o)
	}
	r.probeIn.Store(true)
	w5 := goWait(bg, r.e, r.lim, 1, time.Time{})
	wake := since(f.foreignUntil) + 1003*ms
	waitTimers(t, r.c, wake)
	r.censuses(t, 5)
	if n := r.e.Waiters("j"); n != 1 {
		t.Errorf("%d queued waiters after the limiter stopped being shared, want 1", n)
	}
	if g := fleetCopy(r.e, "j"); g.shared(r.c.Now()) || g.spread != down {
		t.Errorf("Go-only census after sharing: shared %v, spread %v (want %v: no step when not shared)", g.shared(r.c.Now()), g.spread, down)
	}
	r.c.AdvanceTo(at(wake))
	if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict, Hold: 1}) {
		t.Errorf("the waiters' call, Go only again: %v, want Strict holding 1", c.form)
	}
	if o := recv(t, "w5", w5); !o.Res.Granted {
		t.Errorf("w5: %+v", o)
	}
}

// The controller, census after census on simulated windows: the spread
// goes up while Redisson holds under half of the window's permits (by
// exp(2 x (0.5 - share))), down while over, stays within 45-55%, steps as
// for a share of 0 when a census of a shared limiter sees none of
// Redisson's, moves at most once an interval (a census half an interval
// after a step changes nothing), and stays within [spreadMin, spreadMax].
// The census that first sees Redisson's records (the join) does not step.
func TestJoinSpreadSteps(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	lim := &fakeLimiter{fakeTarget: fakeTarget{key: "s"}}
	e.lanes.mu.Lock()
	e.lanes.fleetOf("s", time.Second, 0, c.Now())
	e.lanes.mu.Unlock()
	census := func(after time.Duration, ours, others int64) time.Duration {
		c.Advance(after)
		now := c.Now()
		lim.mu.Lock()
		lim.records = []Record{record(now.Add(-900*ms), others, false), record(now, ours, true)}
		if others == 0 {
			lim.records = lim.records[1:]
		}
		lim.mu.Unlock()
		e.census(lim, "s")
		return fleetCopy(e, "s").spread
	}
	spread := spreadStart
	step := func(share float64) time.Duration {
		return time.Duration(float64(spread) * math.Exp(spreadGain*(0.5-share)))
	}
	for _, s := range []struct {
		after        time.Duration
		ours, others int64
		want         func() time.Duration
	}{
		{time.Second, 9, 1, func() time.Duration { return spread }},    // the join: no step
		{500 * ms, 8, 2, func() time.Duration { return spread }},       // half an interval on: no step
		{500 * ms, 8, 2, func() time.Duration { return step(0.2) }},    // an interval on: up
		{500 * ms, 8, 2, func() time.Duration { return spread }},       // half an interval on: no step
		{500 * ms, 8, 2, func() time.Duration { return step(0.2) }},    // an interval on: up again
		{time.Second, 2, 8, func() time.Duration { return step(0.8) }}, // down
		{time.Second, 27, 23, func() time.Duration { return spread }},  // 46%: no step
		{time.Second, 23, 27, func() time.Duration { return spread }},  // 54%: no step
		{time.Second, 10, 0, func() time.Duration { return step(0) }},  // shared, none seen: up as for 0
		{500 * ms, 10, 0, func() time.Duration { return spread }},      // within the interval: no step
	} {
		want := s.want()
		if got := census(s.after, s.ours, s.others); got != want {
			t.Errorf("Go %d, Redisson %d, %v on: spread %v, want %v (from %v)", s.ours, s.others, s.after, got, want, spread)
		}
		spread = want
	}
	for range 50 {
		spread = census(time.Second, 0, 10)
	}
	if spread != spreadMin {
		t.Errorf("Redisson holding all for 50 censuses: spread %v, want the floor %v", spread, spreadMin)
	}
	for range 50 {
		spread = census(time.Second, 10, 1)
	}
	if spread != spreadMax {
		t.Errorf("Redisson starved for 50 censuses: spread %v, want the ceiling %v", spread, spreadMax)
	}
	if n := fleetCopy(e, "s").censuses; n != 110 {
		t.Errorf("%d censuses counted, want 110", n)
	}
}

// Every window holds once: a contended Go-only limiter's calls leave a
// permit free in each window (an interval here) until a call is held. The
// held waiter keeps its hint (no call when the slot ends), so the permit
// it left idles until the next expiry, where the next window's first call
// takes it and holds one again.
func TestHoldEveryWindow(t *testing.T) {
	r := newJoinRig()
	r.probeIn.Store(true)
	bg := context.Background()
	if o := r.e.Try(bg, r.lim, 2, false); !o.Res.Granted {
		t.Fatalf("filling Try: %+v", o)
	}
	step := func(to time.Duration, what string) {
		t.Helper()
		r.c.AdvanceTo(at(to))
		if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict, Hold: 1}) {
			t.Fatalf("%s at %v: %v, want Strict holding 1", what, to, c.form)
		}
	}

	// Window 1: both permits free at 1003 ms; one granted, one held.
	w0 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitFor(t, "w0 queued", func() bool { return r.e.Waiters("j") == 1 })
	w1 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitFor(t, "w1 queued", func() bool { return r.e.Waiters("j") == 2 })
	r.censuses(t, 1) // the refusals' census: a Go-only window
	waitTimers(t, r.c, 1003*ms)
	step(1003*ms, "the waiters' first call of window 1")
	if o := recv(t, "w0", w0); !o.Res.Granted {
		t.Fatalf("w0: %+v", o)
	}
	waitTimers(t, r.c, 2006*ms) // w1 held: its hint, w0's record's expiry; nothing at the slot's end

	// Window 2: w0's record frees at 2006 ms; with the permit w1 left,
	// two are free: w1 is granted, one stays free, and a new caller is
	// held for it.
	step(2006*ms, "w1's call, window 2's first")
	if o := recv(t, "w1", w1); !o.Res.Granted {
		t.Fatalf("w1: %+v", o)
	}
	w2 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitTimers(t, r.c, 3009*ms) // held: w1's record's expiry
	if c := r.lastCall(); unprobed(c.form) != (Form{Kind: Strict, Hold: 1}) && unprobed(c.form) != (Form{Kind: Table, Hold: 1}) {
		t.Fatalf("w2's first call: %v, want a hold of 1", c.form)
	}

	// Window 3: the next expiry; its first call holds again.
	step(3009*ms, "w2's call, window 3's first")
	if o := recv(t, "w2", w2); !o.Res.Granted {
		t.Fatalf("w2: %+v", o)
	}
}

// A census reads the window censusLag after the refusal that starts it,
// so that it sees a permit another writer took just after the refusal:
// a Redisson retry on its tick, after the Go fleet's clump of expiries.
// Read at the refusal, the census saw marked records only, and the next
// one, an interval later, came after that permit had expired with the
// clump: in the fleet check a Redisson service went unseen for 4 s.
func TestCensusLagSeesAPermitTakenAfterTheRefusal(t *testing.T) {
	r := newJoinRigLag(censusLag)
	bg := context.Background()
	for _, tm := range []time.Duration{0, 10 * ms} { // two records: they free at 1000 and 1010 ms
		r.c.AdvanceTo(at(tm))
		if o := r.e.Try(bg, r.lim, 1, false); !o.Res.Granted {
			t.Fatalf("filling Try at %v: %+v", tm, o)
		}
	}
	w1 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitFor(t, "w1 queued", func() bool { return r.e.Waiters("j") == 1 })
	w2 := goWait(bg, r.e, r.lim, 1, time.Time{})
	waitFor(t, "w2 queued", func() bool { return r.e.Waiters("j") == 2 })
	r.c.AdvanceTo(at(10*ms + censusLag))
	r.censuses(t, 1) // the first refusal's: Go only
	if f := fleetCopy(r.e, "j"); f.shared(r.c.Now()) {
		t.Fatalf("first census: shared until %v, want Go only", f.foreignUntil)
	}

	// At 1003 ms one permit is free: w1 is granted, w2 refused (its hint:
	// the 1010 ms expiry), and that refusal starts the next census.
	r.c.AdvanceTo(at(1003 * ms))
	if o := recv(t, "w1", w1); !o.Res.Granted {
		t.Fatalf("w1: %+v", o)
	}
	r.c.AdvanceTo(at(1011 * ms))
	r.foreign(t, 1) // Redisson's tick, before w2's wake at 1013 ms
	r.c.AdvanceTo(at(1003*ms + censusLag))
	r.censuses(t, 2)
	if f := fleetCopy(r.e, "j"); !f.shared(r.c.Now()) {
		t.Errorf("census %v after the refusal: not shared; it should have seen Redisson's permit of 1011 ms", censusLag)
	}
	// w2, refused at 1013 ms while the limiter was Go only, is queued in
	// the lane for the 2003 ms expiry (and the scripts' 3 ms): the census
	// that found the limiter shared moved that wake on by a draw (half
	// the spread here) less the 3 ms, as an own wake's.
	if got, want := laneWake(r.e, "j"), at(2006*ms+spreadStart/2-hintPad); !got.Equal(want) {
		t.Errorf("the lane's wake after the join: %v, want %v", since(got), since(want))
	}
	if got := r.e.censusAfter(100 * ms); got != 25*ms {
		t.Errorf("census lag at a 100 ms interval: %v, want a quarter interval, 25ms", got)
	}
	r.c.AdvanceTo(at(2100 * ms))
	if o := recv(t, "w2", w2); !o.Res.Granted {
		t.Errorf("w2: %+v", o)
	}
}

// laneWake returns when lane key's timer fires (zero: not armed).
func laneWake(e *Engine, key string) time.Time {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	if l := e.lanes.m[key]; l != nil {
		return l.wakeAt
	}
	return time.Time{}
}

// unprobed is f without Form.Probe: the hold tests look at the hold alone.
func unprobed(f Form) Form {
	f.Probe = false
	return f
}
