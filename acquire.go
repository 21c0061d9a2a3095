package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Result is the outcome of one non-blocking acquisition: everything an
// HTTP or gRPC layer needs for its rate-limit headers, from the
// acquisition's own reply.
type Result struct {
	// Granted reports whether the permits were taken.
	Granted bool
	// Limit is the limiter's rate (permits per Interval) as Redis held it
	// at the call.
	Limit int64
	// Interval is the limiter's window as Redis held it at the call.
	Interval time.Duration
	// Remaining is the permits left available in the window after this
	// call, as the limiter counted them; on a refusal, those available,
	// fewer than asked for.
	Remaining int64
	// RetryAfter is zero when Granted; otherwise the time until enough
	// permit records in the window expire to give back the permits asked
	// for, the earliest moment a retry can succeed. It is a lower bound:
	// other callers may take the permits first. It is at least 1 ms and
	// at most 2^53-1 ms (saturating at the longest time.Duration): a record
	// stamped in the future of the clock the script reads (Redis's, or this
	// Client's with WithServerClock(false)) is waited for until that clock
	// sees it expire.
	// Use it for a Retry-After header.
	RetryAfter time.Duration
	// ResetAfter is the time until the oldest permit record in the window
	// expires and gives its permits back; 0 when the window holds none.
	ResetAfter time.Duration
	// Part is, for a Composite's Allow, the index (in Names) of the part
	// that Limit, Interval and ResetAfter describe, the one that binds: on
	// a grant the part with the fewest permits left, on a refusal the one
	// that must wait longest, for ErrPermitsExceedRate the part whose rate
	// is below n. It is 0 for a Limiter. For a Weighted composite it
	// counts every part, those of weight 0 too.
	Part int
	// Parts is, for a Composite, what each part (in Names order) said about
	// this acquisition: whether it had its permits and, when it had not,
	// how long until it can grant them. It is set by Allow and left nil by
	// the calls that return only a bool, and for a Limiter. A part of
	// weight 0 (Weighted) has a zero PartResult: it was not read.
	Parts []PartResult
}

// PartResult is one part's side of a Composite's acquisition
// (Result.Parts).
type PartResult struct {
	// Permits is what the call asked of this part: n × its weight (n
	// without Weighted); 0 for a part of weight 0.
	Permits int64
	// Limit and Interval are the part's rate and window as Redis held them.
	Limit    int64
	Interval time.Duration
	// Remaining is the part's permits left after the call (on a refusal,
	// those available), never below 0.
	Remaining int64
	// Short reports that the part could not grant its Permits: it is one
	// reason for the refusal (the composite's Part is the one among the
	// short parts that waits longest). On a grant no part is short. A
	// blocked caller decided after another's refusal in one combined call
	// is refused with no part short; for ErrPermitsExceedRate the part
	// over its rate is short with no RetryAfter.
	Short bool
	// RetryAfter is, for a short part, the time until its own records
	// free its Permits (the hint the part alone would give, a lower bound
	// as Result.RetryAfter); 0 when the part had them, or when no wait
	// helps (Permits above Limit). The composite's RetryAfter is the
	// longest of these.
	RetryAfter time.Duration
	// ResetAfter is the time until the part's oldest permit record in the
	// window expires; 0 when its window holds none.
	ResetAfter time.Duration
}

// memberRetries bounds the retries after a permit record collided with an
// existing one. Collisions need equal random parts: with 128 random bits
// they do not happen, with the old 32-bit formats they are rare.
const memberRetries = 8

// Allow tries once to take n permits without waiting and reports the
// outcome with the wait hint and the limiter's state (every field of
// Result). n must be from 1 to MaxPermits. It fails with ErrNotInitialized
// when the limiter is not configured and with ErrPermitsExceedRate when n
// exceeds the rate; other errors are Redis's, or ctx's when ctx is done
// before the answer comes.
func (r *Limiter) Allow(ctx context.Context, n int64) (Result, error) {
	return try(ctx, r, n, true)
}

// acquirer is what try and wait need of a Limiter or a Composite.
type acquirer interface {
	target
	client() *Client
	label() string // the name its Decisions and errors carry
	check(err error) error
	decided(ctx context.Context, d Decision, err error) error
}

func (r *Limiter) client() *Client { return r.c }
func (r *Limiter) label() string   { return r.name }

// try is Allow on t; detail asks for every field of Result, which costs
// Redis a little more than Granted alone.
func try(ctx context.Context, t acquirer, n int64, detail bool) (Result, error) {
	d := Decision{Limiter: t.label(), Op: OpAllow, Permits: n}
	if err := t.check(checkPermits(n, t.maxWeight())); err != nil {
		return Result{}, t.decided(ctx, d, err)
	}
	c := t.client()
	if lim := asLimiter(t); c.leases != nil && lim != nil {
		// A done context takes nothing, from a lease or from Redis.
		if err := ctx.Err(); err != nil {
			return Result{}, t.decided(ctx, d, err)
		}
		if res, ok := c.leases.take(lim, n, false); ok {
			d.Granted, d.Leased = true, true
			return res, t.decided(ctx, d, nil)
		}
	}
	if !c.noLocal {
		if res, ok := c.refusals.lookup(t.laneKey(), n, detail, c.clock()); ok {
			d.RetryAfter, d.Local = res.RetryAfter, true
			return res, t.decided(ctx, d, nil)
		}
	}
	var a answer
	if c.maxBatch == 1 {
		a = direct(ctx, t, n, detail)
	} else {
		a = c.submit(newRequest(ctx, t, n, detail))
	}
	if !c.noLocal && a.err == nil && a.v.err == nil {
		c.refusals.note(t.laneKey(), n, a.v.res, a.sentAt, c.clock())
	}
	d.Granted, d.RetryAfter, d.RoundTrip, d.Batch, d.Leased = a.v.res.Granted, a.v.res.RetryAfter, a.roundTrip, a.batch, a.leased
	return a.v.res, t.decided(ctx, d, firstErr(a.err, a.v.err))
}

