package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// leaseOpts are the leases of the lease tests: a lease lasts 50 ms, and
// is asked for once 4 permits were asked within about that.
var leaseOpts = LeaseOptions{Duration: 50 * ms, MaxPermits: 100, Share: 0.1, MinDemand: 4}

// leaseRig is an Engine with leases on a fake clock, a limiter whose
// lease calls grant what they want (members m1, m2, ...), and the lease
// events.
type leaseRig struct {
	e      *Engine
	c      *fakeClock
	lim    *fakeLimiter
	events chan LeaseEvent
}

func newLeaseRig(key string) *leaseRig {
	r := &leaseRig{events: make(chan LeaseEvent, 16)}
	o := leaseOpts
	r.e, r.c = newFakeEngine(Options{MaxBatch: 128, Leases: &o, OnLease: func(ev LeaseEvent) { r.events <- ev }})
	r.lim = &fakeLimiter{fakeTarget: fakeTarget{key: key}}
	n := 0
	r.lim.lease = func(call LeaseCall) LeaseReply {
		n++
		now := r.c.Now()
		return LeaseReply{Granted: call.Want, Value: 990, Rate: 1000, Stamp: now.UnixMilli(),
			Interval: time.Second, Reset: time.Second, Member: fmt.Appendf(nil, "m%d", n),
			SentAt: now, RepliedAt: now}
	}
	return r
}

// try is one Try of n permits that must be granted.
func (r *leaseRig) try(t *testing.T, n int64) Outcome {
	t.Helper()
	o := r.e.Try(context.Background(), r.lim, n, false)
	if !o.Res.Granted || o.Err != nil {
		t.Fatalf("Try(%d): %+v", n, o)
	}
	return o
}

// up asks 1 permit 4 times: the 4th call takes a lease of 5 more.
func (r *leaseRig) up(t *testing.T) {
	t.Helper()
	for range 4 {
		r.try(t, 1)
	}
}

// event waits for the next lease event and checks its accounting.
func (r *leaseRig) event(t *testing.T) LeaseEvent {
	t.Helper()
	ev := recv(t, "lease event", r.events)
	if ev.Permits != ev.HandedOut+ev.Returned+ev.Kept {
		t.Errorf("%s lease: %d permits, %d handed out + %d returned + %d kept", ev.End, ev.Permits, ev.HandedOut, ev.Returned, ev.Kept)
	}
	return ev
}

// noEvent checks that no lease event is waiting.
func (r *leaseRig) noEvent(t *testing.T) {
	t.Helper()
	select {
	case ev := <-r.events:
		t.Errorf("unexpected lease event %+v", ev)
	default:
	}
}

// A lease is planned only under steady demand (MinDemand permits asked
// within about a Duration): before that every call goes to Decide. The
// call that takes it asks its own permits (Need) and the lease's (Want
// in all: need plus 1.25 × the demand).
func TestLeasePlanNeedsMinDemand(t *testing.T) {
	r := newLeaseRig("L")
	for i := range 3 {
		if o := r.try(t, 1); o.Leased {
			t.Errorf("call %d leased", i)
		}
	}
	if n, l := len(r.lim.seen()), len(r.lim.leases()); n != 3 || l != 0 {
		t.Fatalf("%d Decides and %d lease calls under MinDemand, want 3 and 0", n, l)
	}
	r.try(t, 1)
	want := LeaseCall{Need: 1, Want: 6, Share: ShareScale / 10}
	if got := r.lim.leases(); len(got) != 1 || got[0].Need != want.Need || got[0].Want != want.Want || got[0].Share != want.Share || got[0].Prev != nil {
		t.Errorf("lease calls %+v, want [%+v]", got, want)
	}
	if n := len(r.lim.seen()); n != 3 {
		t.Errorf("%d Decides, want 3: the lease call granted the 4th", n)
	}
}

