package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// A census weighs each side by its records' permits, within an interval
// of the newest record: Redisson's 5-permit record counts as 5, a marked
// 1-permit record as 1, an undecodable one as 1 of the others', and a
// record an interval or more older than the newest not at all.
func TestSides(t *testing.T) {
	for _, f := range []wire.Format{wire.Bc0I, wire.Lc0I, wire.FI} {
		tag := wire.Tag{1, 2, 3, 4}
		var random []byte
		switch f {
		case wire.FI:
			random = []byte{0, 0, 0x80, 0x3f} // 1.0f: exponent 127, unmarked
		case wire.Bc0I:
			random = make([]byte, 16)
		default:
			random = []byte("0123456789abcdef")
		}
		theirs, err := wire.Encode(f, random, 5)
		if err != nil {
			t.Fatal(err)
		}
		zs := []Record{
			{Score: 1000, Member: string(wire.New(f, tag, 9))}, // an interval before the newest
			{Score: 1500, Member: string(wire.New(f, tag, 1))},
			{Score: 1600, Member: string(wire.New(f, tag, 1))},
			{Score: 1700, Member: string(theirs)},
			{Score: 1800, Member: "x"},
			{Score: 2000, Member: string(wire.New(f, tag, 2))},
		}
		c := sides(zs, time.Second)
		if c.ours != 4 || c.others != 6 || c.atHint {
			t.Errorf("%v: %+v; want ours 4, others 6, not at the hint (an undecodable record)", f, c)
		}
	}
	if c := sides(nil, time.Second); c != (headcount{}) {
		t.Errorf("no records: %+v", c)
	}
}

// A census says the others retry at the hint when each of their records
// is in a layout of Redisson 3.20 or earlier: FI, Lc0I, Bc0I with 8
// random bytes (13 bytes); not for 21-byte Bc0I records (3.21 and later:
// a timer tick from 3.25.1 on), an undecodable record, or none at all.
func TestSidesAtHint(t *testing.T) {
	ours := wire.New(wire.Bc0I, wire.Tag{1}, 1)
	rec := func(f wire.Format, random int) string {
		m, err := wire.Encode(f, make([]byte, random), 1)
		if err != nil {
			t.Fatal(err)
		}
		return string(m)
	}
	for _, c := range []struct {
		name   string
		theirs []string
		want   bool
	}{
		{"3.16.3 (FI)", []string{rec(wire.FI, 4)}, true},
		{"3.16.8 (Lc0I)", []string{rec(wire.Lc0I, 8)}, true},
		{"3.20 (13-byte Bc0I)", []string{rec(wire.Bc0I, 8)}, true},
		{"3.21 and later (21-byte Bc0I)", []string{rec(wire.Bc0I, 16)}, false},
		{"3.20 beside 4.x", []string{rec(wire.Bc0I, 8), rec(wire.Bc0I, 16)}, false},
		{"FI and an undecodable record", []string{rec(wire.FI, 4), "x"}, false},
		{"Go alone", nil, false},
	} {
		zs := []Record{{Score: 1000, Member: string(ours)}}
		for i, m := range c.theirs {
			zs = append(zs, Record{Score: float64(1001 + i), Member: m})
		}
		if got := sides(zs, time.Second).atHint; got != c.want {
			t.Errorf("%s: at the hint %v, want %v", c.name, got, c.want)
		}
	}
}

