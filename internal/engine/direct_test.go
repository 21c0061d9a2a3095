package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Without combining (MaxBatch 1) every acquisition is its own call, even
// while another is in flight.
func TestDirectNoCombining(t *testing.T) {
	e, _ := newFakeEngine(Options{MaxBatch: 1})
	g := newGate()
	f := &fakeTarget{key: "d", decide: g.decide}
	bg := context.Background()
	a := goTry(bg, e, f, 1)
	ha := g.next(t)
	b := goTry(bg, e, f, 2)
	hb := g.next(t) // while a's is in flight
	if !callEqual(ha.call, call{Form{Kind: Single}, []int64{1}}) || !callEqual(hb.call, call{Form{Kind: Single}, []int64{2}}) {
		t.Errorf("calls %v, %v; want Single [1] and Single [2]", ha.call, hb.call)
	}
	hb.reply(grants(1))
	ha.reply(grants(1))
	for _, ch := range []<-chan Outcome{a, b} {
		if o := recv(t, "caller", ch); !o.Res.Granted || o.Batch != 1 {
			t.Errorf("outcome %+v", o)
		}
	}
	if n := e.Pending("d"); n != 0 {
		t.Errorf("%d pending without combining", n)
	}
	f2 := &fakeTarget{key: "d2"}
	e.Try(bg, f2, 3, true)
	if got := f2.seen(); len(got) != 1 || got[0].form.Kind != Table {
		t.Errorf("Allow without combining: calls %v, want one Table call", got)
	}
}

// A blocked caller without combining sleeps on its own timer until its
// hint has passed, then calls again: each waiter its own timer, no queue.
func TestDirectWaitOwnTimer(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 1})
	g := newGate()
	f := &fakeTarget{key: "d", decide: g.decide}
	bg := context.Background()
	w1 := goWait(bg, e, f, 1, time.Time{})
	g.next(t).reply(verdicts(100 * ms))
	waitTimers(t, c, 100*ms)
	w2 := goWait(bg, e, f, 2, time.Time{})
	if h := g.next(t); !slices.Equal(h.ns, []int64{2}) {
		t.Errorf("second waiter's call %v, want its own [2]", h.ns)
	} else {
		h.reply(verdicts(40 * ms))
	}
	waitTimers(t, c, 40*ms, 100*ms)
	if n := e.Waiters("d"); n != 0 {
		t.Errorf("%d queued waiters without combining", n)
	}
	done := c.goAdvanceTo(at(40 * ms))
	g.next(t).reply(grants(1))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w2", w2); !o.Res.Granted || o.Waited != 40*ms || o.RetryAfter != 0 {
		t.Errorf("second waiter: %+v; want granted after 40ms", o)
	}
	done = c.goAdvanceTo(at(100 * ms))
	h := g.next(t)
	if !callEqual(h.call, call{Form{Kind: Single}, []int64{1}}) {
		t.Errorf("first waiter's retry %v, want Single [1]", h.call)
	}
	h.reply(grants(1))
	recv(t, "AdvanceTo", done)
	if o := recv(t, "w1", w1); !o.Res.Granted || o.Waited != 100*ms {
		t.Errorf("first waiter: %+v; want granted after 100ms", o)
	}
}

// Without combining, a hint past the caller's limit returns at once, not
// granted; past its deadline, at once with context.DeadlineExceeded.
func TestDirectWaitPastLimit(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 1})
	f := &fakeTarget{key: "d", decide: func(Form, []int64) Reply { return verdicts(100 * ms) }}
	bg := context.Background()
	if o := e.Wait(bg, f, 1, at(50*ms), nil); o.Res.Granted || o.Err != nil || o.RetryAfter != 100*ms {
		t.Errorf("past the limit: %+v; want not granted, no error, retry after 100ms", o)
	}
	ctx, cancel := context.WithDeadline(bg, at(50*ms))
	defer cancel()
	if o := e.Wait(ctx, f, 1, time.Time{}, nil); !errors.Is(o.Err, context.DeadlineExceeded) {
		t.Errorf("past the deadline: %+v; want context.DeadlineExceeded", o)
	}
	if p := c.pending(); len(p) != 0 {
		t.Errorf("timers set: %v", fmtTimes(p))
	}
	if n := len(f.seen()); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}