// While a lease lives, calls it holds are granted from it without a call;
// Release puts permits back into it, up to what it handed out, without
// GiveBack. At its deadline it ends and gives back what it did not hand
// out, by its member.
func TestLeaseTakeAndExpire(t *testing.T) {
	r := newLeaseRig("L")
	r.up(t)
	for i := range 3 {
		if o := r.try(t, 1); !o.Leased {
			t.Errorf("hand-out %d: %+v, want leased", i, o)
		}
	}
	if err := r.e.Release(context.Background(), r.lim, 1); err != nil {
		t.Fatal(err)
	}
	if n := r.lim.givenBack(); n != 0 {
		t.Errorf("Release gave back %d through the target, want 0: into the lease", n)
	}
	if o := r.try(t, 2); !o.Leased { // 5 - 3 + 1 = 3 left
		t.Errorf("after Release: %+v, want leased", o)
	}
	if n, l := len(r.lim.seen()), len(r.lim.leases()); n != 3 || l != 1 {
		t.Errorf("%d Decides, %d lease calls; want 3 and 1", n, l)
	}
	waitTimers(t, r.c, 50*ms)
	r.noEvent(t)
	r.c.Advance(50 * ms)
	ev := r.event(t)
	if ev.End != LeaseExpired || ev.Permits != 6 || ev.HandedOut != 5 || ev.Returned != 1 || ev.Kept != 0 || ev.Limiter != "L" {
		t.Errorf("event %+v; want expired, 6 permits, 5 handed out, 1 returned", ev)
	}
	if got := r.lim.returns(); len(got) != 1 || got[0] != (returned{"m1", 1}) {
		t.Errorf("returns %v, want [{m1 1}]", got)
	}
	if o := r.try(t, 1); o.Leased {
		t.Errorf("after the deadline: %+v, want not leased", o)
	}
}

// A lease that handed out every permit ends exhausted when the next lease
// call replaces it; nothing is returned.
func TestLeaseExhausted(t *testing.T) {
	r := newLeaseRig("L")
	r.up(t)
	r.try(t, 5) // the rest
	r.try(t, 1) // a new lease call, which ends the first
	ev := r.event(t)
	if ev.End != LeaseExhausted || ev.HandedOut != 6 || ev.Returned != 0 {
		t.Errorf("event %+v; want exhausted, 6 handed out", ev)
	}
	if got := r.lim.leases(); len(got) != 2 || got[1].Prev != nil {
		t.Errorf("lease calls %+v; want 2, the second with nothing to give back", got)
	}
}

// A return whose outcome is unknown is sent again once, after
// leaseReturnPause; one that fails twice leaves the permits Kept, with
// the error.
func TestLeaseReturnRetried(t *testing.T) {
	for _, fails := range []int{1, 2} {
		r := newLeaseRig("L")
		lost := errors.New("connection reset")
		calls := 0
		r.lim.ret = func(_ []byte, u int64) ReturnReply {
			calls++
			if calls <= fails {
				return ReturnReply{Err: lost, Unknown: true}
			}
			return ReturnReply{Given: u}
		}
		r.up(t)
		r.c.Advance(50 * ms) // the lease ends; its return fails
		waitTimers(t, r.c, 50*ms+leaseReturnPause)
		r.noEvent(t)
		r.c.Advance(leaseReturnPause)
		ev := r.event(t)
		if fails == 1 && (ev.Returned != 5 || ev.Kept != 0 || ev.Err != nil) {
			t.Errorf("one failure: %+v; want 5 returned on the retry", ev)
		}
		if fails == 2 && (ev.Returned != 0 || ev.Kept != 5 || !errors.Is(ev.Err, lost)) {
			t.Errorf("two failures: %+v; want 5 kept and the error", ev)
		}
		if got := r.lim.returns(); len(got) != 2 || got[0] != got[1] {
			t.Errorf("returns %v, want the same return twice", got)
		}
	}
}

// DropLease (before this Client's SetRate, UpdateRate, Delete, Expire*)
// ends the live lease at once: no hand-out after it, no lease planned
// until the function it returns runs, which gives back the unused.
func TestDropLeaseEndsLive(t *testing.T) {
	r := newLeaseRig("L")
	r.up(t)
	r.try(t, 1)
	after := r.e.DropLease(r.lim)
	for range 4 {
		if o := r.try(t, 1); o.Leased {
			t.Errorf("hand-out after DropLease: %+v", o)
		}
	}
	if l := len(r.lim.leases()); l != 1 {
		t.Errorf("%d lease calls while dropping, want the first only", l)
	}
	r.noEvent(t)
	after()
	ev := r.event(t)
	if ev.End != LeaseDropped || ev.HandedOut != 2 || ev.Returned != 4 {
		t.Errorf("event %+v; want dropped, 2 handed out, 4 returned", ev)
	}
	if p := r.c.pending(); len(p) != 0 {
		t.Errorf("timers left: %v", fmtTimes(p))
	}
}

