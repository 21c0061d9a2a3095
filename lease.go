package ratelimiter

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// Leased permits (docs/combining.md, "Leases"; off by default). Under
// steady demand a Client takes a block of permits of a limiter in one
// script call, as one permit record of k permits in its member format
// (Redisson reads it as any record), and hands them out to its callers
// without a Redis call until they run out or the lease's deadline passes,
// Duration after the call was sent. What it did not hand out it gives
// back by shrinking that record (internal/script/lua/lease_return.lua), so that in the
// end the record holds the permits its callers got.
//
//	caller ──► live lease holds n? ──yes──► granted here, no Redis call
//	             │ no
//	             └──► lane (combining) ──► steady demand and headroom?
//	                     yes: lease.lua: the batch's permits + a lease, one record
//	                     no, or the script declines: acquire.lua as before
//
// The files: this one holds the public types; the engine
// (internal/engine: lease.go, leasecall.go, leasereturn.go) the lease
// state, the fast path, the lease call from the lane, the ends of leases
// and their returns; target.go the lease scripts' calls.
//
// What bounds it:
//   - Redis grants every permit: a lease is a record that Redis wrote
//     before the first of its permits is handed out, and none is handed
//     out at or after the lease's deadline (checked under its lock).
//   - A lease is granted only while the window, after it, holds at most
//     Share × rate permits (checked in the script), and takes at most half
//     of that headroom: near its rate a limiter is served as without
//     leases, and waiters and fairness (internal/engine) work as before.
//   - In real time a window of the interval may hold more than the rate: a
//     permit handed out at t counts in Redis from the lease's stamp s, with
//     s - (round trip) < t < s + D. The excess is at most the permits that
//     live leases held unspent at the window's start, and at most
//     ⌊Share × rate⌋ (docs/combining.md states the formula).

// LeaseOptions configures WithLeases. The zero value takes every default.
type LeaseOptions struct {
	// Duration is how long a Client hands out a lease's permits, counted
	// from when it sent the call that took the lease; then it gives back
	// what is left. At most a quarter of the limiter's interval is used.
	// Zero value: the default, 50 ms. Otherwise a whole number of
	// milliseconds from 1 ms to 10 s. For that long a lease hands out
	// without reading the limiter: another Client's (or Redisson's)
	// SetRate, UpdateRate, Delete or expiry, and a rate lowered below a
	// request (which Redis would answer with ErrPermitsExceedRate), go
	// unnoticed by it until its deadline. This Client's own SetRate,
	// UpdateRate, Delete and Expire* end its lease first.
	Duration time.Duration
	// MaxPermits is the largest lease a Client takes of one limiter. Sizes
	// follow demand: about 1.25 × the permits the Client's callers asked in
	// the last Duration, at most doubling from one lease to the next. Zero
	// value: the default, 1024. Otherwise from 1 to the package constant
	// MaxPermits.
	MaxPermits int64
	// Share is the most of the rate that a window may hold after a lease
	// is granted: leases are taken only while a limiter is at most this
	// full, and a real-time window of the interval holds at most
	// (1 + Share) × the rate. Zero value: the default, 0.1. Otherwise in
	// [0.000001, 1], used in steps of a millionth (rounded to the nearest).
	Share float64
	// MinDemand is the permits a Client's callers must have asked of a
	// limiter within about the last Duration (from 1 to 1.5 Durations)
	// before the Client takes a lease of it: steady demand, so that a
	// lease is mostly handed out. Zero value: the default, 4. Otherwise
	// from 1 to the package constant MaxPermits.
	MinDemand int64
}

const (
	defaultLeaseDuration  = 50 * time.Millisecond
	maxLeaseDuration      = 10 * time.Second
	defaultLeasePermits   = 1024
	defaultLeaseShare     = 0.1
	defaultLeaseMinDemand = 4
)

// withDefaults returns o with its zero fields set to the defaults, or an
// error matching ErrInvalidArgument that names the first field out of
// range.
func (o LeaseOptions) withDefaults() (LeaseOptions, error) {
	switch {
	case o.Duration < 0 || o.Duration > maxLeaseDuration || o.Duration%time.Millisecond != 0:
		return o, invalid("lease duration %v: must be 0 or a whole number of ms up to %v", o.Duration, maxLeaseDuration)
	case o.MaxPermits < 0 || o.MaxPermits > MaxPermits:
		return o, invalid("lease max permits %d out of range [0, %d]", o.MaxPermits, int64(MaxPermits))
	case math.IsNaN(o.Share) || o.Share < 0 || o.Share > 1:
		return o, invalid("lease share %v out of range [0, 1]", o.Share)
	case o.Share != 0 && o.Share*engine.ShareScale < 1:
		return o, invalid("lease share %v under a millionth, its step", o.Share)
	case o.MinDemand < 0 || o.MinDemand > MaxPermits:
		return o, invalid("lease min demand %d out of range [0, %d]", o.MinDemand, int64(MaxPermits))
	}
	if o.Duration == 0 {
		o.Duration = defaultLeaseDuration
	}
	if o.MaxPermits == 0 {
		o.MaxPermits = defaultLeasePermits
	}
	if o.Share == 0 {
		o.Share = defaultLeaseShare
	}
	if o.MinDemand == 0 {
		o.MinDemand = defaultLeaseMinDemand
	}
	return o, nil
}

