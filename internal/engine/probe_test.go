package engine

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// A limiter's probe windows come every interval, or every as many
// intervals as hold probeBudget permits, and at least every
// probeMinPeriod: a Go-only fleet gives up at most one permit (the hold's)
// in probeBudget.
func TestProbePeriod(t *testing.T) {
	cases := []struct {
		interval time.Duration
		rate     int64
		want     time.Duration
	}{
		{time.Second, 0, time.Second},       // no rate known: one interval
		{time.Second, 150, time.Second},     // 150 per window
		{time.Second, 1000, time.Second},    // never less than an interval
		{time.Second, 50, 3 * time.Second},  // 150 per window
		{time.Second, 10, 15 * time.Second}, // make demo's limiter
		{time.Second, 40, 4 * time.Second},  // 160: the fewest whole intervals
		{500 * time.Millisecond, 25, 3 * time.Second},
		{100 * time.Millisecond, 50, time.Second}, // at least probeMinPeriod
		{0, 0, time.Second},
		{time.Hour, 1, 150 * time.Hour},
		{time.Duration(math.MaxInt64 / 2), 1, time.Duration(math.MaxInt64)}, // no overflow
	}
	for _, c := range cases {
		if got := probePeriod(c.interval, c.rate, probeBudget); got != c.want {
			t.Errorf("probePeriod(%v, %d) = %v, want %v", c.interval, c.rate, got, c.want)
		}
		if p := probePeriod(c.interval, c.rate, probeBudget); c.rate > 0 && c.interval > 0 && p < time.Duration(math.MaxInt64) &&
			int64(p/c.interval)*c.rate < probeBudget {
			t.Errorf("probePeriod(%v, %d) = %v holds fewer than %d permits", c.interval, c.rate, p, probeBudget)
		}
	}
}

// Every probePeriod of the wall clock is a probe window; the one where a
// minute starts is full.
func TestProbeWindow(t *testing.T) {
	full := time.Unix(6000, 0) // a full window's start for 1 s, and a minute's start
	cases := []struct {
		at       time.Time
		interval time.Duration
		wantFl   bool
	}{
		{full, time.Second, true},
		{full.Add(999 * time.Millisecond), time.Second, true},
		{full.Add(time.Second), time.Second, false},
		{full.Add(999 * time.Millisecond), 100 * time.Millisecond, true}, // at least probeMinPeriod
		{full.Add(time.Second), 100 * time.Millisecond, false},
		{full.Add(probeFullEvery), time.Second, true},
		{full.Add(10 * time.Second), time.Second, false},
		{full.Add(time.Second), 0, false}, // no interval known: 1 s
		{full.Add(probeFullEvery - time.Millisecond), 0, false},
		{full.Add(probeFullEvery - time.Millisecond), 2 * time.Minute, true}, // windows longer than a minute: all full
	}
	for _, c := range cases {
		in, fl := probeWindow(c.at, probePeriod(c.interval, 0, probeBudget))
		if !in || fl != c.wantFl {
			t.Errorf("%v into the cycle, interval %v: in %v full %v, want true %v", c.at.Sub(full), c.interval, in, fl, c.wantFl)
		}
	}
	if probeIndex(full.Add(59*time.Second), time.Minute) != probeIndex(full, time.Minute) {
		t.Error("a window of a one-minute limiter is not one minute long")
	}
	if in, fl := probeWindow(full.Add(9*time.Second), probePeriod(time.Second, 10, probeBudget)); !in || !fl {
		t.Error("the window where a minute starts, of a 10 per second limiter, is not 15 s long and full")
	}
	if probeIndex(full.Add(9*time.Second), probePeriod(time.Second, 10, probeBudget)) != probeIndex(full, probePeriod(time.Second, 10, probeBudget)) {
		t.Error("a window of a 10 per second limiter is not 15 s long")
	}
}