// The census that finds a limiter shared starts the spread at
// spreadAtHint (3 ms) when the others retry at the hint (Redisson 3.20
// and earlier), stepped once by the share it read: from spreadStart, a
// controller step an interval took about seven seconds to get near there
// while Redisson took most permits, and from 3 ms unstepped Java's first
// 5 s beside 16 Go callers read 28%. Beside a newer Redisson it keeps
// spreadStart.
func TestJoinSpreadByLayout(t *testing.T) {
	for _, c := range []struct {
		f            wire.Format
		random       int
		ours, theirs int
		want         time.Duration
	}{
		{wire.FI, 4, 1, 1, spreadAtHint},
		{wire.Bc0I, 8, 1, 1, spreadAtHint},
		{wire.Bc0I, 8, 9, 1, time.Duration(float64(spreadAtHint) * math.Exp(spreadGain*0.4))},
		{wire.FI, 4, 1, 9, time.Duration(float64(spreadAtHint) * math.Exp(-spreadGain*0.4))},
		{wire.Bc0I, 16, 1, 1, spreadStart},
		{wire.Bc0I, 16, 9, 1, spreadStart},
	} {
		e, clk := newFakeEngine(Options{MaxBatch: 128})
		theirs, err := wire.Encode(c.f, make([]byte, c.random), 1)
		if err != nil {
			t.Fatal(err)
		}
		lim := &fakeLimiter{fakeTarget: fakeTarget{key: "k"}}
		for i := 0; i < c.ours; i++ {
			lim.records = append(lim.records, record(clk.Now(), 1, true))
		}
		for i := 0; i < c.theirs; i++ {
			lim.records = append(lim.records, Record{Score: float64(clk.Now().UnixMilli()), Member: string(theirs)})
		}
		q := newWaiter(context.Background(), lim, 1, time.Time{})
		e.lanes.mu.Lock()
		e.refusedWake(&lane{key: "k"}, q, clk.Now().Add(100*ms), time.Second, 0)
		e.lanes.mu.Unlock()
		waitFor(t, "census ended", func() bool { return fleetCopy(e, "k").censuses == 1 })
		if f := fleetCopy(e, "k"); !f.shared(clk.Now()) || f.spread != c.want {
			t.Errorf("%v with %d random bytes, %d ours to %d theirs: shared %v, spread %v; want shared, %v", c.f, c.random, c.ours, c.theirs, f.shared(clk.Now()), f.spread, c.want)
		}
	}
}

// The spread moves toward an even split: up when the others hold under
// half of the window, down when over, not within the band, within its
// bounds, and at most once an interval. The census that finds the
// limiter shared (a join) does not step: it read a window written before
// the Clients woke on their own.
func TestFleetStep(t *testing.T) {
	now := fakeStart
	next := func() time.Time { now = now.Add(time.Second); return now }
	f := &fleet{interval: time.Second, spread: spreadStart}
	f.step(next(), 49, 1)
	if f.spread != spreadStart || !f.shared(now) {
		t.Fatalf("the join's census: spread %v (from %v), shared %v; want shared, unchanged", f.spread, spreadStart, f.shared(now))
	}
	f.step(next(), 40, 10)
	if f.spread <= spreadStart || !f.shared(now) {
		t.Fatalf("others hold 20%%: spread %v (from %v), shared %v", f.spread, spreadStart, f.shared(now))
	}
	up := f.spread
	f.step(now.Add(time.Second-time.Millisecond), 40, 10)
	if f.spread != up {
		t.Errorf("a second step within the interval: spread moved %v -> %v", up, f.spread)
	}
	f.step(next(), 26, 24)
	if f.spread != up {
		t.Errorf("others hold 48%%: spread moved %v -> %v", up, f.spread)
	}
	f.step(next(), 10, 40)
	if f.spread >= up {
		t.Errorf("others hold 80%%: spread %v, want under %v", f.spread, up)
	}
	for i := 0; i < 100; i++ {
		f.step(next(), 0, 50)
	}
	if f.spread != spreadMin {
		t.Errorf("others hold all: spread %v, want the floor %v", f.spread, spreadMin)
	}
	f.step(next(), 50, 0) // shared, the others starved: up as for a share of 0
	if want := time.Duration(float64(spreadMin) * math.Exp(spreadGain*0.5)); f.spread != want {
		t.Errorf("others starved: spread %v, want %v", f.spread, want)
	}
	for i := 0; i < 100; i++ {
		f.step(next(), 50, 0)
	}
	if f.spread != spreadMax {
		t.Errorf("others starved: spread %v, want the ceiling %v", f.spread, spreadMax)
	}
	g := &fleet{interval: time.Second, spread: spreadStart}
	g.step(next(), 50, 0)
	if g.spread != spreadStart || g.shared(now) {
		t.Errorf("never shared, no others: spread %v, shared %v", g.spread, g.shared(now))
	}
}

// A census that saw other writers keeps the limiter shared for
// foreignFor intervals, and for sharedAtLeast at least, so that a JVM
// a loaded moment starved keeps the fair wakes until a probe window can
// show it again; after that, a census that sees none lets it go.
func TestSharedHold(t *testing.T) {
	now := fakeStart
	for _, c := range []struct {
		interval, hold time.Duration
	}{
		{100 * time.Millisecond, sharedAtLeast},
		{time.Second, sharedAtLeast},
		{10 * time.Second, foreignFor * 10 * time.Second},
	} {
		f := &fleet{interval: c.interval, spread: spreadStart}
		f.step(now, 30, 20)
		if !f.shared(now.Add(c.hold - time.Millisecond)) {
			t.Errorf("interval %v: not shared %v after others were seen, want %v", c.interval, c.hold-time.Millisecond, c.hold)
		}
		if f.shared(now.Add(c.hold + time.Millisecond)) {
			t.Errorf("interval %v: still shared %v after others were seen, want %v", c.interval, c.hold+time.Millisecond, c.hold)
		}
	}
}

