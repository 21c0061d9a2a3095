package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// queueHead starts a blocking call of n on the idle lane of f, refuses
// its first call with hint, and waits until it is the head of the lane's
// waiters with the lane's timer at the hint.
func queueHead(t *testing.T, e *Engine, c *fakeClock, g *gate, f *fakeTarget, n int64, hint time.Duration) <-chan Outcome {
	t.Helper()
	ch := goWait(context.Background(), e, f, n, time.Time{})
	h := g.next(t)
	if !callEqual(h.call, call{Form{Kind: Single}, []int64{n}}) {
		t.Fatalf("first call %v, want Single [%d]", h.call, n)
	}
	h.reply(verdicts(hint))
	waitTimers(t, c, since(c.Now())+hint)
	if w := e.Waiters(f.key); w != 1 {
		t.Fatalf("%d waiters, want 1", w)
	}
	return ch
}

// Blocked callers wait in one FIFO behind one timer at the head's hint;
// new ones join its tail without a call, while a wake's call is in flight
// too. The head's wake serves them in one strict call, in order; the
// refused go back to the head in order, ahead of those that joined during
// the call, and the timer is set to the new head's hint.
func TestWaitersFIFO(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide}
	w1 := queueHead(t, e, c, g, f, 1, 100*ms)
	bg := context.Background()
	w2 := goWait(bg, e, f, 2, time.Time{})
	waitFor(t, "w2 queued", func() bool { return e.Waiters("w") == 2 })
	w3 := goWait(bg, e, f, 3, time.Time{})
	waitFor(t, "w3 queued", func() bool { return e.Waiters("w") == 3 })
	if n := len(f.seen()); n != 1 {
		t.Errorf("%d calls, want the head's only: new blocking calls join the tail", n)
	}

	done := c.goAdvanceTo(at(100 * ms))
	h := g.next(t)
	if !callEqual(h.call, call{Form{Kind: Strict}, []int64{1, 2, 3}}) {
		t.Errorf("wake call %v, want Strict [1 2 3]", h.call)
	}
	w4 := goWait(bg, e, f, 4, time.Time{})
	waitFor(t, "w4 queued during the call", func() bool { return e.Waiters("w") == 4 })
	h.reply(verdicts(0, 50*ms, 80*ms))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w1", w1); !o.Res.Granted || o.Err != nil || o.Batch != 3 || o.Waited != 100*ms {
		t.Errorf("head: %+v; want granted in a batch of 3 after waiting 100ms", o)
	}
	waitTimers(t, c, 150*ms) // the new head's (w2's) hint
	if n := e.Waiters("w"); n != 3 {
		t.Errorf("%d waiters after the call, want the 2 refused and w4", n)
	}

	done = c.goAdvanceTo(at(150 * ms))
	h = g.next(t)
	if !callEqual(h.call, call{Form{Kind: Strict}, []int64{2, 3, 4}}) {
		t.Errorf("second wake %v, want Strict [2 3 4]: the refused first, in order, then the one that joined", h.call)
	}
	h.reply(grants(3))
	recv(t, "AdvanceTo", done)
	for i, x := range []struct {
		ch     <-chan Outcome
		waited time.Duration
	}{{w2, 150 * ms}, {w3, 150 * ms}, {w4, 50 * ms}} {
		if o := recv(t, "waiter", x.ch); !o.Res.Granted || o.Waited != x.waited {
			t.Errorf("waiter %d: granted %v after %v, want granted after %v", i+2, o.Res.Granted, o.Waited, x.waited)
		}
	}
	waitFor(t, "lane idle", func() bool { return laneGone(e, "w") })
	if p := c.pending(); len(p) != 0 {
		t.Errorf("timers left: %v", fmtTimes(p))
	}
}

