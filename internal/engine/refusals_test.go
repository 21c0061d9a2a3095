package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A local refusal ends when the refused records expire, counted from
// when the refused call was sent, however late the reply came back.
// Without a send time it counts from the reply.
func TestLocalRefusalFromSend(t *testing.T) {
	sent := time.Unix(1000, 0)
	replied := sent.Add(40 * time.Millisecond)
	hint := 100 * time.Millisecond
	expire := sent.Add(hint - hintPad)
	var rs refusals
	rs.note("k", 1, Result{RetryAfter: hint}, sent, replied)
	if res, ok := rs.lookup("k", 1, false, expire.Add(-time.Millisecond)); !ok || res.RetryAfter != time.Millisecond+hintPad {
		t.Errorf("1 ms before the records expire: refused %v with %v, want refused with %v", ok, res.RetryAfter, time.Millisecond+hintPad)
	}
	if _, ok := rs.lookup("k", 1, false, expire); ok {
		t.Errorf("refused locally at %v after the send, when the records expire", expire.Sub(sent))
	}
	rs.note("k", 1, Result{RetryAfter: hint}, time.Time{}, replied)
	if _, ok := rs.lookup("k", 1, false, expire.Add(30*time.Millisecond)); !ok {
		t.Error("no send time: the refusal should count from the reply")
	}
	rs.note("k", 1, Result{Granted: true}, sent, replied)
	if _, ok := rs.lookup("k", 1, false, replied); ok {
		t.Error("a grant should end the local refusal")
	}
}

// refusingTarget is a fake whose Decide refuses with hint, sent at the
// fake clock's time, and says every field of Result when asked for a table.
func refusingTarget(c *fakeClock, key string, hint time.Duration) *fakeTarget {
	return &fakeTarget{key: key, decide: func(form Form, ns []int64) Reply {
		r := verdicts(hint)
		if form.Kind != Single {
			r.Verdicts[0].Res.Limit, r.Verdicts[0].Res.Interval = 10, time.Second
		}
		r.SentAt = c.Now()
		return r
	}}
}