// A limiter's hold (windowHold): in a window with no slot yet, the
// window's (one, all in a full window, none out of a window); in a slot,
// all permits for probeFullSlot after a full window's first hold, one
// (or Options.ProbeHold) until probeSlot; after the slot, none for the rest of its window, and
// the window's hold again in the next.
func TestWindowHold(t *testing.T) {
	now := time.Unix(1000, 500*int64(time.Millisecond))
	for _, c := range []struct {
		name     string
		slotAt   time.Time
		slotFull bool
		in, full bool
		want     int64
	}{
		{"no slot yet", time.Time{}, false, true, false, 1},
		{"no slot yet, full window", time.Time{}, false, true, true, holdAll},
		{"out of a window", time.Time{}, false, false, false, 0},
		{"full slot at 10 ms", now.Add(-10 * time.Millisecond), true, false, false, holdAll},
		{"full slot after probeFullSlot", now.Add(-probeFullSlot), true, true, true, 1},
		{"slot at 10 ms", now.Add(-10 * time.Millisecond), false, true, false, 1},
		{"slot ended in this window", now.Add(-probeSlot), false, true, true, 0},
		{"slot of the last window", now.Add(-time.Second), false, true, false, 1},
	} {
		for _, hold := range []int64{1, 3} { // Options.ProbeHold: one or more where the table says one
			want := c.want
			if want == 1 {
				want = hold
			}
			f := &fleet{interval: time.Second, slotAt: c.slotAt, slotFull: c.slotFull}
			if got := f.windowHold(now, f.period(probeBudget), c.in, c.full, hold); got != want {
				t.Errorf("%s, ProbeHold %d: hold %d, want %d", c.name, hold, got, want)
			}
		}
	}
	// A slot a second ago: the last window at 150 per second, this one
	// at 10 per second (windows of 15 s: 1005 to 1020 s).
	later := now.Add(10 * time.Second)
	for rate, want := range map[int64]int64{150: 1, 10: 0} {
		f := &fleet{interval: time.Second, rate: rate, slotAt: later.Add(-time.Second)}
		if got := f.windowHold(later, f.period(probeBudget), true, false, 1); got != want {
			t.Errorf("rate %d, a slot 1 s before: hold %d, want %d", rate, got, want)
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

// noteHolds starts a slot at the call's time when the call held a request
// and no slot runs (a slot that runs is kept), and shortens the held
// requests' hints to the end of the slot's hold, counted from the reply;
// it leaves the others and shorter hints alone, and a failed call starts
// nothing.
func TestNoteHolds(t *testing.T) {
	e, _ := newFakeEngine(Options{})
	l := &lane{key: "p"}
	sent := time.Unix(1000, 0)
	replied := sent.Add(2 * time.Millisecond)
	long := time.Minute
	e.MarkRefused("p", sent, time.Second)
	slot := func() (time.Time, bool) {
		e.lanes.mu.Lock()
		defer e.lanes.mu.Unlock()
		f := e.lanes.fleets["p"]
		return f.slotAt, f.slotFull
	}
	failed := Reply{Err: context.Canceled, Verdicts: []Verdict{{Held: true}}}
	e.noteHolds(l, &failed, sent, 1, replied)
	if at, _ := slot(); !at.IsZero() {
		t.Error("a failed call started a slot")
	}
	b := Reply{Verdicts: []Verdict{
		{Held: true, Res: Result{RetryAfter: long}},
		{Res: Result{RetryAfter: long}},
		{Held: true, Res: Result{RetryAfter: 5 * time.Millisecond}},
	}}
	e.noteHolds(l, &b, sent, holdAll, replied)
	if at, full := slot(); !at.Equal(sent) || !full {
		t.Errorf("slot at %v full %v; want the call's time, full", at.Sub(sent), full)
	}
	if d := b.Verdicts[0].Res.RetryAfter; d != probeFullSlot-2*time.Millisecond {
		t.Errorf("held: retry after %v, want %v", d, probeFullSlot-2*time.Millisecond)
	}
	if d := b.Verdicts[1].Res.RetryAfter; d != long {
		t.Errorf("not held: retry after %v", d)
	}
	if d := b.Verdicts[2].Res.RetryAfter; d != 5*time.Millisecond {
		t.Errorf("held with a shorter hint: retry after %v", d)
	}
	// A hold within the slot keeps it; the reply after its full part
	// ended: the slot's one-permit part.
	later := Reply{Verdicts: []Verdict{{Held: true, Res: Result{RetryAfter: long}}}}
	e.noteHolds(l, &later, sent.Add(20*time.Millisecond), 1, sent.Add(30*time.Millisecond))
	if at, _ := slot(); !at.Equal(sent) {
		t.Errorf("a hold within the slot moved it by %v", at.Sub(sent))
	}
	if d := later.Verdicts[0].Res.RetryAfter; d != probeFullSlot-30*time.Millisecond {
		t.Errorf("within the slot: retry after %v, want %v (when its full part ends)", d, probeFullSlot-30*time.Millisecond)
	}
	// After the slot, a hold starts a new one.
	next := Reply{Verdicts: []Verdict{{Held: true, Res: Result{RetryAfter: long}}}}
	e.noteHolds(l, &next, sent.Add(probeSlot), 1, sent.Add(probeSlot+time.Millisecond))
	if at, full := slot(); !at.Equal(sent.Add(probeSlot)) || full {
		t.Errorf("after the slot: slot at %v full %v, want %v, not full", at.Sub(sent), full, probeSlot)
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
	for _, c := range []struct {
		name  string
		batch []*request
	}{
		{"a non-blocking request", []*request{waiter(), newRequest(bg, lim, 1, false)}},
		{"a waiter whose limit comes within probeSlot", []*request{waiter(), newWaiter(bg, lim, 1, now.Add(probeSlot-1))}},
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
	w.noProbe = true // the probe windows alone
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
	if got := calls[len(calls)-1].form; unprobed(got) != (Form{Kind: Strict, Hold: holdAll}) {
		t.Errorf("the waiter's call in a full window: %v, want Strict holding all", got)
	}
	waitTimers(t, c, 1003*ms+probeFullSlot)
	c.AdvanceTo(at(1003*ms + probeFullSlot))
	calls = lim.seen()
	if got := calls[len(calls)-1].form; unprobed(got) != (Form{Kind: Strict, Hold: 1}) {
		t.Errorf("its call after probeFullSlot: %v, want Strict holding 1", got)
	}
	if o := recv(t, "caller", ch); !o.Res.Granted || o.Waited != 1003*ms+probeFullSlot {
		t.Errorf("waiter: %+v; want granted after %v", o, 1003*ms+probeFullSlot)
	}
}

// Outside a full slot the requests held keep their hints, so that the
// permit is taken at the next expiry with the permits that free then, not
// at a moment of its own that would become a new expiry instant; only
// when this Client's first request held in a slot would wait more than
// probeRetake past the slot's end does it call again when the slot ends,
// once per slot.
func TestNoteHoldsKeepHints(t *testing.T) {
	sent := time.Unix(1000, 0)
	replied := sent.Add(2 * time.Millisecond)
	end := probeSlot - 2*time.Millisecond // the slot's end, from the reply
	near := end + probeRetake             // the longest hint kept
	for _, c := range []struct {
		name  string
		hints []time.Duration // of the held requests
		want  []time.Duration
	}{
		{"next expiry within probeRetake of the slot's end", []time.Duration{near, time.Minute}, []time.Duration{near, time.Minute}},
		{"a long interval: the first held comes back", []time.Duration{time.Minute, time.Minute}, []time.Duration{end, time.Minute}},
	} {
		e, _ := newFakeEngine(Options{})
		l := &lane{key: "p"}
		e.MarkRefused("p", sent, time.Second)
		b := Reply{Verdicts: []Verdict{{Res: Result{Granted: true, Remaining: 1}}}}
		for _, h := range c.hints {
			b.Verdicts = append(b.Verdicts, Verdict{Held: true, Res: Result{RetryAfter: h}})
		}
		e.noteHolds(l, &b, sent, 1, replied)
		for i, want := range c.want {
			if d := b.Verdicts[1+i].Res.RetryAfter; d != want {
				t.Errorf("%s: held request %d retries after %v, want %v", c.name, i, d, want)
			}
		}
		if f := fleetCopy(e, "p"); !f.slotAt.Equal(sent) || f.slotFull {
			t.Errorf("%s: slot at %v full %v, want the call's time, not full", c.name, f.slotAt.Sub(sent), f.slotFull)
		}
		// Once per slot: a later held call in it keeps its hint.
		again := Reply{Verdicts: []Verdict{{Held: true, Res: Result{RetryAfter: time.Minute}}}}
		e.noteHolds(l, &again, sent.Add(10*time.Millisecond), 1, sent.Add(12*time.Millisecond))
		if c.want[0] == end && again.Verdicts[0].Res.RetryAfter != time.Minute {
			t.Errorf("%s: a second retake in one slot", c.name)
		}
	}
}
