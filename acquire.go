package ratelimiter

import (
	"context"
	"fmt"
	"time"
)

// Result is the outcome of one non-blocking acquisition.
type Result struct {
	// Granted reports whether the permits were taken.
	Granted bool
	// Remaining is, when Granted, the permits left available in the window
	// after this call, as the limiter stored them; 0 when not granted.
	Remaining int64
	// RetryAfter is zero when Granted; otherwise the time until the oldest
	// permit record in the window expires, the earliest moment a retry can
	// succeed. It is a lower bound: other callers may take the permits
	// first, and a request for several permits may need more records to
	// expire. Use it for a Retry-After header.
	RetryAfter time.Duration
}

// memberRetries bounds the retries after a permit record collided with an
// existing one. Collisions need equal random parts: with 128 random bits
// they do not happen, with the old 32-bit formats they are rare.
const memberRetries = 8

// Allow tries once to take n permits without waiting and reports the
// outcome with the wait hint. n must be from 1 to MaxPermits. It fails
// with ErrNotInitialized when the limiter is not configured and with
// ErrPermitsExceedRate when n exceeds the rate.
func (r *Limiter) Allow(ctx context.Context, n int64) (Result, error) {
	d := Decision{Limiter: r.name, Op: OpAllow, Permits: n}
	if err := r.check(checkPermits(n)); err != nil {
		return Result{}, r.decided(d, err)
	}
	res, err := r.allow(ctx, n, &d)
	d.Granted, d.RetryAfter = res.Granted, res.RetryAfter
	return res, r.decided(d, err)
}

// decided reports d, ended with err, to the Client's hooks and returns err.
func (r *Limiter) decided(d Decision, err error) error {
	d.Err = err
	r.c.decided(d)
	return err
}

func (r *Limiter) allow(ctx context.Context, n int64, d *Decision) (Result, error) {
	for i := 0; i < memberRetries; i++ {
		start := time.Now()
		v, err := r.evalAcquire(ctx, n, r.nowMillis(), newMember(r.c.format, uint32(n)))
		d.RoundTrip, d.Batch = time.Since(start), 1
		switch {
		case err != nil:
			return Result{}, err
		case v >= 0:
			return Result{Granted: true, Remaining: v}, nil
		case v < -1:
			return Result{RetryAfter: time.Duration(-v) * time.Millisecond}, nil
		}
	}
	return Result{}, fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries)
}

// TryAcquire takes n permits if they are available now and reports
// whether it did. It never waits. Errors are those of Allow.
func (r *Limiter) TryAcquire(ctx context.Context, n int64) (bool, error) {
	res, err := r.Allow(ctx, n)
	return res.Granted, err
}

// TryAcquireTimeout takes n permits, waiting up to timeout for them. It
// returns true once granted and false, at once, as soon as the wait hint
// from Redis shows that the permits cannot come within timeout. When ctx
// has an earlier deadline that the wait would pass, it returns an error
// wrapping context.DeadlineExceeded at once; when ctx is done while
// waiting, ctx.Err(). A timeout of 0 tries once. Other errors are those of
// Allow.
func (r *Limiter) TryAcquireTimeout(ctx context.Context, n int64, timeout time.Duration) (bool, error) {
	if timeout < 0 {
		return false, r.decided(Decision{Limiter: r.name, Op: OpTryAcquireTimeout, Permits: n},
			r.check(invalid("negative timeout %v", timeout)))
	}
	return r.wait(ctx, n, time.Now().Add(timeout), OpTryAcquireTimeout)
}

// Acquire takes n permits, waiting as long as it takes. It waits on the
// hint that Redis returns, not by polling. It returns nil once granted; an
// error wrapping context.DeadlineExceeded, at once, when the wait would
// pass ctx's deadline; ctx.Err() when ctx is done while waiting. Other
// errors are those of Allow.
func (r *Limiter) Acquire(ctx context.Context, n int64) error {
	_, err := r.wait(ctx, n, time.Time{}, OpAcquire)
	return err
}

// wait acquires until granted, until the hint passes limit (false, nil)
// or ctx's deadline (an error). A zero limit means none.
func (r *Limiter) wait(ctx context.Context, n int64, limit time.Time, op Op) (bool, error) {
	d := Decision{Limiter: r.name, Op: op, Permits: n}
	ok, err := r.waitLoop(ctx, n, limit, &d)
	d.Granted = ok
	if ok {
		d.RetryAfter = 0
	}
	return ok, r.decided(d, err)
}

func (r *Limiter) waitLoop(ctx context.Context, n int64, limit time.Time, d *Decision) (bool, error) {
	if err := r.check(checkPermits(n)); err != nil {
		return false, err
	}
	ctxDeadline, hasDeadline := ctx.Deadline()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		res, err := r.allow(ctx, n, d)
		if err != nil || res.Granted {
			return res.Granted, err
		}
		d.RetryAfter = res.RetryAfter
		wake := time.Now().Add(res.RetryAfter)
		if !limit.IsZero() && wake.After(limit) {
			return false, nil
		}
		if hasDeadline && wake.After(ctxDeadline) {
			return false, fmt.Errorf("ratelimiter: waiting %v for permits would pass the context deadline: %w",
				res.RetryAfter, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(res.RetryAfter)
		} else {
			timer.Reset(res.RetryAfter)
		}
		slept := time.Now()
		select {
		case <-ctx.Done():
			d.Waited += time.Since(slept)
			return false, ctx.Err()
		case <-timer.C:
			d.Waited += time.Since(slept)
		}
	}
}

func checkPermits(n int64) error {
	if n < 1 || n > MaxPermits {
		return invalid("permits %d out of range [1, %d]", n, int64(MaxPermits))
	}
	return nil
}