// A refused waiter's wake: never before its hint, never past its limit or
// deadline; on its own only when other writers were seen.
func TestRefusedWakeBounds(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128, Draw: randomDraw})
	lim := &fakeLimiter{fakeTarget: fakeTarget{key: "x"}}
	l := &lane{key: "k"}
	wake := c.Now().Add(10 * time.Millisecond)
	q := newRequest(context.Background(), lim, 1, false)
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	at, own := e.refusedWake(l, q, wake, time.Second, 0)
	if own || !at.Equal(wake) {
		t.Errorf("alone: wake %v after the hint, own %v; want on the hint, together", at.Sub(wake), own)
	}
	f := e.lanes.fleets["k"]
	f.foreignUntil, f.spread = c.Now().Add(time.Minute), 30*time.Millisecond
	for i := 0; i < 100; i++ {
		at, own = e.refusedWake(l, q, wake, 0, 0)
		if !own || at.Before(wake.Add(-hintPad)) || at.Sub(wake) >= f.spread-hintPad {
			t.Fatalf("shared: wake %v after the hint, own %v; want within [-%v, %v), own", at.Sub(wake), own, hintPad, f.spread-hintPad)
		}
	}
	q.limit = wake.Add(time.Millisecond)
	if at, _ = e.refusedWake(l, q, wake, 0, 0); at.After(q.limit) {
		t.Errorf("wake %v past the caller's limit", at.Sub(q.limit))
	}
	ctx, cancel := context.WithDeadline(context.Background(), wake)
	defer cancel()
	q = newRequest(ctx, lim, 1, false)
	if at, _ = e.refusedWake(l, q, wake, 0, 0); at.After(wake) {
		t.Errorf("deadline at the hint: wake %v after it", at.Sub(wake))
	}
	if at, own = e.refusedWake(l, newRequest(ctx, &fakeTarget{key: "x+y"}, 1, false), wake, 0, 0); own || !at.Equal(wake) {
		t.Errorf("composite: wake %v after the hint, own %v", at.Sub(wake), own)
	}
	e.unfair = true
	if at, own = e.refusedWake(l, q, wake, 0, 0); own || !at.Equal(wake) {
		t.Errorf("WithFairness(false): wake %v after the hint, own %v", at.Sub(wake), own)
	}
}

func TestFleetsSwept(t *testing.T) {
	var ls lanes
	now := time.Unix(1000, 0)
	for i := 0; i < 1000; i++ {
		f := ls.fleetOf(string(rune('a'+i%26))+string(rune(i)), time.Millisecond, 0, now)
		f.censusAt = now.Add(-time.Second)
	}
	if len(ls.fleets) > 100 {
		t.Errorf("%d fleets kept of 1000 stale ones", len(ls.fleets))
	}
}

// The tally counts permits of the last two intervals, as a rate per
// interval, and forgets older ones.
func TestTally(t *testing.T) {
	var tl tally
	iv := time.Second
	t0 := time.Unix(1000, 0)
	tl.add(t0, iv, 4)
	tl.add(t0.Add(900*time.Millisecond), iv, 6)
	if got := tl.perInterval(t0.Add(time.Second), iv); got != 5 {
		t.Errorf("10 permits in two intervals: %v per interval, want 5", got)
	}
	if got := tl.perInterval(t0.Add(2100*time.Millisecond), iv); got != 3 {
		t.Errorf("2.1 s later, the first slot gone: %v per interval, want 3", got)
	}
	if got := tl.perInterval(t0.Add(5*time.Second), iv); got != 0 {
		t.Errorf("5 s later: %v, want 0", got)
	}
	// A slot reused a lap later starts from zero.
	tl.add(t0.Add(2*time.Second), iv, 1)
	if got := tl.perInterval(t0.Add(2*time.Second), iv); got != 3.5 {
		t.Errorf("after reuse: %v, want 3.5", got)
	}
}

