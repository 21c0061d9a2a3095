package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// Degraded decisions (WithOutageFallback): while the Client is in an
// outage, a Limiter's acquisitions are decided by its local window
// (outage.go) instead of Redis; the call that finds Redis unreachable is
// decided locally too. Composites are always decided by Redis.

// degradable returns r when its Client has an outage fallback, else nil.
func (r *Limiter) degradable() *Limiter {
	if r.c.out == nil {
		return nil
	}
	return r
}

// degradable is nil for a composite: its calls fail during an outage.
func (a *Composite) degradable() *Limiter { return nil }

// tryLocal decides one non-blocking acquisition of n permits locally when
// the Client is in an outage and r's rate is known; ok is false
// otherwise, and d is left as it was (the call goes to Redis, and is not
// Degraded). When ok, d is reset to what the local decision says.
func (r *Limiter) tryLocal(ctx context.Context, d *Decision, n int64) (res Result, err error, ok bool) {
	if !r.c.out.down() {
		return Result{}, nil, false
	}
	local := Decision{Limiter: d.Limiter, Op: d.Op, Permits: d.Permits, Degraded: true}
	if err := ctx.Err(); err != nil {
		if !r.c.out.knows(r.lane) {
			return Result{}, nil, false
		}
		*d = local
		return Result{}, err, true // a done context takes nothing
	}
	ld, ok := r.c.out.take(r.lane, n)
	if !ok {
		return Result{}, nil, false
	}
	*d = local
	d.Granted, d.RetryAfter = ld.res.Granted, ld.res.RetryAfter
	return ld.res, ld.err, true
}

// waitDegraded is wait for a Limiter whose Client has an outage fallback:
// locally while the Client is in an outage and r's rate is known, by
// Redis otherwise, going from one to the other as the outage begins and
// ends, always by limit and ctx's deadline.
func (r *Limiter) waitDegraded(ctx context.Context, d *Decision, n int64, limit time.Time, waiting func(int)) (bool, error) {
	if waiting != nil {
		waiting(1)
		defer waiting(-1)
	}
	var waited time.Duration
	for {
		if r.c.out.down() {
			ok, err, done := r.waitLocal(ctx, d, n, limit, &waited)
			if done {
				d.Granted, d.Waited, d.Degraded, d.RoundTrip, d.Batch, d.Leased, d.Local = ok, waited, true, 0, 0, false, false
				if ok {
					d.RetryAfter = 0
				}
				return ok, r.decided(ctx, *d, err)
			}
		}
		o := r.c.eng.Wait(ctx, r.target(), n, limit, nil)
		waited += o.Waited
		if unreachable(o.Err) {
			// Again, locally, only when this begins or joins an outage:
			// a closed Client begins none, and going to Redis again
			// would spin on an instant refusal (go-redis answers from
			// its last dial error), past limit, or forever without one.
			if r.c.out.enter(o.Err); r.c.out.down() && r.c.out.knows(r.lane) {
				continue
			}
		}
		d.note(o)
		d.Waited = waited
		return d.Granted, r.decided(ctx, *d, o.Err)
	}
}

// waitLocal waits for n permits of r's local window until granted, until
// its hint passes limit (false, nil) or ctx's deadline (an error wrapping
// context.DeadlineExceeded, at once), or until ctx is done; done is true
// then. It returns with done false, having taken nothing, when the
// outage has ended or r's rate is no longer known: the caller goes to
// Redis. Its time asleep is added to waited, its last hint set in d.
func (r *Limiter) waitLocal(ctx context.Context, d *Decision, n int64, limit time.Time, waited *time.Duration) (granted bool, err error, done bool) {
	deadline, hasDeadline := ctx.Deadline()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ended := r.c.out.endedCh()
		if ended == nil {
			return false, nil, false
		}
		if err := ctx.Err(); err != nil {
			return false, err, true
		}
		ld, ok := r.c.out.take(r.lane, n)
		switch {
		case !ok:
			return false, nil, false
		case ld.err != nil:
			return false, ld.err, true
		case ld.res.Granted:
			return true, nil, true
		}
		hint := ld.res.RetryAfter
		d.RetryAfter = hint
		now := time.Now()
		wake := now.Add(hint)
		if !limit.IsZero() && (ld.never || wake.After(limit)) {
			return false, nil, true
		}
		if hasDeadline && (ld.never || wake.After(deadline)) {
			return false, fmt.Errorf("ratelimiter: waiting %v for permits would pass the context deadline: %w",
				hint, context.DeadlineExceeded), true
		}
		var fire <-chan time.Time
		if !ld.never { // more than the local limit: only the outage's end helps
			if timer == nil {
				timer = time.NewTimer(hint)
			} else {
				timer.Reset(hint)
			}
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			*waited += time.Since(now)
			return false, ctx.Err(), true
		case <-fire:
		case <-ended:
		}
		*waited += time.Since(now)
	}
}

// learnReply notes the rate a reply of r's acquire script carried, or
// forgets r's rate when the reply says r is not configured.
func (o *outage) learnReply(lane string, b engine.Reply) {
	if errors.Is(b.Err, ErrNotInitialized) {
		o.forget(lane)
		return
	}
	for _, v := range b.Verdicts {
		if v.Res.Interval > 0 {
			o.learn(lane, v.Res.Limit, v.Res.Interval)
			return
		}
	}
}
