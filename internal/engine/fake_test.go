package engine

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeTarget is a Target of the engine's tests: no Redis. Decide answers
// from decide (nil: grant everything) and counts the calls and the
// permits given back.
type fakeTarget struct {
	key    string
	weight int64 // MaxWeight; 0: 1
	mu     sync.Mutex
	decide func(form Form, ns []int64) Reply
	calls  []call
	given  int64
	keeps  [][]byte // each GiveBack's record left alone
}

// call is one Decide as the fake saw it.
type call struct {
	form Form
	ns   []int64
}

func (f *fakeTarget) LaneKey() string { return f.key }

func (f *fakeTarget) MaxWeight() int64 { return max(f.weight, 1) }

func (f *fakeTarget) Decide(_ context.Context, form Form, ns []int64) Reply {
	f.mu.Lock()
	f.calls = append(f.calls, call{form, append([]int64(nil), ns...)})
	d := f.decide
	f.mu.Unlock()
	if d != nil {
		return d(form, ns)
	}
	return grants(len(ns))
}

func (f *fakeTarget) GiveBack(_ context.Context, n int64, keep []byte) error {
	f.mu.Lock()
	f.given += n
	f.keeps = append(f.keeps, keep)
	f.mu.Unlock()
	return nil
}

// seen returns the calls Decide saw so far.
func (f *fakeTarget) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// givenBack returns the permits given back so far.
func (f *fakeTarget) givenBack() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.given
}

// fakeLimiter is a fakeTarget that is one limiter (a Limiter): its census
// reads records (or census, when set), its lease calls answer from lease,
// its returns from ret (nil: all given back).
type fakeLimiter struct {
	fakeTarget
	records   []Record
	census    func() (time.Duration, []Record)
	censuses  int
	lease     func(LeaseCall) LeaseReply
	leaseLog  []LeaseCall
	ret       func(member []byte, u int64) ReturnReply
	returnLog []returned
}

// returned is one ReturnLease as the fake saw it.
type returned struct {
	member string
	u      int64
}

func (f *fakeLimiter) Name() string { return f.key }

func (f *fakeLimiter) Census(context.Context, int) (time.Duration, []Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.censuses++
	if f.census != nil {
		iv, zs := f.census()
		return iv, zs, nil
	}
	return time.Second, append([]Record(nil), f.records...), nil
}

func (f *fakeLimiter) Lease(_ context.Context, c LeaseCall) LeaseReply {
	f.mu.Lock()
	f.leaseLog = append(f.leaseLog, c)
	l := f.lease
	f.mu.Unlock()
	if l != nil {
		return l(c)
	}
	return LeaseReply{}
}

func (f *fakeLimiter) ReturnLease(_ context.Context, member []byte, u int64) ReturnReply {
	f.mu.Lock()
	f.returnLog = append(f.returnLog, returned{string(member), u})
	r := f.ret
	f.mu.Unlock()
	if r != nil {
		return r(member, u)
	}
	return ReturnReply{Given: u}
}

// leases returns the lease calls so far.
func (f *fakeLimiter) leases() []LeaseCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]LeaseCall(nil), f.leaseLog...)
}

// returns returns the lease returns so far.
func (f *fakeLimiter) returns() []returned {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]returned(nil), f.returnLog...)
}

// censusCount returns how many censuses read the fake.
func (f *fakeLimiter) censusCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.censuses
}

// gate holds each Decide of a fake until the test answers it: Decide
// hands its call to the test (next) and waits for the Reply the test
// gives that call (held.reply).
type gate struct{ in chan *held }

// held is one Decide that a gate holds.
type held struct {
	call
	out chan Reply
}

func newGate() *gate { return &gate{in: make(chan *held)} }

func (g *gate) decide(form Form, ns []int64) Reply {
	h := &held{call{form, append([]int64(nil), ns...)}, make(chan Reply)}
	g.in <- h
	return <-h.out
}

// next waits for the next Decide and returns it; it fails the test if
// none comes.
func (g *gate) next(t *testing.T) *held {
	t.Helper()
	return recv[*held](t, "a Decide", g.in)
}

// reply answers h.
func (h *held) reply(r Reply) { h.out <- r }

// grants is a Reply that grants k requests.
func grants(k int) Reply {
	r := Reply{Verdicts: make([]Verdict, k)}
	for i := range r.Verdicts {
		r.Verdicts[i].Res.Granted = true
	}
	return r
}

// verdicts is a Reply of one verdict per hint: 0 grants, a hint refuses
// with that wait.
func verdicts(hints ...time.Duration) Reply {
	r := Reply{Verdicts: make([]Verdict, len(hints))}
	for i, h := range hints {
		r.Verdicts[i].Res = Result{Granted: h == 0, RetryAfter: h}
	}
	return r
}

// goWait runs e.Wait on a goroutine of its own and returns where its
// Outcome arrives.
func goWait(ctx context.Context, e *Engine, t Target, n int64, limit time.Time) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() { ch <- e.Wait(ctx, t, n, limit, nil) }()
	return ch
}

// goTry runs e.Try on a goroutine of its own and returns where its
// Outcome arrives.
func goTry(ctx context.Context, e *Engine, t Target, n int64) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() { ch <- e.Try(ctx, t, n, false) }()
	return ch
}

// newFakeEngine returns an Engine on a fake clock with o (its Time set):
// local refusals read the fake clock too, and the spread's draw is half
// its bound unless o says.
func newFakeEngine(o Options) (*Engine, *fakeClock) {
	c := newFakeClock()
	o.Time = c
	if o.CensusLag == 0 {
		o.CensusLag = -1 // a census at the refusal, unless a test asks for a lag
	}
	if o.Draw == nil {
		o.Draw = func(bound time.Duration) time.Duration { return bound / 2 }
	}
	return New(o), c
}

// laneGone reports whether the Engine dropped lane key: nothing in it is
// queued, in flight or armed.
func laneGone(e *Engine, key string) bool {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	return e.lanes.m[key] == nil
}

// fleetCopy returns a copy of the fleet of lane key (nil: none).
func fleetCopy(e *Engine, key string) *fleet {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[key]
	if f == nil {
		return nil
	}
	c := *f
	return &c
}