// decided reports d, ended with err, to the Client's hooks and returns err
// naming r.
func (r *Limiter) decided(ctx context.Context, d Decision, err error) error {
	err = r.wrap(err)
	d.Err = err
	r.c.decided(ctx, d)
	return err
}

// TryAcquire takes n permits if they are available now and reports
// whether it did. It never waits. Errors are those of Allow.
func (r *Limiter) TryAcquire(ctx context.Context, n int64) (bool, error) {
	res, err := try(ctx, r, n, false)
	return res.Granted, err
}

// TryAcquireTimeout takes n permits, waiting up to timeout for them. It
// returns true once granted and false, at once, as soon as the wait hint
// from Redis shows that the permits cannot come within timeout. When ctx
// has an earlier deadline that the wait would pass, it returns an error
// wrapping context.DeadlineExceeded at once; when ctx is done while
// waiting, ctx.Err(). When Redis has not answered by the timeout plus
// 25 ms (a stalled or unreachable server, a slow dial), it returns false
// and an error wrapping context.DeadlineExceeded; permits the abandoned
// call may have taken are given back when its reply comes. A timeout of
// 0 tries once. Other errors are those of Allow.
func (r *Limiter) TryAcquireTimeout(ctx context.Context, n int64, timeout time.Duration) (bool, error) {
	if timeout < 0 {
		return false, r.decided(ctx, Decision{Limiter: r.name, Op: OpTryAcquireTimeout, Permits: n},
			r.check(invalid("negative timeout %v", timeout)))
	}
	return wait(ctx, r, n, time.Now().Add(timeout), OpTryAcquireTimeout)
}

// Acquire takes n permits, waiting as long as it takes. It waits on the
// hint that Redis returns, not by polling. It returns nil once granted; an
// error wrapping context.DeadlineExceeded, at once, when the wait would
// pass ctx's deadline; ctx.Err() when ctx is done while waiting. Other
// errors are those of Allow.
func (r *Limiter) Acquire(ctx context.Context, n int64) error {
	_, err := wait(ctx, r, n, time.Time{}, OpAcquire)
	return err
}

// wait acquires n permits of t until granted, until the hint passes limit
// (false, nil) or ctx's deadline (an error). A zero limit means none.
func wait(ctx context.Context, t acquirer, n int64, limit time.Time, op Op) (bool, error) {
	d := Decision{Limiter: t.label(), Op: op, Permits: n}
	if err := t.check(checkPermits(n, t.maxWeight())); err != nil {
		return false, t.decided(ctx, d, err)
	}
	var ok bool
	var err error
	if err = ctx.Err(); err == nil {
		if ls, lim := t.client().leases, asLimiter(t); ls != nil && lim != nil {
			if _, ok := ls.take(lim, n, false); ok {
				d.Granted, d.Leased = true, true
				return true, t.decided(ctx, d, nil)
			}
		}
		if h := t.client().hooks.Waiting; h != nil {
			h(d.Limiter, 1)
			defer h(d.Limiter, -1)
		}
		ok, err = waitUntil(ctx, t, n, limit, &d)
	}
	d.Granted = ok
	if ok {
		d.RetryAfter = 0
	}
	return ok, t.decided(ctx, d, err)
}

// timeoutGrace is how long past TryAcquireTimeout's timeout a script
// call may still run: a hint that ends right at the timeout is followed
// by one more call, as in Redisson, and that call needs a round trip.
// The call returns by its timeout plus this grace whatever Redis does
// (a stall, a server that never answers, a slow dial); docs/
// differences.md states the 25 ms and the test that measures it.
const timeoutGrace = 25 * time.Millisecond

// waitUntil is wait's loop, bounded by limit plus timeoutGrace as by a
// context deadline: when Redis has not answered by then, it returns an
// error wrapping context.DeadlineExceeded (permits that the abandoned
// call granted are given back when its reply comes).
func waitUntil(ctx context.Context, t acquirer, n int64, limit time.Time, d *Decision) (bool, error) {
	wctx, own := ctx, time.Time{}
	if !limit.IsZero() {
		own = limit.Add(timeoutGrace)
		if dl, ok := ctx.Deadline(); !ok || own.Before(dl) {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, own)
			defer cancel()
		}
	}
	var ok bool
	var err error
	if c := t.client(); c.maxBatch == 1 {
		ok, err = waitDirect(wctx, t, n, limit, d)
	} else {
		ok, err = c.waitQueued(wctx, t, n, limit, d)
	}
	// The batch's own context (combine_lane.go) may reach the same deadline first.
	if wctx != ctx && errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(own) {
		err = fmt.Errorf("ratelimiter: no answer from Redis within the timeout: %w", context.DeadlineExceeded)
	}
	return ok, err
}

// checkPermits returns why n permits cannot be asked of a target whose
// largest weight is w (1 for a Limiter): n × w goes into one permit
// record, which holds at most MaxPermits.
func checkPermits(n, w int64) error {
	if n < 1 || n > MaxPermits {
		return invalid("permits %d out of range [1, %d]", n, int64(MaxPermits))
	}
	if n > MaxPermits/w {
		return fmt.Errorf("%w: permits %d times weight %d above %d", ErrInvalidWeights, n, w, int64(MaxPermits))
	}
	return nil
}

// asLimiter returns t as a *Limiter, or nil for a Composite.
func asLimiter(t acquirer) *Limiter {
	lim, _ := t.(*Limiter)
	return lim
}
