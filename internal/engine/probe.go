package engine

import (
	"math"
	"time"
)

// Probe windows (docs/fairness.md, "The rule", step 4). Since the probe
// record (proberecord.go), which lets a Redisson call for one permit in,
// a window holds permits only in its full part (probeFullSlot, for calls
// asking more) once a reply told of the probe record, unless the hold is
// more than one (Options.ProbeHold), whose Client writes no probe record:
// what follows is the rule for those, and for a limiter before a reply
// told of it. On a limiter
// whose window holds only this library's records, the waiters wake
// together on their hint, and a Redisson waiter starved so far would
// never get a permit for a census to see: Redisson 3.25.1 and later
// retry at their timer's first tick (10-100 ms) after the permits free,
// 3.25.0 and earlier 3 ms after, and a Go waiter takes them first. So every probePeriod of the wall clock
// (an interval, or as many as the rate needs for probeBudget permits, and
// at least probeMinPeriod) is a probe window, the same for every Client
// (they read the same interval and rate), and in each one, while the
// limiter is contended (a blocked caller of this Client was refused
// within the last two intervals), this Client's blocking calls leave a
// permit free: a call grants a request only while one permit stays free
// after it, until a call of this Client is refused for that alone (held).
// From then on its calls hold the permit for probeSlot (the slot), and
// hold nothing more in that window. The other Clients' lanes wake on the
// same expiries and their calls in the slot are held too (each holds
// until its own first hold of the window), so the permit sits free for
// longer than Redisson's longest tick: a Redisson waiter takes it, and
// the next census sees its record. A Redisson service that starts calling is granted
// within a probe period and a tick of its first refusal, on a contended
// limiter. What takes the permit earlier: a non-blocking call, a lease
// call, and the calls of a Client with fair wakes off or WithMaxBatch(1).
//
// Nobody comes back for the permit when the slot ends: the callers held
// keep their hints, and the next wake after the slot takes it with the
// permits that free then. A caller sent back at the slot's end takes it
// at a moment no record frees at, and that new expiry instant stays:
// every Client's waiters then wake for it each interval (a Go-only
// fleet's records clump on a few instants, and each costs every Client a
// script call), so with a call back in every window the fleet's script
// calls per grant grew window by window (docs/fairness.md, "Cost"). Only
// when the next expiry is more than probeRetake past the slot's end (a
// long interval: its held caller would otherwise wait that much longer),
// this Client's first caller held in the slot calls again when it ends.
//
// What it costs a Go-only fleet: the callers that call in a slot wait up
// to probeSlot more, and the permit left free idles until the next expiry
// after the slot (at most probeRetake past it): about one grant per
// window where the fleet's records expire in one clump per interval. A
// window comes at most once per probeBudget permits of the rate, so that
// is about 1/probeBudget of the grants; the price is a slower join on a
// slow limiter (10 per second: a window every 15 s).
//
// A Redisson call asking more permits than one needs more free: in the
// window where each probeFullEvery (a minute) of the wall clock starts,
// the first hold keeps every permit for probeFullSlot, then one until
// probeSlot. probeFullSlot can be under Redisson's tick, so such a Redisson
// service may need several of those windows to get in; the delay it adds
// to the callers of that slot is probeFullSlot at most.
//
// Calls of non-blocking callers (TryAcquire, Allow) never hold: they
// cannot wait for the permit they leave. Nor does a blocking caller whose
// limit or deadline comes within probeSlot. A batch with one of them in
// it holds nothing.

const (
	probeMinPeriod = time.Second
	probeBudget    = 150                    // a window at most once per this many permits of the rate
	probeSlot      = 110 * time.Millisecond // Redisson's longest timer tick and 10 ms
	probeFullEvery = time.Minute            // the window where each minute starts holds all
	probeFullSlot  = 50 * time.Millisecond  // under the 60 ms of p99 wait a Go-only fleet may lose (issue 19)
	probeRetake    = time.Second            // a held caller waits at most this past its slot for the next expiry
	// holdAll is a hold no window can keep (rates are at most 2^53-1).
	holdAll = 1<<53 - 1
)

// ProbeClock says whether now is in a probe window of a limiter whose
// windows come every period (probePeriod), and whether that window holds
// all permits. Tests swap it (Options.Probe).
type ProbeClock func(now time.Time, period time.Duration) (in, full bool)

// probePeriod is the length of the probe windows of a limiter of rate
// permits per interval: the fewest whole intervals that hold budget
// permits (one when the rate is not known), and at least probeMinPeriod
// (1 s when no interval is known). At most the longest time.Duration.
func probePeriod(interval time.Duration, rate, budget int64) time.Duration {
	if interval <= 0 {
		interval = time.Second
	}
	k := int64(1)
	if rate > 0 && rate < budget {
		k = (budget + rate - 1) / rate
	}
	if interval > time.Duration(math.MaxInt64/k) {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(k)*interval, probeMinPeriod)
}

// period is the length of f's probe windows, of a budget of permits.
func (f *fleet) period(budget int64) time.Duration { return probePeriod(f.interval, f.rate, budget) }

// probeIndex numbers the probe window of now, of windows every period.
func probeIndex(now time.Time, period time.Duration) int64 {
	return now.UnixNano() / int64(period)
}

