package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Combining (lane.go): a call on an idle lane is sent at once, alone and
// on its caller's goroutine; in the form its caller asks.
func TestIdleLaneSendsAtOnce(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 128})
	f := &fakeTarget{key: "a"}
	bg := context.Background()
	o := e.Try(bg, f, 3, false)
	if !o.Res.Granted || o.Err != nil || o.Batch != 1 {
		t.Fatalf("Try on an idle lane: %+v, want granted alone", o)
	}
	if o = e.Try(bg, f, 2, true); !o.Res.Granted || o.Batch != 1 {
		t.Fatalf("Allow on an idle lane: %+v, want granted alone", o)
	}
	want := []call{{Form{Kind: Single}, []int64{3}}, {Form{Kind: Table}, []int64{2}}}
	if got := f.seen(); !slices.EqualFunc(got, want, callEqual) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if !laneGone(e, "a") {
		t.Error("an idle lane is kept after its call")
	}
}

// While a call is in flight, later callers wait in the lane and go in the
// next call together, in arrival order, at most MaxBatch of them.
func TestBatchArrivalOrder(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 3})
	g := newGate()
	f := &fakeTarget{key: "a", decide: g.decide}
	bg := context.Background()
	first := goTry(bg, e, f, 1)
	h := g.next(t)
	if !callEqual(h.call, call{Form{Kind: Single}, []int64{1}}) {
		t.Fatalf("first call %v, want Single [1]", h.call)
	}
	var later []<-chan Outcome
	for n := int64(2); n <= 6; n++ {
		later = append(later, goTry(bg, e, f, n))
		waitFor(t, "caller queued", func() bool { return e.Pending("a") == int(n-1) })
	}
	h.reply(grants(1))
	if o := recv(t, "first", first); !o.Res.Granted || o.Batch != 1 {
		t.Errorf("first caller: %+v", o)
	}
	for _, want := range [][]int64{{2, 3, 4}, {5, 6}} {
		c := g.next(t)
		if c.form.Kind != Table || !slices.Equal(c.ns, want) {
			t.Errorf("batch %v %v, want Table %v", c.form, c.ns, want)
		}
		c.reply(grants(len(c.ns)))
	}
	for i, ch := range later {
		o := recv(t, "caller", ch)
		batch := 3
		if i >= 3 {
			batch = 2
		}
		if !o.Res.Granted || o.Batch != batch {
			t.Errorf("caller of %d: granted %v in a batch of %d, want granted in %d", i+2, o.Res.Granted, o.Batch, batch)
		}
	}
	waitFor(t, "lane idle", func() bool { return laneGone(e, "a") })
	if n := len(f.seen()); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// A batch holds at most MaxPermits permits of the part that weighs most:
// one record holds them. The next request that would pass it waits for the
// next call, and none behind it jumps ahead.
func TestBatchPermitBound(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide, weight: MaxPermits / 5} // 5 permits a call
	bg := context.Background()
	first := goTry(bg, e, f, 1)
	h := g.next(t)
	var later []<-chan Outcome
	for i, n := range []int64{2, 2, 2, 1} {
		later = append(later, goTry(bg, e, f, n))
		waitFor(t, "caller queued", func() bool { return e.Pending("w") == i+1 })
	}
	h.reply(grants(1))
	recv(t, "first caller", first)
	for _, want := range [][]int64{{2, 2}, {2, 1}} {
		c := g.next(t)
		if !slices.Equal(c.ns, want) {
			t.Errorf("batch %v, want %v", c.ns, want)
		}
		c.reply(grants(len(c.ns)))
	}
	for _, ch := range later {
		if o := recv(t, "caller", ch); !o.Res.Granted {
			t.Errorf("refused: %+v", o)
		}
	}
}

// A queued caller whose context ends leaves at once, with its error and
// no call of its own.
func TestQueuedCallerLeaves(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "a", decide: g.decide}
	bg := context.Background()
	first := goTry(bg, e, f, 1)
	h := g.next(t)
	ctx, cancel := context.WithCancel(bg)
	left := goTry(ctx, e, f, 2)
	waitFor(t, "caller queued", func() bool { return e.Pending("a") == 1 })
	cancel()
	if o := recv(t, "left", left); !errors.Is(o.Err, context.Canceled) || o.Res.Granted {
		t.Errorf("caller that left: %+v, want context.Canceled", o)
	}
	if n := e.Pending("a"); n != 0 {
		t.Errorf("%d pending after the caller left", n)
	}
	h.reply(grants(1))
	if o := recv(t, "first", first); !o.Res.Granted {
		t.Errorf("first caller: %+v", o)
	}
	if got := f.seen(); len(got) != 1 {
		t.Errorf("calls %v, want the first caller's only", got)
	}
	if !laneGone(e, "a") {
		t.Error("lane kept after its last call")
	}
}

// A grant to a caller that left while its call was in flight is given
// back through Target.GiveBack; a refusal to one is not.
func TestGrantToDepartedGivenBack(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "a", decide: g.decide}
	bg := context.Background()
	first := goTry(bg, e, f, 1)
	h := g.next(t)
	ctxB, cancelB := context.WithCancel(bg)
	ctxC, cancelC := context.WithCancel(bg)
	b := goTry(ctxB, e, f, 2)
	waitFor(t, "B queued", func() bool { return e.Pending("a") == 1 })
	c := goTry(ctxC, e, f, 3)
	waitFor(t, "C queued", func() bool { return e.Pending("a") == 2 })
	h.reply(grants(1))
	recv(t, "first caller", first)
	second := g.next(t)
	if !slices.Equal(second.ns, []int64{2, 3}) {
		t.Fatalf("second call %v, want [2 3]", second.ns)
	}
	cancelB()
	cancelC()
	for _, ch := range []<-chan Outcome{b, c} {
		if o := recv(t, "caller", ch); !errors.Is(o.Err, context.Canceled) {
			t.Errorf("departed caller: %+v, want context.Canceled", o)
		}
	}
	second.reply(verdicts(0, 50_000_000)) // B granted, C refused
	waitFor(t, "lane idle", func() bool { return laneGone(e, "a") })
	if n := f.givenBack(); n != 2 {
		t.Errorf("%d permits given back, want B's 2", n)
	}
}

// The caller that runs its idle lane's call on its own goroutine leaves
// when its context ends even while the call is in flight; what the call
// grants then is given back when it ends, and the lane goes on meanwhile.
func TestCallerLeavesStalledCall(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "a", decide: g.decide}
	ctx, cancel := context.WithCancel(context.Background())
	a := goTry(ctx, e, f, 4)
	stalled := g.next(t)
	cancel()
	if o := recv(t, "caller", a); !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("caller: %+v, want context.Canceled", o)
	}
	next := goTry(context.Background(), e, f, 1)
	c := g.next(t)
	if !slices.Equal(c.ns, []int64{1}) {
		t.Errorf("next call %v, want [1]", c.ns)
	}
	c.reply(grants(1))
	if o := recv(t, "next", next); !o.Res.Granted {
		t.Errorf("next caller: %+v", o)
	}
	if n := f.givenBack(); n != 0 {
		t.Errorf("%d given back before the abandoned call ended", n)
	}
	stalled.reply(grants(1))
	waitFor(t, "grant given back", func() bool { return f.givenBack() == 4 },
		func() string { return fmt.Sprint("given back ", f.givenBack()) })
}

func callEqual(a, b call) bool { return a.form == b.form && slices.Equal(a.ns, b.ns) }