// A refused waiter whose own hint passes its limit (TryAcquireTimeout)
// returns at once, not granted, without error; one whose hint passes its
// context's deadline returns at once with an error wrapping
// context.DeadlineExceeded. A new blocking call whose limit comes before
// the waiters' next wake returns at once, without a call.
func TestWaiterPastLimitReturns(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide}
	w1 := queueHead(t, e, c, g, f, 1, 100*ms)
	bg := context.Background()
	w2 := goWait(bg, e, f, 1, at(120*ms))
	waitFor(t, "w2 queued", func() bool { return e.Waiters("w") == 2 })
	dctx, cancel := context.WithDeadline(bg, at(130*ms))
	defer cancel()
	w3 := goWait(dctx, e, f, 1, time.Time{})
	waitFor(t, "w3 queued", func() bool { return e.Waiters("w") == 3 })
	if o := e.Wait(bg, f, 1, at(90*ms), nil); o.Res.Granted || o.Err != nil {
		t.Errorf("limit before the next wake: %+v, want not granted, no error", o)
	}
	if n := e.Waiters("w"); n != 3 {
		t.Errorf("%d waiters, want 3: the call past its limit never queued", n)
	}

	done := c.goAdvanceTo(at(100 * ms))
	h := g.next(t)
	h.reply(verdicts(50*ms, 60*ms, 70*ms))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w2", w2); o.Res.Granted || o.Err != nil || o.RetryAfter != 60*ms {
		t.Errorf("past its limit: %+v, want not granted, no error, retry after 60ms", o)
	}
	if o := recv(t, "w3", w3); !errors.Is(o.Err, context.DeadlineExceeded) {
		t.Errorf("past its deadline: %+v, want context.DeadlineExceeded", o)
	}
	waitTimers(t, c, 150*ms)
	if n := e.Waiters("w"); n != 1 {
		t.Errorf("%d waiters, want the head only", n)
	}
	if n := len(f.seen()); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
	done = c.goAdvanceTo(at(150 * ms))
	g.next(t).reply(grants(1))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w1", w1); !o.Res.Granted {
		t.Errorf("head: %+v", o)
	}
}

// A queued waiter whose context ends leaves at once without a call, and
// the next wake serves the others.
func TestQueuedWaiterLeaves(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide}
	w1 := queueHead(t, e, c, g, f, 1, 100*ms)
	ctx, cancel := context.WithCancel(context.Background())
	w2 := goWait(ctx, e, f, 2, time.Time{})
	waitFor(t, "w2 queued", func() bool { return e.Waiters("w") == 2 })
	cancel()
	if o := recv(t, "w2", w2); !errors.Is(o.Err, context.Canceled) {
		t.Errorf("waiter that left: %+v, want context.Canceled", o)
	}
	if n := e.Waiters("w"); n != 1 {
		t.Errorf("%d waiters, want 1", n)
	}
	done := c.goAdvanceTo(at(100 * ms))
	h := g.next(t)
	if !slices.Equal(h.ns, []int64{1}) {
		t.Errorf("wake call %v, want [1]: the waiter that left is not sent", h.ns)
	}
	h.reply(grants(1))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w1", w1); !o.Res.Granted {
		t.Errorf("head: %+v", o)
	}
	if n := len(f.seen()); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

// A blocking call made while the waiters' call is in flight joins the
// waiters; when that call refuses nobody, it goes next, at once, without
// a timer.
func TestWaitersJoinedDuringCall(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide}
	w1 := queueHead(t, e, c, g, f, 1, 100*ms)
	done := c.goAdvanceTo(at(100 * ms))
	h := g.next(t) // w1's wake call, in flight
	w2 := goWait(context.Background(), e, f, 2, time.Time{})
	waitFor(t, "w2 queued behind the call", func() bool { return e.Waiters("w") == 2 })
	h.reply(grants(1))
	h = g.next(t) // on the same run of the lane, before the timer's function returns
	if !callEqual(h.call, call{Form{Kind: Strict}, []int64{2}}) {
		t.Errorf("next call %v, want Strict [2] at once", h.call)
	}
	h.reply(grants(1))
	recv(t, "AdvanceTo", done)
	for _, ch := range []<-chan Outcome{w1, w2} {
		if o := recv(t, "caller", ch); !o.Res.Granted {
			t.Errorf("waiter: %+v", o)
		}
	}
	if since(c.Now()) != 100*ms {
		t.Errorf("clock moved to %v", since(c.Now()))
	}
}

// The lane's timer stays at its time when every waiter has left; a new
// head with an earlier hint sets it earlier.
func TestWaitersTimerEarlier(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	g := newGate()
	f := &fakeTarget{key: "w", decide: g.decide}
	ctx, cancel := context.WithCancel(context.Background())
	w1 := goWait(ctx, e, f, 1, time.Time{})
	g.next(t).reply(verdicts(100 * ms))
	waitTimers(t, c, 100*ms)
	cancel()
	if o := recv(t, "w1", w1); !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("w1: %+v", o)
	}
	w2 := goWait(context.Background(), e, f, 1, time.Time{})
	g.next(t).reply(verdicts(40 * ms))
	waitTimers(t, c, 40*ms)
	done := c.goAdvanceTo(at(40 * ms))
	if h := g.next(t); !callEqual(h.call, call{Form{Kind: Strict}, []int64{1}}) {
		t.Errorf("wake call %v, want Strict [1]", h.call)
	} else {
		h.reply(grants(1))
	}
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w2", w2); !o.Res.Granted || o.Waited != 40*ms {
		t.Errorf("w2: %+v; want granted after 40ms", o)
	}
}