// checkLeases is NewClient's check, after every option ran, of the options
// that must agree with WithLeases.
func (c *Client) checkLeases() {
	if c.leaseOpts == nil {
		return
	}
	if c.maxBatch == 1 {
		c.err = errors.Join(c.err, invalid("WithLeases needs combining: not with WithMaxBatch(1)"))
	}
	if c.clientClock {
		c.err = errors.Join(c.err, invalid("WithLeases needs the server's clock: not with WithServerClock(false)"))
	}
}

// LeaseEnd says why a lease ended (LeaseEvent.End).
type LeaseEnd uint8

const (
	// LeaseExhausted: every permit of it was handed out.
	LeaseExhausted LeaseEnd = iota + 1
	// LeaseExpired: its Duration passed with permits left.
	LeaseExpired
	// LeaseReplaced: a caller asked more than it held; the next lease call
	// gave the rest back.
	LeaseReplaced
	// LeaseDropped: this Client's SetRate, UpdateRate, Delete, Expire,
	// ExpireIf, ExpireAt or ExpireAtIf of the limiter ended it.
	LeaseDropped
	// LeaseClosed: Client.Close ended it.
	LeaseClosed
	// LeaseRefused: none of it was handed out beyond the callers of its
	// call, because its call was abandoned (every caller had gone), a
	// replica acknowledgement fell short (WithReplicaAck), or this Client's
	// SetRate, UpdateRate, Delete, Expire* or Close came while the call was
	// in flight.
	LeaseRefused
)

// String returns "exhausted", "expired", "replaced", "dropped", "closed",
// "refused" or "LeaseEnd(n)"; the names are stable, for metric attributes.
func (e LeaseEnd) String() string {
	switch e {
	case LeaseExhausted:
		return "exhausted"
	case LeaseExpired:
		return "expired"
	case LeaseReplaced:
		return "replaced"
	case LeaseDropped:
		return "dropped"
	case LeaseClosed:
		return "closed"
	case LeaseRefused:
		return "refused"
	}
	return "LeaseEnd(" + strconv.Itoa(int(e)) + ")"
}

// LeaseEvent reports one lease when it has ended and its unused permits
// were given back or could not be (Hooks.Lease): what Redis granted, what
// this Client's callers got, and what came back. Permits = HandedOut +
// Returned + Kept.
type LeaseEvent struct {
	// Limiter is the name given to Client.Limiter.
	Limiter string
	// Permits is the record's count as Redis granted it: the permits of
	// the callers that waited on the lease's call plus the lease.
	Permits int64
	// HandedOut is the permits this Client's callers got from it, less
	// those that Release put back into it.
	HandedOut int64
	// Returned is the permits given back to Redis.
	Returned int64
	// Kept is the permits neither handed out nor given back: the return
	// failed (Err says why), the record was gone (a SetRate, Delete or
	// another client's Release changed it), or the limiter was at its rate.
	// They come back when the record expires, an interval after Stamp. It
	// is an upper bound: when a return's outcome stayed unknown (no reply,
	// twice) it may have been applied.
	Kept int64
	// Stamp is the record's score (Redis's clock).
	Stamp time.Time
	// Held is the time from the lease call's send to the lease's end.
	Held time.Duration
	// End says why the lease ended.
	End LeaseEnd
	// Err is the return's error, if it failed.
	Err error
}

// leaseEnded reports an ended lease to Hooks.Lease.
func (c *Client) leaseEnded(e engine.LeaseEvent) {
	if h := c.hooks.Lease; h != nil {
		h(LeaseEvent{
			Limiter: e.Limiter, Permits: e.Permits, HandedOut: e.HandedOut, Returned: e.Returned,
			Kept: e.Kept, Stamp: e.Stamp, Held: e.Held, End: LeaseEnd(e.End), Err: e.Err,
		})
	}
}

// Close ends every live lease of the Client (WithLeases) and gives back
// their unused permits, one script call per limiter holding a lease, and
// waits until those and every other lease call or return in flight have
// ended, or until ctx is done. From then on the Client takes no lease:
// every acquisition goes to Redis, as without WithLeases. It does not
// close the Redis client, which the caller owns; the Client stays usable,
// and Close may be called again. Without leases it does nothing and
// returns nil. It returns the returns' errors (each naming its limiter)
// and ctx's error when ctx ended the wait, joined; permits whose return
// failed come back when their record expires.
//
// With WithOutageFallback, Close also ends an outage in progress and its
// probe goroutine; from then on the Client begins no outage: its
// acquisitions fail while Redis is unreachable, as without the option.
func (c *Client) Close(ctx context.Context) error {
	if c.out != nil {
		c.out.close()
	}
	return c.eng.Close(ctx)
}