// A lease call in flight when DropLease is called is refused when it
// returns, before the function DropLease returned has run (dropping) or
// after (a new gen): its callers get their permits, the lease's rest is
// given back and nothing of it is handed out.
func TestDropLeaseRefusesInFlight(t *testing.T) {
	for _, afterFirst := range []bool{false, true} {
		r := newLeaseRig("L")
		granted := r.lim.lease
		entered, release := make(chan struct{}), make(chan struct{})
		first := true // read and set by one lease call at a time
		r.lim.lease = func(c LeaseCall) LeaseReply {
			if first {
				first = false
				close(entered)
				<-release
			}
			return granted(c)
		}
		for range 3 {
			r.try(t, 1)
		}
		fourth := goTry(context.Background(), r.e, r.lim, 1)
		recv(t, "lease call", entered)
		after := r.e.DropLease(r.lim)
		if afterFirst {
			after()
		}
		close(release)
		if o := recv(t, "fourth", fourth); !o.Res.Granted {
			t.Errorf("the lease call's caller: %+v, want granted", o)
		}
		ev := r.event(t)
		if ev.End != LeaseRefused || ev.Permits != 6 || ev.HandedOut != 1 || ev.Returned != 5 {
			t.Errorf("after first %v: event %+v; want refused, 1 handed out, 5 returned", afterFirst, ev)
		}
		if !afterFirst {
			after()
		}
		r.noEvent(t)
		if o := r.try(t, 1); o.Leased {
			t.Errorf("after first %v: hand-out from a refused lease: %+v", afterFirst, o)
		}
	}
}

// Close ends every live lease and gives back their unused permits before
// it returns; after it no lease is taken or planned.
func TestCloseReturnsLeases(t *testing.T) {
	r := newLeaseRig("A")
	b := &fakeLimiter{fakeTarget: fakeTarget{key: "B"}, lease: r.lim.lease}
	r.up(t)
	for range 4 {
		if o := r.e.Try(context.Background(), b, 1, false); !o.Res.Granted {
			t.Fatalf("B: %+v", o)
		}
	}
	if err := r.e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]LeaseEvent{}
	for range 2 {
		ev := r.event(t)
		got[ev.Limiter] = ev
	}
	for _, k := range []string{"A", "B"} {
		if ev := got[k]; ev.End != LeaseClosed || ev.Returned != 5 || ev.HandedOut != 1 {
			t.Errorf("%s: %+v; want closed, 1 handed out, 5 returned", k, ev)
		}
	}
	for range 4 {
		if o := r.try(t, 1); o.Leased {
			t.Errorf("after Close: %+v", o)
		}
	}
	if la, lb := len(r.lim.leases()), len(b.leases()); la != 1 || lb != 1 {
		t.Errorf("%d and %d lease calls, want 1 each: none after Close", la, lb)
	}
	if p := r.c.pending(); len(p) != 0 {
		t.Errorf("timers left: %v", fmtTimes(p))
	}
}

// A Release beyond what the live lease handed out goes to GiveBack with
// the lease's record to leave alone; without a live lease, with none.
func TestReleaseKeepsLiveLeaseRecord(t *testing.T) {
	r := newLeaseRig("L")
	r.up(t)
	r.try(t, 1) // 2 handed out (the lease call's own and this): a Release of 3 puts 2 back, sends 1
	if err := r.e.Release(context.Background(), r.lim, 3); err != nil {
		t.Fatal(err)
	}
	r.lim.mu.Lock()
	given, keeps := r.lim.given, r.lim.keeps
	r.lim.mu.Unlock()
	if given != 1 || len(keeps) != 1 || string(keeps[0]) != "m1" {
		t.Fatalf("GiveBack of %d keeping %q, want 1 keeping m1", given, keeps)
	}
	waitTimers(t, r.c, 50*ms)
	r.c.Advance(50 * ms)
	r.event(t)
	if err := r.e.Release(context.Background(), r.lim, 1); err != nil {
		t.Fatal(err)
	}
	r.lim.mu.Lock()
	keeps = r.lim.keeps
	r.lim.mu.Unlock()
	if len(keeps) != 2 || keeps[1] != nil {
		t.Errorf("after the lease ended, GiveBack kept %q, want nothing", keeps[len(keeps)-1])
	}
}
