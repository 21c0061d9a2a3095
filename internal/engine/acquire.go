package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outcome is what one acquisition got, with what its Decision reports.
type Outcome struct {
	Res Result
	// Err is the acquisition's error: Redis's, the script's, or ctx's.
	Err        error
	RetryAfter time.Duration // the last hint seen; 0 when granted
	RoundTrip  time.Duration // of the deciding script call
	Batch      int           // requests the deciding call decided
	Waited     time.Duration // in the waiters' queue or on a timer
	Leased     bool          // granted from a lease, without a script call
	Local      bool          // refused locally (a local refusal), without a script call
}

// Try decides one non-blocking acquisition of n permits of t (n already
// checked): from a live lease, a local refusal, or a script call (the
// lane's, or its own without combining). detail asks for every field of
// Result.
func (e *Engine) Try(ctx context.Context, t Target, n int64, detail bool) Outcome {
	if lim, ok := t.(Limiter); ok && e.leases != nil {
		// A done context takes nothing, from a lease or from Redis.
		if err := ctx.Err(); err != nil {
			return Outcome{Err: err}
		}
		if res, ok := e.leases.take(lim, n, false); ok {
			return Outcome{Res: res, Leased: true}
		}
	}
	if !e.noLocal {
		if res, ok := e.refusals.lookup(t.LaneKey(), n, detail, e.clock()); ok {
			return Outcome{Res: res, RetryAfter: res.RetryAfter, Local: true}
		}
	}
	var a answer
	if e.maxBatch == 1 {
		a = e.direct(ctx, t, n, detail)
	} else {
		a = e.tryLane(ctx, t, n, detail)
	}
	if !e.noLocal && a.err == nil && a.v.Err == nil {
		e.refusals.note(t.LaneKey(), n, a.v.Res, a.sentAt, e.clock())
	}
	return Outcome{Res: a.v.Res, Err: firstErr(a.err, a.v.Err), RetryAfter: a.v.Res.RetryAfter,
		RoundTrip: a.roundTrip, Batch: a.batch, Leased: a.leased}
}

// Wait acquires n permits of t (n already checked) for a blocking caller:
// until granted, until the hint passes limit (not granted, no error) or
// ctx's deadline (an error wrapping context.DeadlineExceeded, at once), or
// until ctx is done. A zero limit means none. waiting, when not nil, is
// told +1 when the caller starts to wait on Redis and -1 when it stops.
func (e *Engine) Wait(ctx context.Context, t Target, n int64, limit time.Time, waiting func(int)) Outcome {
	var o Outcome
	if o.Err = ctx.Err(); o.Err != nil {
		return o
	}
	if lim, ok := t.(Limiter); ok && e.leases != nil {
		if res, ok := e.leases.take(lim, n, false); ok {
			return Outcome{Res: res, Leased: true}
		}
	}
	if waiting != nil {
		waiting(1)
		defer waiting(-1)
	}
	var ok bool
	ok, o.Err = e.waitUntil(ctx, t, n, limit, &o)
	o.Res.Granted = ok
	if ok {
		o.RetryAfter = 0
	}
	return o
}

// TimeoutGrace is how long past TryAcquireTimeout's timeout a script
// call may still run: a hint that ends right at the timeout is followed
// by one more call, as in Redisson, and that call needs a round trip.
// The call returns by its timeout plus this grace whatever Redis does
// (a stall, a server that never answers, a slow dial); docs/
// differences.md states the 25 ms and the test that measures it.
const TimeoutGrace = 25 * time.Millisecond

// waitUntil is Wait's loop, bounded by limit plus TimeoutGrace as by a
// context deadline: when Redis has not answered by then, it returns an
// error wrapping context.DeadlineExceeded (permits that the abandoned
// call granted are given back when its reply comes).
func (e *Engine) waitUntil(ctx context.Context, t Target, n int64, limit time.Time, o *Outcome) (bool, error) {
	wctx, own := ctx, time.Time{}
	if !limit.IsZero() {
		own = limit.Add(TimeoutGrace)
		if dl, ok := ctx.Deadline(); !ok || own.Before(dl) {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, own)
			defer cancel()
		}
	}
	var ok bool
	var err error
	if e.maxBatch == 1 {
		ok, err = e.waitDirect(wctx, t, n, limit, o)
	} else {
		ok, err = e.waitQueued(wctx, t, n, limit, o)
	}
	// The batch's own context (lane.go) may reach the same deadline first.
	if wctx != ctx && errors.Is(err, context.DeadlineExceeded) && !e.time.Now().Before(own) {
		err = fmt.Errorf("ratelimiter: no answer from Redis within the timeout: %w", context.DeadlineExceeded)
	}
	return ok, err
}

// Release gives n permits of t back: for a Limiter with leases, into
// this Engine's live lease of it first, up to what the lease handed out
// (no Redis call for that part); the rest through t.GiveBack, which leaves
// the lease's record alone. Every local refusal ends: they may no longer
// hold.
func (e *Engine) Release(ctx context.Context, t Target, n int64) error {
	defer e.refusals.forget()
	var keep []byte
	if lim, ok := t.(Limiter); ok && e.leases != nil {
		var x int64
		if x, keep = e.leases.refill(lim, n); x == n {
			return nil
		}
		n -= x
	}
	return t.GiveBack(ctx, n, keep)
}

// Forget ends every local refusal: the caller changed what a limiter
// holds or allows (SetRate, UpdateRate, TrySetRate, Delete).
func (e *Engine) Forget() { e.refusals.forget() }

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