// With WithForeignWaiters, a census steers per waiter: 8 blocked callers
// of this Client granted 40 permits an interval against one foreign
// waiter's 5 in the window is an even split per waiter (no step); against
// 20 the others are ahead (the spread goes down). Without the option the
// sides' permits are compared as they are.
func TestForeignWaitersStep(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128, Foreign: 1})
	key := "k"
	for i := 0; i < 8; i++ {
		e.blocking(key, 1, 0)
	}
	e.lanes.mu.Lock()
	f := e.lanes.fleets[key]
	f.interval = time.Second
	f.foreignUntil = c.Now().Add(time.Hour) // shared already: the join's census does not step
	now := c.Now()
	f.granted.add(now, f.interval, 80) // 40 per interval
	a, b := e.weigh(f, now, 45, 5)
	f.step(now, a, b)
	if f.spread != spreadStart {
		t.Errorf("5 per waiter each side: spread moved to %v", f.spread)
	}
	a, b = e.weigh(f, now, 45, 20)
	f.step(now, a, b)
	if f.spread >= spreadStart {
		t.Errorf("others 20 per waiter, ours 5: spread %v, want under %v", f.spread, spreadStart)
	}
	e.lanes.mu.Unlock()
	e.blocking(key, -1, 20) // a caller granted 20 leaves: counted at the Engine's time
	if got := f.granted.perInterval(c.Now(), f.interval); got != 50 {
		t.Errorf("granted %v per interval, want 50", got)
	}
	c.Advance(2 * time.Second)
	if got := f.granted.perInterval(c.Now(), f.interval); got != 0 {
		t.Errorf("two intervals later: granted %v per interval, want 0", got)
	}
	for i := 0; i < 10; i++ {
		e.blocking(key, -1, 0)
	}
	if f.blocked != 0 {
		t.Errorf("blocked %d after every call left", f.blocked)
	}
	if o, t2 := New(Options{MaxBatch: 128}).weigh(f, now, 45, 5); o != 45 || t2 != 5 {
		t.Errorf("without the option: %v, %v; want 45, 5", o, t2)
	}
}

// A blocked caller's refusal starts a census of its limiter at most every
// censusEvery (half an interval, at least 250 ms); a failed census
// changes nothing.
func TestCensusEvery(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	lim := &fakeLimiter{fakeTarget: fakeTarget{key: "k"}}
	lim.records = []Record{record(c.Now(), 1, false)}
	l := &lane{key: "k"}
	refuse := func() {
		q := newWaiter(context.Background(), lim, 1, time.Time{})
		e.lanes.mu.Lock()
		e.refusedWake(l, q, c.Now().Add(100*ms), time.Second, 0)
		e.lanes.mu.Unlock()
	}
	counted := func(n int) {
		t.Helper()
		waitFor(t, "census ended", func() bool { return fleetCopy(e, "k").censuses == n })
		if got := lim.censusCount(); got != n {
			t.Errorf("%v: %d censuses, want %d", since(c.Now()), got, n)
		}
	}
	refuse()
	counted(1)
	if f := fleetCopy(e, "k"); !f.foreignUntil.Equal(at(foreignHold(time.Second))) {
		t.Errorf("shared until %v, want %v", since(f.foreignUntil), foreignHold(time.Second))
	}
	c.Advance(censusEvery(time.Second) - 1)
	refuse()
	counted(1)
	c.Advance(1)
	refuse()
	counted(2)
	if censusEvery(100*ms) != 250*ms || censusEvery(2*time.Second) != time.Second {
		t.Errorf("censusEvery: %v for 100ms, %v for 2s", censusEvery(100*ms), censusEvery(2*time.Second))
	}

	lim.mu.Lock()
	lim.records = nil // an empty read: nothing changes
	lim.mu.Unlock()
	before := fleetCopy(e, "k")
	c.Advance(time.Second)
	refuse()
	counted(3)
	if f := fleetCopy(e, "k"); f.foreignUntil != before.foreignUntil || f.spread != before.spread {
		t.Errorf("an empty census changed the fleet: %+v, was %+v", f, before)
	}
}