// probeWindow is the wall clock's probe windows: every period is one,
// and the one where each probeFullEvery of the wall clock starts is full
// (every window, for windows longer than that).
func probeWindow(now time.Time, period time.Duration) (in, full bool) {
	return true, time.Duration(now.UnixNano())%probeFullEvery < period
}

// windowHold returns how many permits this Client's calls on the limiter
// of f, whose probe windows come every period, must leave free at now:
// while a slot runs (from its first hold of a window), all for
// probeFullSlot after a hold in a full window, then hold (Options.ProbeHold,
// one by default) until probeSlot; after the slot, none for the rest of
// that window; in a window with no hold yet, the window's hold.
func (f *fleet) windowHold(now time.Time, period time.Duration, in, full bool, hold int64) int64 {
	if !f.slotAt.IsZero() {
		since := now.Sub(f.slotAt)
		switch {
		case f.slotFull && since < probeFullSlot:
			return holdAll
		case since < probeSlot:
			return hold
		case probeIndex(f.slotAt, period) == probeIndex(now, period):
			return 0
		}
	}
	switch {
	case !in:
		return 0
	case full:
		return holdAll
	}
	return hold
}

// canWait reports whether q's caller waits until at: its limit
// (TryAcquireTimeout) and its context's deadline are not earlier. A
// caller that cannot wait out a hold never holds: no permit it could have
// had is kept from it.
func (q *request) canWait(at time.Time) bool {
	if !q.fits(at) {
		return false
	}
	dl, ok := q.ctx.Deadline()
	return !ok || !dl.Before(at)
}

// holdEnds returns when the hold of a request first held at at, in a full
// window or not, next changes, after now.
func holdEnds(at time.Time, full bool, now time.Time) time.Time {
	if full && now.Before(at.Add(probeFullSlot)) {
		return at.Add(probeFullSlot)
	}
	return at.Add(probeSlot)
}

// batchHold returns the hold of a script call for batch in lane l at now:
// 0 when one of its requests is not a blocking caller's that can wait
// out a slot, when another writer than this library shares the limiter,
// when none of this Client's blocked callers of it was refused within the
// last two intervals (a waiter wakes at most an interval after its
// refusal; no hold delays a caller while permits are to spare), or when
// fair wakes are off; else the window's hold (windowHold), but only that
// of a full window's first probeFullSlot where the limiter has a probe
// record and the hold is one permit.
func (e *Engine) batchHold(l *lane, batch []*request, now time.Time) int64 {
	if e.unfair || e.maxBatch == 1 {
		return 0
	}
	if _, ok := batch[0].p.(Limiter); !ok {
		return 0
	}
	for _, q := range batch {
		if !q.blocking || !q.canWait(now.Add(probeSlot)) {
			return 0 // before the lock: most calls of a busy Client stop here
		}
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[l.key]
	if f == nil || f.shared(now) || now.Sub(f.refusedAt) > 2*f.interval {
		return 0
	}
	period := f.period(e.budget)
	in, full := e.probe(now, period)
	hold := f.windowHold(now, period, in, full, e.hold)
	if f.probeRead && e.hold <= 1 && hold < holdAll {
		// The probe record holds the one permit (proberecord.go); a window
		// holding it too would leave one idle after its slot, which a call
		// at the probe record's retake would take at an instant of its own.
		return 0
	}
	return hold
}

// noteHolds starts this Client's slot at sent, the time of a call with
// hold k that held a request, when no slot runs. A request held in the
// full part of a full slot calls again when that part ends (every permit
// was held: the clump comes back together). Otherwise the requests held
// keep their hints, and the permit left free is taken at the next wake
// after the slot, with the permits that free then; but when this Client's
// first request held in the slot would wait more than probeRetake past
// the slot's end (a long interval), it calls again when the slot ends.
// now is the reply's time.
func (e *Engine) noteHolds(l *lane, b *Reply, sent time.Time, k int64, now time.Time) {
	if b.Err != nil {
		return
	}
	held := false
	for _, v := range b.Verdicts {
		held = held || v.Held
	}
	if !held {
		return
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[l.key]
	if f == nil {
		return
	}
	if f.slotAt.IsZero() || sent.Sub(f.slotAt) >= probeSlot {
		f.slotAt, f.slotFull = sent, k >= holdAll
	}
	if f.slotFull && sent.Before(f.slotAt.Add(probeFullSlot)) {
		d := holdEnds(f.slotAt, true, sent).Sub(now)
		for i := range b.Verdicts {
			if v := &b.Verdicts[i]; v.Held && d < v.Res.RetryAfter {
				v.Res.RetryAfter = max(d, time.Millisecond)
			}
		}
		return
	}
	if f.retakeFor.Equal(f.slotAt) {
		return // this slot's retake is out
	}
	d := holdEnds(f.slotAt, false, sent).Sub(now)
	for i := range b.Verdicts {
		if v := &b.Verdicts[i]; v.Held {
			if v.Res.RetryAfter > d+probeRetake {
				v.Res.RetryAfter, f.retakeFor = max(d, time.Millisecond), f.slotAt
			}
			return // the first held decides
		}
	}
}
