package engine

import (
	"context"
	"fmt"
	"time"
)

// Without combining (WithMaxBatch(1)) every acquisition is its own script
// call, and a blocked caller sleeps on its own timer until its hint has
// passed, then calls again: Redisson's way.

// direct makes one script call for n permits, returning when ctx is done
// even while Redis stalls; permits that an abandoned call granted are
// given back when its reply comes (Engine.call).
func (e *Engine) direct(ctx context.Context, t Target, n int64, detail bool) answer {
	return e.directLeave(ctx, nil, t, n, detail)
}

// directLeave is direct with call's leave: the caller returns when leave
// ends, while the script call goes on under ctx.
func (e *Engine) directLeave(ctx, leave context.Context, t Target, n int64, detail bool) answer {
	form := Form{Kind: Single}
	if detail {
		form.Kind = Table
	}
	b := e.call(ctx, leave, t, form, []int64{n})
	a := answer{err: b.Err, roundTrip: b.RoundTrip, sentAt: b.SentAt, batch: 1}
	if b.Err == nil {
		a.v = b.Verdicts[0]
	}
	return a
}

// waitDirect is wait without combining.
func (e *Engine) waitDirect(ctx context.Context, p Target, n int64, limit time.Time, d *Outcome) (bool, error) {
	ctxDeadline, hasDeadline := ctx.Deadline()
	var timer Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		a := e.direct(ctx, p, n, false)
		d.RoundTrip, d.Batch = a.roundTrip, a.batch
		if err := firstErr(a.err, a.v.Err); err != nil || a.v.Res.Granted {
			return a.v.Res.Granted, err
		}
		hint := a.v.Res.RetryAfter
		d.RetryAfter = hint
		wake := e.time.Now().Add(hint)
		if !limit.IsZero() && wake.After(limit) {
			return false, nil
		}
		if hasDeadline && wake.After(ctxDeadline) {
			return false, fmt.Errorf("ratelimiter: waiting %v for permits would pass the context deadline: %w",
				hint, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = e.time.NewTimer(hint)
		} else {
			timer.Reset(hint)
		}
		slept := e.time.Now()
		select {
		case <-ctx.Done():
			d.Waited += e.time.Now().Sub(slept)
			return false, ctx.Err()
		case <-timer.C():
			d.Waited += e.time.Now().Sub(slept)
		}
	}
}
