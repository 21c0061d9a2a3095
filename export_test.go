package ratelimiter

import (
	"context"
	"time"
)

// Test-only views of the combining state (combine_lane.go), for tests that must
// know a request is queued before they go on.

// Pending returns the acquisitions of l waiting for the next script call.
func Pending(l *Limiter) int {
	l.c.lanes.mu.Lock()
	defer l.c.lanes.mu.Unlock()
	if ln := l.c.lanes.m[l.laneKey()]; ln != nil {
		return len(ln.pending)
	}
	return 0
}

// Waiters returns the blocked callers queued on l, those in a script call
// included.
func Waiters(l *Limiter) int {
	l.c.lanes.mu.Lock()
	defer l.c.lanes.mu.Unlock()
	if ln := l.c.lanes.m[l.laneKey()]; ln != nil {
		return len(ln.waiting) + ln.flying
	}
	return 0
}

// CompositePending is Pending for the lane of a composite's set of parts.
func CompositePending(a *Composite) int {
	a.c.lanes.mu.Lock()
	defer a.c.lanes.mu.Unlock()
	if ln := a.c.lanes.m[a.laneKey()]; ln != nil {
		return len(ln.pending)
	}
	return 0
}

// CompositeWaiters is Waiters for a composite's set of parts.
func CompositeWaiters(a *Composite) int {
	a.c.lanes.mu.Lock()
	defer a.c.lanes.mu.Unlock()
	if ln := a.c.lanes.m[a.laneKey()]; ln != nil {
		return len(ln.waiting) + ln.flying
	}
	return 0
}

// AcquireAllSource is lua/acquire_all.lua.
var AcquireAllSource = luaAcquireAll

// GrantedAny is grantedAny.
var GrantedAny = grantedAny

// Lanes returns how many limiters c keeps combining state for, after
// dropping the idle ones as a sweep in lanes.get does.
func Lanes(c *Client) int {
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	for _, l := range c.lanes.m {
		c.lanes.dropIfIdle(l)
	}
	return len(c.lanes.m)
}

// HintDuration is hintDuration.
var HintDuration = hintDuration

// ExceedsRate is exceedsRate: the Go home of the rule acquire_all.lua
// applies to n × weight against a part's rate.
var ExceedsRate = exceedsRate

// DropLease runs the first half of what this Client's SetRate, UpdateRate,
// Delete and Expire* do around their script call (lease_return.go,
// dropLease) and returns the second half.
func DropLease(l *Limiter) func() { return l.c.dropLease(l) }

// SetProbeClock makes c see probe windows by at instead of the wall clock
// (fairness_probe.go).
func SetProbeClock(c *Client, at func(now time.Time, interval time.Duration) (in, full bool)) {
	c.probe = at
}

// DecideHolding runs the acquire script once for ns, as a batch of
// blocking callers would in a probe window holding k permits (strict:
// the waiters' form), and returns per request whether it was granted and
// whether it was held.
func DecideHolding(ctx context.Context, l *Limiter, strict bool, k int64, ns ...int64) (granted, held []bool, err error) {
	form := formTable
	if strict {
		form = formStrict
	}
	b := l.decide(ctx, holding(form, k), ns)
	if b.err != nil {
		return nil, nil, b.err
	}
	for _, v := range b.verdicts {
		granted, held = append(granted, v.res.Granted), append(held, v.held)
	}
	return granted, held, nil
}

// HoldAll is the hold of a full probe window.
const HoldAll = holdAll

// ProbeSlots are how long a held request waits: probeSlot, and
// probeFullSlot in a full window.
var ProbeSlots = [2]time.Duration{probeSlot, probeFullSlot}

// MarkRefused makes c's fleet state of l as if one of its blocked callers
// had been refused at at, on a limiter of the given interval that only
// this library writes.
func MarkRefused(l *Limiter, at time.Time, interval time.Duration) {
	l.c.lanes.mu.Lock()
	defer l.c.lanes.mu.Unlock()
	l.c.lanes.fleetOf(l.laneKey(), interval).refusedAt = at
}
