package engine

import (
	"time"
)

// Probe windows (docs/fairness.md, "The rule", step 4). On a limiter
// whose window holds only this library's records, the waiters wake
// together on their hint, and a Redisson waiter starved so far would never
// get a permit for a census to see: Redisson 4.x retries at its timer's
// first 100 ms tick after the permits free, 3.16 3 ms after, and a Go
// waiter takes them first. So in a probe window, the first interval (at
// most half of probeEvery) of every probeEvery by the wall clock, the
// same for every Client, a blocking caller's script call leaves a permit
// free while the limiter is contended (a blocked caller of this Client
// was refused within the last two intervals): it grants a request only while
// one permit stays free after it. A request refused for that alone
// (held) calls again probeSlot after it was held, without the hold; a
// caller is held once per window at most. The blocking calls of the
// other Clients leave the permit too, so it sits free until that retry,
// longer than a 4.x tick: a Redisson waiter takes it, and the next census
// sees its record. What takes it earlier: a non-blocking call, a lease
// call, and the calls of a Client with fair wakes off or WithMaxBatch(1).
//
// A held permit delays one Go waiter per clump of expiries by at most
// probeSlot, not every waiter of the window, so few of a Go-only fleet's
// waits grow (docs/fairness.md, "Cost", has what its p99 showed).
//
// A Redisson call asking more permits than one needs more free: in every
// probeFullEvery-th window a fresh blocking call holds every permit for
// probeFullSlot, then one until probeSlot. probeFullSlot is under a 4.x
// tick, so such a Redisson service may need several of those windows to
// get in; the delay it adds to every Go waiter of such a window is
// probeFullSlot at most.
//
// Calls of non-blocking callers (TryAcquire, Allow) never hold: they
// cannot wait for the permit they leave. Nor does a blocking caller
// whose limit or deadline comes within probeSlot. A batch with one of
// them in it holds nothing.

const (
	probeEvery     = 6 * time.Second
	probeSlot      = 110 * time.Millisecond // a Redisson 4.x timer tick and 10 ms
	probeFullEvery = 10                     // every 10th window (once a minute) holds all
	probeFullSlot  = 50 * time.Millisecond  // under the 60 ms of p99 wait a Go-only fleet may lose (issue 19)
	// holdAll is a hold no window can keep (rates are at most 2^53-1).
	holdAll = 1<<53 - 1
)

// ProbeClock says whether now is in a probe window of a limiter of the
// given interval, and whether that window holds all permits. Tests swap
// it (Options.Probe).
type ProbeClock func(now time.Time, interval time.Duration) (in, full bool)

// probeWindow is the wall clock's probe windows: the first interval, and
// at most half, of every probeEvery; every probeFullEvery-th of them
// full.
func probeWindow(now time.Time, interval time.Duration) (in, full bool) {
	if interval <= 0 {
		interval = time.Second
	}
	ns := now.UnixNano()
	in = time.Duration(ns)%probeEvery < min(interval, probeEvery/2)
	return in, in && (ns/int64(probeEvery))%probeFullEvery == 0
}

// holdOf returns how many permits a call for q at now must leave free:
// none for a non-blocking caller or one that cannot wait probeSlot; for
// a request held in this window (at q.heldAt), what is left of its hold
// (all for probeFullSlot after a hold in a full window, then one until
// probeSlot, then none); for one not held in this window, the window's
// hold.
func holdOf(q *request, now time.Time, in, full bool) int64 {
	if !q.blocking || !q.canWait(now.Add(probeSlot)) {
		return 0
	}
	if !heldLately(q, now) {
		switch {
		case full:
			return holdAll
		case in:
			return 1
		}
		return 0
	}
	since := now.Sub(q.heldAt)
	switch {
	case q.heldFull && since < probeFullSlot:
		return holdAll
	case since < probeSlot:
		return 1
	}
	return 0
}

// heldLately reports whether q was held in the probe window of now: a
// caller is held once per window at most, and a hold of an earlier
// window (a caller that waits long) does not keep it from holding again.
func heldLately(q *request, now time.Time) bool {
	return !q.heldAt.IsZero() && now.Sub(q.heldAt) < probeEvery/2
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
// the least any of its requests must leave (so 0 when one of them is not
// a blocking caller's), or 0 unless only this library writes the limiter,
// one of this Client's blocked callers of it was refused within the last
// two intervals (a waiter wakes at most an interval after its refusal; no
// hold delays a caller while permits are to spare), and fair wakes are
// on.
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
	f := e.lanes.fleets[l.key]
	contended := f != nil && !f.shared(now) && now.Sub(f.refusedAt) <= 2*f.interval
	var interval time.Duration
	if f != nil {
		interval = f.interval
	}
	e.lanes.mu.Unlock()
	if !contended {
		return 0
	}
	in, full := e.probe(now, interval)
	k := int64(holdAll)
	for _, q := range batch {
		k = min(k, holdOf(q, now, in, full))
	}
	return k
}

// noteHolds records, for each request of batch that a call made at sent
// with hold k held, when it was held in this window (and whether all
// permits were held), and has it call again when its hold changes if
// that comes before its hint (counted from now, the reply's time).
func noteHolds(batch []*request, b *Reply, sent time.Time, k int64, now time.Time) {
	if b.Err != nil {
		return
	}
	for i, q := range batch {
		v := &b.Verdicts[i]
		if !v.Held {
			continue
		}
		if !heldLately(q, sent) {
			q.heldAt, q.heldFull = sent, k >= holdAll
		}
		if d := holdEnds(q.heldAt, q.heldFull, sent).Sub(now); d < v.Res.RetryAfter {
			v.Res.RetryAfter = max(d, time.Millisecond)
		}
	}
}
