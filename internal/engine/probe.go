package engine

import (
	"time"
)

// Probe windows (docs/fairness.md, "The rule", step 4). On a limiter
// whose window holds only this library's records, the waiters wake
// together on their hint, and a Redisson waiter starved so far would never
// get a permit for a census to see: Redisson 4.x retries at its timer's
// first 100 ms tick after the permits free, 3.16 3 ms after, and a Go
// waiter takes them first. So every interval (at least every
// probeMinPeriod) of the wall clock is a probe window, the same for every
// Client, and in each one, while the limiter is contended (a blocked
// caller of this Client was refused within the last two intervals), this
// Client's blocking calls leave a permit free: a call grants a request
// only while one permit stays free after it, until a call of this Client
// is refused for that alone (held). From then on its calls hold the
// permit for probeSlot (the slot), and hold nothing more in that window.
// The other Clients' lanes wake on the same expiries and their calls in
// the slot are held too (each holds until its own first hold of the
// window), so the permit sits free for longer than a 4.x tick: a Redisson
// waiter takes it, and the next census sees its record. A Redisson
// service that starts calling is granted within an interval (at least
// probeMinPeriod) and a tick of its first refusal, on a contended
// limiter. What takes the permit earlier: a non-blocking call, a lease
// call, and the calls of a Client with fair wakes off or WithMaxBatch(1).
//
// Who takes the permit back when nobody did: only the Client whose call
// made the hold, one whose grants left just the hold free or that held
// what it freed (it released the expired records, Freed); its first
// request held in the slot calls again when the slot ends, unless its
// hint brings it back within probeLate of that. A call that found only
// the held permit free, left by another, made nothing: its requests keep
// their hints. So the fleet's Clients do not all call at the slot's end,
// one for the permit and the others refused; a slot costs about one
// script call.
//
// What it costs a Go-only fleet: the callers that call in a slot wait up
// to probeSlot more, about one permit per window comes probeSlot late,
// and a slot's hold and retake cost a script call or two
// (docs/fairness.md, "Cost").
//
// A Redisson call asking more permits than one needs more free: in the
// window where each probeFullEvery (a minute) of the wall clock starts,
// the first hold keeps every permit for
// probeFullSlot, then one until probeSlot. probeFullSlot is under a 4.x
// tick, so such a Redisson service may need several of those windows to
// get in; the delay it adds to the callers of that slot is probeFullSlot
// at most.
//
// Calls of non-blocking callers (TryAcquire, Allow) never hold: they
// cannot wait for the permit they leave. Nor does a blocking caller
// whose limit or deadline comes within probeSlot. A batch with one of
// them in it holds nothing.

const (
	probeMinPeriod = time.Second
	probeSlot      = 110 * time.Millisecond // a Redisson 4.x timer tick and 10 ms
	probeFullEvery = time.Minute            // the window where each minute starts holds all
	probeFullSlot  = 50 * time.Millisecond  // under the 60 ms of p99 wait a Go-only fleet may lose (issue 19)
	probeLate      = 20 * time.Millisecond  // how long a held permit may idle after its slot
	// holdAll is a hold no window can keep (rates are at most 2^53-1).
	holdAll = 1<<53 - 1
)

// ProbeClock says whether now is in a probe window of a limiter of the
// given interval, and whether that window holds all permits. Tests swap
// it (Options.Probe).
type ProbeClock func(now time.Time, interval time.Duration) (in, full bool)

// probePeriod is the length of a limiter's probe windows: its interval,
// and at least probeMinPeriod (1 s when no interval is known).
func probePeriod(interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = time.Second
	}
	return max(interval, probeMinPeriod)
}

// probeIndex numbers the probe window of now.
func probeIndex(now time.Time, interval time.Duration) int64 {
	return now.UnixNano() / int64(probePeriod(interval))
}

// probeWindow is the wall clock's probe windows: every probePeriod is
// one, and the one where each probeFullEvery of the wall clock starts is
// full (every window, for windows longer than that).
func probeWindow(now time.Time, interval time.Duration) (in, full bool) {
	p := probePeriod(interval)
	return true, time.Duration(now.UnixNano())%probeFullEvery < p
}

// windowHold returns how many permits this Client's calls on the limiter
// of f must leave free at now: while a slot runs (from its first hold of
// a window), all for probeFullSlot after a hold in a full window, then one
// until probeSlot; after the slot, none for the rest of that window; in a
// window with no hold yet, the window's hold.
func (f *fleet) windowHold(now time.Time, in, full bool) int64 {
	if !f.slotAt.IsZero() {
		since := now.Sub(f.slotAt)
		switch {
		case f.slotFull && since < probeFullSlot:
			return holdAll
		case since < probeSlot:
			return 1
		case f.slotWin == probeIndex(now, f.interval):
			return 0
		}
	}
	switch {
	case !in:
		return 0
	case full:
		return holdAll
	}
	return 1
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
// fair wakes are off; else the window's hold (windowHold).
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
	in, full := e.probe(now, f.interval)
	return f.windowHold(now, in, full)
}

// noteHolds notes what a call made at sent with hold k did (now is the
// reply's time). A call made the hold when it released the expired
// records whose permit it holds (Freed) or when its grants left just the
// hold free; a Client that made a hold within probeSlot sends its first
// request held in that slot back when the slot ends, if that comes more
// than probeLate before its hint: it takes the permit if nobody did. The
// others held keep their hints. A held request starts this Client's slot
// at sent when none runs. In a full slot every request held calls again
// when its hold changes.
func (e *Engine) noteHolds(l *lane, b *Reply, sent time.Time, k int64, now time.Time) {
	if b.Err != nil {
		return
	}
	held, made := false, false
	for _, v := range b.Verdicts {
		held = held || v.Held
		made = made || v.Freed || v.Res.Granted && v.Res.Remaining <= k
	}
	if !held && !made {
		return
	}
	e.lanes.mu.Lock()
	f := e.lanes.fleets[l.key]
	if f == nil {
		e.lanes.mu.Unlock()
		return
	}
	if made {
		f.madeAt = sent
	}
	if !held {
		e.lanes.mu.Unlock()
		return
	}
	if f.slotAt.IsZero() || sent.Sub(f.slotAt) >= probeSlot {
		f.slotAt, f.slotFull, f.slotWin = sent, k >= holdAll, probeIndex(sent, f.interval)
	}
	ends, full := holdEnds(f.slotAt, f.slotFull, sent), f.slotFull
	owner := !f.madeAt.IsZero() && sent.Sub(f.madeAt) < probeSlot && !f.retryFor.Equal(f.slotAt)
	e.lanes.mu.Unlock()
	for i := range b.Verdicts {
		v := &b.Verdicts[i]
		d := ends.Sub(now)
		if !v.Held || d >= v.Res.RetryAfter {
			continue
		}
		if full {
			v.Res.RetryAfter = max(d, time.Millisecond)
			continue
		}
		if owner && v.Res.RetryAfter > d+probeLate {
			// The Client that made the hold sends one caller back when
			// the slot ends, for the permit if nobody took it, unless its
			// hint brings it back soon after; the others keep their hints.
			v.Res.RetryAfter = max(d, time.Millisecond)
			e.lanes.mu.Lock()
			f.retryFor = f.slotAt
			e.lanes.mu.Unlock()
			return
		}
	}
}
