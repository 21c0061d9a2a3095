package ratelimiter

import (
	"context"
	"fmt"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// MaxPermits is the most permits one call can take or give back: the wire
// format stores the count in 32 bits.
const MaxPermits = wire.MaxPermits

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
	// Use it for a Retry-After header. A Degraded refusal's is the local
	// window's hint, or the interval when n is above the local limit.
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
	// Degraded reports that the Client decided the call without Redis,
	// in an outage (WithOutageFallback): Limit is then the local limit
	// (floor(Share × rate)), Interval the limiter's, and Remaining,
	// RetryAfter and ResetAfter the local window's.
	Degraded bool
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
	client() *Client
	label() string // the name its Decisions and errors carry
	check(err error) error
	decided(ctx context.Context, d Decision, err error) error
	target() engine.Target // what the engine's script calls act on (target.go)
	maxWeight() int64      // the largest weight: n × it goes into one record
	degradable() *Limiter  // the Limiter to decide locally in an outage; nil: none (degraded.go)
}

func (r *Limiter) client() *Client  { return r.c }
func (r *Limiter) label() string    { return r.name }
func (r *Limiter) maxWeight() int64 { return 1 }

// try is Allow on t; detail asks for every field of Result, which costs
// Redis a little more than Granted alone.
func try(ctx context.Context, t acquirer, n int64, detail bool) (Result, error) {
	d := Decision{Limiter: t.label(), Op: OpAllow, Permits: n}
	if err := t.check(checkPermits(n, t.maxWeight())); err != nil {
		return Result{}, t.decided(ctx, d, err)
	}
	r := t.degradable()
	if r != nil {
		if res, err, ok := r.tryLocal(ctx, &d, n); ok {
			return res, t.decided(ctx, d, err)
		}
	}
	o := t.client().eng.Try(ctx, t.target(), n, detail)
	d.note(o)
	if r != nil && unreachable(o.Err) {
		// The call that found Redis unreachable is decided locally too.
		r.c.out.enter(o.Err)
		if res, err, ok := r.tryLocal(ctx, &d, n); ok {
			return res, t.decided(ctx, d, err)
		}
	}
	return resultOf(o.Res), t.decided(ctx, d, o.Err)
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
	var waiting func(int)
	if h := t.client().hooks.Waiting; h != nil {
		waiting = func(delta int) { h(d.Limiter, delta) }
	}
	if r := t.degradable(); r != nil {
		return r.waitDegraded(ctx, &d, n, limit, waiting)
	}
	o := t.client().eng.Wait(ctx, t.target(), n, limit, waiting)
	d.note(o)
	return d.Granted, t.decided(ctx, d, o.Err)
}

// note copies what the engine's outcome o says into d.
func (d *Decision) note(o engine.Outcome) {
	d.Granted, d.RetryAfter, d.RoundTrip, d.Batch = o.Res.Granted, o.RetryAfter, o.RoundTrip, o.Batch
	d.Waited, d.Leased, d.Local = o.Waited, o.Leased, o.Local
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

// resultOf is the root's Result of the engine's r.
func resultOf(r engine.Result) Result {
	res := Result{Granted: r.Granted, Limit: r.Limit, Interval: r.Interval, Remaining: r.Remaining,
		RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter, Part: r.Part}
	if r.Parts != nil {
		res.Parts = make([]PartResult, len(r.Parts))
		for i, p := range r.Parts {
			res.Parts[i] = PartResult(p)
		}
	}
	return res
}
