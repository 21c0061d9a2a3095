package ratelimiter

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
// given back when its reply comes (Client.call).
func direct(ctx context.Context, t acquirer, n int64, detail bool) answer {
	form := formSingle
	if detail {
		form = formTable
	}
	b := t.client().call(ctx, nil, t, form, []int64{n})
	a := answer{err: b.err, roundTrip: b.roundTrip, sentAt: b.sentAt, batch: 1}
	if b.err == nil {
		a.v = b.verdicts[0]
	}
	return a
}

// waitDirect is wait without combining.
func waitDirect(ctx context.Context, p acquirer, n int64, limit time.Time, d *Decision) (bool, error) {
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
		a := direct(ctx, p, n, false)
		d.RoundTrip, d.Batch = a.roundTrip, a.batch
		if err := firstErr(a.err, a.v.err); err != nil || a.v.res.Granted {
			return a.v.res.Granted, err
		}
		hint := a.v.res.RetryAfter
		d.RetryAfter = hint
		wake := time.Now().Add(hint)
		if !limit.IsZero() && wake.After(limit) {
			return false, nil
		}
		if hasDeadline && wake.After(ctxDeadline) {
			return false, fmt.Errorf("ratelimiter: waiting %v for permits would pass the context deadline: %w",
				hint, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(hint)
		} else {
			timer.Reset(hint)
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