// After Redis refuses n permits with a hint, Try calls for the same n are
// refused locally, with the rest of the hint and no call, until the send
// time plus the hint less hintPad; other counts go to the target.
func TestLocalRefusal(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	f := refusingTarget(c, "r", 100*ms)
	bg := context.Background()
	if o := e.Try(bg, f, 1, false); o.Res.Granted || o.Local || o.RetryAfter != 100*ms {
		t.Fatalf("first Try: %+v; want refused by the target with 100ms", o)
	}
	c.Advance(50 * ms)
	if o := e.Try(bg, f, 1, false); !o.Local || o.Res.Granted || o.RetryAfter != 50*ms {
		t.Errorf("same n 50ms later: %+v; want refused locally with 50ms", o)
	}
	c.AdvanceTo(at(100*ms - hintPad - 1))
	if o := e.Try(bg, f, 1, false); !o.Local || o.RetryAfter != hintPad+1 {
		t.Errorf("1ns before the records expire: %+v; want local, %v", o, hintPad+1)
	}
	if n := len(f.seen()); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
	c.AdvanceTo(at(100*ms - hintPad))
	if o := e.Try(bg, f, 1, false); o.Local {
		t.Errorf("when the records expire: %+v; want a call", o)
	}
	if o := e.Try(bg, f, 2, false); o.Local {
		t.Errorf("another n: %+v; want a call", o)
	}
	if n := len(f.seen()); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// A refusal in the single form cannot answer Allow (it lacks Limit and
// the rest); one in the table form can, with its figures.
func TestLocalRefusalDetail(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	f := refusingTarget(c, "r", 100*ms)
	bg := context.Background()
	e.Try(bg, f, 1, false)
	if o := e.Try(bg, f, 1, true); o.Local {
		t.Errorf("Allow after a single-form refusal: %+v; want a call", o)
	}
	if o := e.Try(bg, f, 1, true); !o.Local || o.Res.Limit != 10 || o.Res.Interval != time.Second {
		t.Errorf("Allow after a table refusal: %+v; want local with Limit 10, Interval 1s", o)
	}
	if n := len(f.seen()); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

// Release and Forget end every local refusal; blocking calls and
// Engines with local refusals off never use them.
func TestLocalRefusalEnds(t *testing.T) {
	bg := context.Background()
	for _, end := range []string{"Release", "Forget"} {
		e, c := newFakeEngine(Options{MaxBatch: 128})
		f := refusingTarget(c, "r", 100*ms)
		e.Try(bg, f, 1, false)
		if end == "Release" {
			if err := e.Release(bg, f, 3); err != nil {
				t.Fatal(err)
			}
		} else {
			e.Forget()
		}
		if o := e.Try(bg, f, 1, false); o.Local {
			t.Errorf("after %s: %+v; want a call", end, o)
		}
		if end == "Release" && f.givenBack() != 3 {
			t.Errorf("Release gave back %d, want 3", f.givenBack())
		}
	}

	e, c := newFakeEngine(Options{MaxBatch: 128, NoLocal: true})
	f := refusingTarget(c, "r", 100*ms)
	e.Try(bg, f, 1, false)
	if o := e.Try(bg, f, 1, false); o.Local {
		t.Errorf("local refusals off: %+v; want a call", o)
	}

	e, c = newFakeEngine(Options{MaxBatch: 1})
	f = refusingTarget(c, "r", 100*ms)
	e.Try(bg, f, 1, false)
	if o := e.Wait(bg, f, 1, at(50*ms), nil); o.Local || len(f.seen()) != 2 {
		t.Errorf("a blocking call after a refusal: %+v, %d calls; want its own call", o, len(f.seen()))
	}
}

// A local refusal never outlasts one interval of the config the refusing
// call read, however long the hint (records stamped a minute ahead).
func TestLocalRefusalAtMostAnInterval(t *testing.T) {
	sent := time.Unix(1000, 0)
	var rs refusals
	rs.note("k", 1, Result{RetryAfter: 61 * time.Second, Interval: time.Second}, sent, sent.Add(time.Millisecond))
	if _, ok := rs.lookup("k", 1, false, sent.Add(time.Second-time.Millisecond)); !ok {
		t.Error("within the interval: not refused locally")
	}
	if res, ok := rs.lookup("k", 1, false, sent.Add(time.Second)); ok {
		t.Errorf("an interval after the send: refused locally for %v more", res.RetryAfter)
	}
	rs.note("k", 1, Result{RetryAfter: 61 * time.Second}, sent, sent)
	if _, ok := rs.lookup("k", 1, false, sent.Add(time.Minute)); !ok {
		t.Error("no interval known: the hint stands")
	}
}

// With more limiters refused at once than maxRefusals, a refusal that
// finds the map full is not kept, and the map is looked over once until
// an eighth of it has ended (not once per refusal, nor once per end);
// then the ended ones make room.
func TestLocalRefusalsFullMapLooksOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	var rs refusals
	for i := range maxRefusals {
		// Refusals ending 100 ms from now, one a µs later than the one
		// before it.
		rs.note(fmt.Sprint("k", i), 1, Result{RetryAfter: 100*time.Millisecond + time.Duration(i)*time.Microsecond + hintPad}, now, now)
	}
	eighth := now.Add(100*time.Millisecond + (sweepFree-1)*time.Microsecond) // when k0..k511 have ended
	for i := range 1000 {
		at := now.Add(time.Duration(i) * (eighth.Sub(now) / 1000)) // up to just before
		rs.note(fmt.Sprint("more", i), 1, Result{RetryAfter: time.Second}, at, at)
	}
	if rs.sweeps != 1 || len(rs.m) != maxRefusals {
		t.Fatalf("1000 refusals into a full map: %d looks, %d kept; want 1 look and none kept", rs.sweeps, len(rs.m)-maxRefusals)
	}
	if _, ok := rs.lookup("more0", 1, false, now); ok {
		t.Error("a refusal that found the map full was kept")
	}
	rs.note("late", 1, Result{RetryAfter: time.Second}, eighth, eighth)
	if rs.sweeps != 2 {
		t.Errorf("%d looks once an eighth had ended, want 2", rs.sweeps)
	}
	if _, ok := rs.lookup("late", 1, false, eighth); !ok {
		t.Error("ended refusals did not make room")
	}
	if _, ok := rs.lookup("k1", 1, false, now); ok {
		t.Error("an ended refusal is still kept")
	}
	if n := len(rs.m); n != maxRefusals-sweepFree+1 {
		t.Errorf("%d kept, want %d", n, maxRefusals-sweepFree+1)
	}
}
