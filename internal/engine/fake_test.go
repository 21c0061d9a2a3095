package engine

import (
	"context"
	"sync"
	"time"
)

// fakeTarget is a Target of the engine's tests: no Redis. Decide answers
// from decide (nil: grant everything) and counts the calls and the
// permits given back.
type fakeTarget struct {
	key    string
	mu     sync.Mutex
	decide func(form Form, ns []int64) Reply
	calls  []call
	given  int64
}

// call is one Decide as the fake saw it.
type call struct {
	form Form
	ns   []int64
}

func (f *fakeTarget) LaneKey() string  { return f.key }
func (f *fakeTarget) MaxWeight() int64 { return 1 }

func (f *fakeTarget) Decide(_ context.Context, form Form, ns []int64) Reply {
	f.mu.Lock()
	f.calls = append(f.calls, call{form, append([]int64(nil), ns...)})
	d := f.decide
	f.mu.Unlock()
	if d != nil {
		return d(form, ns)
	}
	r := Reply{Verdicts: make([]Verdict, len(ns))}
	for i := range ns {
		r.Verdicts[i].Res.Granted = true
	}
	return r
}

func (f *fakeTarget) GiveBack(_ context.Context, n int64) error {
	f.mu.Lock()
	f.given += n
	f.mu.Unlock()
	return nil
}

// seen returns the calls Decide saw so far.
func (f *fakeTarget) seen() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// fakeLimiter is a fakeTarget that is one limiter (a Limiter): its census
// reads records, its lease calls answer from lease.
type fakeLimiter struct {
	fakeTarget
	records []Record
	lease   func(LeaseCall) LeaseReply
}

func (f *fakeLimiter) Name() string { return f.key }

func (f *fakeLimiter) Census(context.Context, int) (time.Duration, []Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Second, append([]Record(nil), f.records...), nil
}

func (f *fakeLimiter) Lease(_ context.Context, c LeaseCall) LeaseReply {
	if f.lease != nil {
		return f.lease(c)
	}
	return LeaseReply{}
}

func (f *fakeLimiter) ReturnLease(_ context.Context, _ []byte, u int64) ReturnReply {
	return ReturnReply{Given: u}
}