// A new blocking call waits a draw before its first call only while the
// limiter is shared and a blocked caller was refused within two
// intervals (deferFor); never past its limit.
func TestDeferred(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	lim := &fakeLimiter{fakeTarget: fakeTarget{key: "k"}}
	l := &lane{key: "k"}
	bg := context.Background()
	q := newWaiter(bg, lim, 1, time.Time{})
	deferred := func(q *request) (time.Duration, bool) {
		e.lanes.mu.Lock()
		defer e.lanes.mu.Unlock()
		at, ok := e.deferred(l, q)
		return since(at), ok
	}
	if _, ok := deferred(q); ok {
		t.Error("deferred with no fleet")
	}
	e.MarkRefused("k", c.Now(), time.Second)
	if _, ok := deferred(q); ok {
		t.Error("deferred on a limiter not shared")
	}
	e.lanes.mu.Lock()
	e.lanes.fleets["k"].foreignUntil = c.Now().Add(time.Minute)
	e.lanes.mu.Unlock()
	c.Advance(time.Second + 20*ms) // a clump an interval and a little after the refusal
	if d, ok := deferred(q); !ok || d != 1020*ms+spreadStart/2 {
		t.Errorf("shared, refused an interval and 20ms ago: deferred %v to %v; want to %v", ok, d, 1020*ms+spreadStart/2)
	}
	c.Advance(980 * ms) // the refusal two intervals ago, no more
	if d, ok := deferred(q); !ok || d != 2*time.Second+spreadStart/2 {
		t.Errorf("shared, refused two intervals ago: deferred %v to %v; want to %v", ok, d, 2*time.Second+spreadStart/2)
	}
	if d, ok := deferred(newWaiter(bg, lim, 1, at(2*time.Second+ms))); !ok || d != 2*time.Second+ms {
		t.Errorf("a limit 1ms away: deferred %v to %v; want to the limit", ok, d)
	}
	if _, ok := deferred(newWaiter(bg, lim, 1, c.Now())); ok {
		t.Error("deferred with its limit now")
	}
	c.Advance(1)
	if _, ok := deferred(q); ok {
		t.Error("deferred with the last refusal over two intervals ago")
	}
	e.unfair = true
	e.MarkRefused("k", c.Now(), time.Second)
	if _, ok := deferred(q); ok {
		t.Error("deferred with fair wakes off")
	}
}

// A new call whose draw is under the spread's floor is not deferred:
// beside Redisson 3.16 to 3.25, which re-calls at once after a grant, a
// timer's wake and hand-off for under a millisecond lost every clump of
// permits to it (docs/fairness.md, "Redisson's retry"). At the floor no
// call is deferred; above it, the fraction spreadMin/spread of the calls.
func TestDeferredUnderFloor(t *testing.T) {
	for _, c := range []struct {
		draw time.Duration
		want bool
	}{
		{0, false},
		{spreadMin - 1, false},
		{spreadMin, true},
		{20 * ms, true},
	} {
		e, clk := newFakeEngine(Options{MaxBatch: 128, Draw: func(time.Duration) time.Duration { return c.draw }})
		lim := &fakeLimiter{fakeTarget: fakeTarget{key: "k"}}
		e.MarkRefused("k", clk.Now(), time.Second)
		e.lanes.mu.Lock()
		e.lanes.fleets["k"].foreignUntil = clk.Now().Add(time.Minute)
		at, ok := e.deferred(&lane{key: "k"}, newWaiter(context.Background(), lim, 1, time.Time{}))
		e.lanes.mu.Unlock()
		if ok != c.want || (ok && at.Sub(clk.Now()) != c.draw) {
			t.Errorf("draw %v: deferred %v by %v; want %v", c.draw, ok, at.Sub(clk.Now()), c.want)
		}
	}
}

// A refused waiter of a shared limiter wakes at its hint plus the draw
// less hintPad, never before its hint less hintPad.
func TestRefusedWakeDraw(t *testing.T) {
	for _, c := range []struct {
		draw, want time.Duration
	}{
		{0, -hintPad},
		{hintPad, 0},
		{20 * ms, 17 * ms},
	} {
		e, clk := newFakeEngine(Options{MaxBatch: 128, Draw: func(time.Duration) time.Duration { return c.draw }})
		lim := &fakeLimiter{fakeTarget: fakeTarget{key: "k"}}
		e.MarkRefused("k", clk.Now(), time.Second)
		e.lanes.mu.Lock()
		e.lanes.fleets["k"].foreignUntil = clk.Now().Add(time.Minute)
		e.lanes.fleets["k"].censusAt = clk.Now() // no census
		wake := clk.Now().Add(100 * ms)
		got, own := e.refusedWake(&lane{key: "k"}, newWaiter(context.Background(), lim, 1, time.Time{}), wake, 0, 0)
		e.lanes.mu.Unlock()
		if !own || got.Sub(wake) != c.want {
			t.Errorf("draw %v: wake %v after the hint, own %v; want %v, own", c.draw, got.Sub(wake), own, c.want)
		}
	}
}
