// Package engine decides acquisitions above the script call: the lanes
// that combine concurrent callers of one limiter into one script call,
// the FIFO of blocked callers and its timer, the uncombined path, local
// refusals, fair wakes beside other writers with their census and probe
// windows, and leased permits. It never talks to Redis itself: every
// Redis call goes through a Target (one script call per Decide), so the
// engine is tested against a fake Target with an injected clock. It never
// imports the root package; the root turns its verdicts into Results and
// Decisions.
package engine

import (
	"context"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// MaxPermits is the most permits one request or record holds.
const MaxPermits = wire.MaxPermits

// Result is the engine's view of one acquisition's outcome; the root's
// ratelimiter.Result has the same fields and meanings.
type Result struct {
	Granted    bool
	Limit      int64
	Interval   time.Duration
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
	Part       int
	Parts      []PartResult
}

// PartResult is one composite part's side of a Result (the root's
// ratelimiter.PartResult).
type PartResult struct {
	Permits    int64
	Limit      int64
	Interval   time.Duration
	Remaining  int64
	Short      bool
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Verdict is one script call's decision on one request of a batch.
type Verdict struct {
	Res  Result
	Err  error // an error for this request only (ErrPermitsExceedRate)
	Held bool  // refused only to hold permits free (a probe window's hold)
}

// Reply is what one script call decided: a Verdict per request, or Err
// for all of them.
type Reply struct {
	Verdicts  []Verdict
	Err       error // for every request: Redis, config or state errors
	RoundTrip time.Duration
	SentAt    time.Time // the Client's clock (Options.Clock) when the deciding call was sent; zero: not known
	Probe     ProbeNote // Form.Probe's answer
}

// window returns the limiter's interval and rate from the first of r's
// verdicts that carries them (a table reply's all do), 0 and 0 when none
// does.
func (r Reply) window() (time.Duration, int64) {
	for _, v := range r.Verdicts {
		if v.Res.Interval > 0 {
			return v.Res.Interval, v.Res.Limit
		}
	}
	return 0, 0
}

// Kind is the reply form a script call is asked for.
type Kind uint8

const (
	// Single: one request, granted or refused with a hint, no other field.
	Single Kind = iota
	// Table: every field of Result for each request, decided in order.
	Table
	// Strict: Table, and no grant after the first refusal (queued waiters).
	Strict
)

// Form is how a script call decides its batch: its Kind and, for Table
// and Strict, a hold: a request is granted only while Hold permits stay
// free after it (a probe window), and one refused for that alone is Held.
// Probe (Table and Strict) lets the call write the probe record
// (probe.go) and asks what it finds of it (Reply.Probe).
type Form struct {
	Kind  Kind
	Hold  int64
	Probe bool
}

// ProbeNote is what a call with Form.Probe found of the limiter's probe
// record (wire.ProbeRecord) after it ran.
type ProbeNote struct {
	Read  bool          // the reply carried it (a Target may not)
	Found bool          // one was in place when the call ran
	There bool          // one is in place after it
	Wrote bool          // this call wrote it (anew, when Found)
	Until time.Duration // from when the call was sent until it expires (below 0: expired, held)
}

// Target is what a lane's script calls act on: one limiter or several at
// once (a composite). The root implements it over the Lua scripts.
type Target interface {
	// LaneKey names the Target's lane; targets with equal keys share one.
	LaneKey() string
	// Decide makes one script call for the permits ns, in order, and
	// returns a verdict for each (or an error for all). With Kind Single,
	// len(ns) is 1.
	Decide(ctx context.Context, form Form, ns []int64) Reply
	// GiveBack gives n permits back in Redis (one script call): permits
	// granted to callers that had gone, or the rest of Engine.Release. It
	// takes them out of this Client's own records in the window first
	// (the root's Release states the rule), never out of keep (a live
	// lease's record; nil: none).
	GiveBack(ctx context.Context, n int64, keep []byte) error
	// MaxWeight is the most permits one asked permit takes from a part
	// (a weighted composite's largest weight; 1 otherwise).
	MaxWeight() int64
}

// Limiter is a Target that is one limiter: fair wakes read its window
// (Census) and leases are taken of it. A composite is not one.
type Limiter interface {
	Target
	// Name is the limiter's name, for lease events.
	Name() string
	// Census reads the limiter's interval and its window's newest records
	// (at most max, in score order).
	Census(ctx context.Context, max int) (time.Duration, []Record, error)
	// Lease makes one lease call (lua/lease.lua).
	Lease(ctx context.Context, call LeaseCall) LeaseReply
	// ReturnLease gives back u unused permits of the lease record member
	// (lua/lease_end.lua, idempotent) and returns how many it gave back.
	ReturnLease(ctx context.Context, member []byte, u int64) ReturnReply
}

// Record is one permit record of a census.
type Record struct {
	Score  float64
	Member string
}

// Options configure an Engine; the root sets them from its options.
type Options struct {
	// MaxBatch is the most requests of one lane one script call decides;
	// 1: no combining (every acquisition its own call, every waiter on its
	// own timer).
	MaxBatch int
	// Unfair turns fair wakes off.
	Unfair bool
	// Foreign is WithForeignWaiters' count; 0: an even split.
	Foreign int
	// NoLocal turns local refusals off.
	NoLocal bool
	// Clock is the Client's clock (WithClock): local refusals are dated
	// by it against the sent time of calls, which the Target reads from
	// it too. nil: Time's Now.
	Clock func() time.Time
	// Time is the Engine's own time: when waiters wake, how long they
	// waited, leases' deadlines, the fleet's census and spread (see
	// Clock, the interface). nil: the runtime's. Tests inject a fake.
	Time Clock
	// Draw returns the delay of one waiter's own wake beside other
	// writers: uniform in [0, bound), bound > 0. nil: math/rand/v2's.
	// Tests inject a fixed one.
	Draw func(bound time.Duration) time.Duration
	// Probe says whether now is in a probe window; nil: the wall clock's.
	Probe ProbeClock
	// ProbeBudget is the fewest permits of the rate between two probe
	// windows (probePeriod); 0: probeBudget (150). Tests of holds in
	// every interval set 1.
	ProbeBudget int64
	// ProbeHold is how many permits a probe window's slot leaves free
	// (after a full window's first part); 0: one.
	ProbeHold int64
	// CensusLag is how long after the refusal that starts it a census
	// reads the window (censusAfter); 0: censusLag (150 ms); negative: at
	// once (tests that step the controller census by census).
	CensusLag time.Duration
	// Leases turns leased permits on; nil: off.
	Leases *LeaseOptions
	// OnLease reports every lease when it has ended; may be nil.
	OnLease func(LeaseEvent)
}

// Engine is the combining state of one Client. It is safe for concurrent
// use.
type Engine struct {
	maxBatch int
	unfair   bool
	foreign  int
	noLocal  bool
	clock    func() time.Time // the Client's (Options.Clock)
	time     Clock            // the Engine's (Options.Time); never nil
	draw     func(time.Duration) time.Duration
	probe    ProbeClock
	budget   int64         // Options.ProbeBudget
	hold     int64         // Options.ProbeHold
	lag      time.Duration // Options.CensusLag; 0: at once
	onLease  func(LeaseEvent)
	refusals refusals
	lanes    lanes
	leases   *leasing // nil: off
}

// New returns an Engine with o.
func New(o Options) *Engine {
	e := &Engine{maxBatch: o.MaxBatch, unfair: o.Unfair, foreign: o.Foreign, noLocal: o.NoLocal,
		clock: o.Clock, time: o.Time, draw: o.Draw, probe: o.Probe, budget: o.ProbeBudget, hold: o.ProbeHold, onLease: o.OnLease}
	if e.maxBatch < 1 {
		e.maxBatch = 1
	}
	if e.time == nil {
		e.time = realClock{}
	}
	if e.clock == nil {
		e.clock = e.time.Now
	}
	if e.draw == nil {
		e.draw = randomDraw
	}
	if e.probe == nil {
		e.probe = probeWindow
	}
	if e.budget <= 0 {
		e.budget = probeBudget
	}
	if e.hold <= 0 {
		e.hold = 1
	}
	switch {
	case o.CensusLag == 0:
		e.lag = censusLag
	case o.CensusLag > 0:
		e.lag = o.CensusLag
	}
	if o.Leases != nil {
		e.leases = newLeasing(*o.Leases, e.time)
	}
	return e
}

// Leasing reports whether leases are on.
func (e *Engine) Leasing() bool { return e.leases != nil }
