package ratelimiter

import (
	"context"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/internal/script"
	"github.com/goredisson/ratelimiter/wire"
)

// Test-only views of the combining state (internal/engine), for tests that must
// know a request is queued before they go on.

// Pending returns the acquisitions of l waiting for the next script call.
func Pending(l *Limiter) int { return l.c.eng.Pending(l.target().LaneKey()) }

// Waiters returns the blocked callers queued on l, those in a script call
// included.
func Waiters(l *Limiter) int { return l.c.eng.Waiters(l.target().LaneKey()) }

// CompositePending is Pending for the lane of a composite's set of parts.
func CompositePending(a *Composite) int { return a.c.eng.Pending(a.target().LaneKey()) }

// CompositeWaiters is Waiters for a composite's set of parts.
func CompositeWaiters(a *Composite) int { return a.c.eng.Waiters(a.target().LaneKey()) }

// AcquireAllSource is internal/script/lua/acquire_all.lua.
var AcquireAllSource = script.Sources["acquire_all.lua"]

// GrantedAny is grantedAny.
var GrantedAny = script.GrantedAny

// Lanes returns how many limiters c keeps combining state for, after
// dropping the idle ones as a sweep does.
func Lanes(c *Client) int { return c.eng.Lanes() }

// HintDuration is hintDuration.
var HintDuration = script.HintDuration

// ExceedsRate is exceedsRate: the Go home of the rule acquire_all.lua
// applies to n × weight against a part's rate.
var ExceedsRate = script.ExceedsRate

// DropLease runs the first half of what this Client's SetRate, UpdateRate,
// Delete and Expire* do around their script call (engine.DropLease) and returns the second half.
func DropLease(l *Limiter) func() { return l.dropLease() }

// SetProbeClock makes c see probe windows by at instead of the wall clock
// (internal/engine).
func SetProbeClock(at func(now time.Time, interval time.Duration) (in, full bool)) Option {
	return func(c *Client) { c.probe = at }
}

// DecideHolding runs the acquire script once for ns, as a batch of
// blocking callers would in a probe window holding k permits (strict:
// the waiters' form), and returns per request whether it was granted and
// whether it was held.
func DecideHolding(ctx context.Context, l *Limiter, strict bool, k int64, ns ...int64) (granted, held []bool, err error) {
	form := engine.Form{Kind: engine.Table, Hold: k}
	if strict {
		form.Kind = engine.Strict
	}
	b := l.target().Decide(ctx, form, ns)
	if b.Err != nil {
		return nil, nil, b.Err
	}
	for _, v := range b.Verdicts {
		granted, held = append(granted, v.Res.Granted), append(held, v.Held)
	}
	return granted, held, nil
}

// HoldAll is the hold of a full probe window.
const HoldAll = engine.HoldAll

// ProbeSlots are how long a held request waits: probeSlot, and
// probeFullSlot in a full window.
var ProbeSlots = [2]time.Duration{engine.ProbeSlot, engine.ProbeFullSlot}

// MarkRefused makes c's fleet state of l as if one of its blocked callers
// had been refused at at, on a limiter of the given interval that only
// this library writes.
func MarkRefused(l *Limiter, at time.Time, interval time.Duration) {
	l.c.eng.MarkRefused(l.target().LaneKey(), at, interval)
}

// Keys returns the Redis keys of the limiter, for tests that read them
// (tools use wire.KeysFor).
func (r *Limiter) Keys() wire.Keys { return r.keys }

// WeightsOf returns the weights of a view made with Weighted, or nil for
// a composite made with Client.All.
func WeightsOf(a *Composite) []int64 { return a.weights }

// LastClockSkew returns c's last successful clock measurement and true,
// or false before the first one.
func LastClockSkew(c *Client) (ClockSkew, bool) { return c.lastClockSkew() }
