package gate

import (
	"context"
	"errors"
	"time"

	"github.com/goredisson/ratelimiter"
)

// Outcome is the decision on an incoming request.
type Outcome struct {
	// Result is the reply of the acquisition that decided. For a grant
	// that came after waiting (Exact false) only Granted, Limit, Interval
	// and Part (those of the refusal before the wait) are known.
	Result ratelimiter.Result
	// Exact reports whether Result.Remaining and Result.ResetAfter are
	// those of the deciding reply.
	Exact bool
	// Waited is the time the decision took.
	Waited time.Duration
	// Note is an error to report that did not stop the decision:
	// ErrPermitsExceedRate, when the limiter's rate was lowered below the
	// permits a request takes, which refuses every request.
	Note error
}

// Decide takes the Gate's permits from t for an incoming request: one
// Allow, and when that is refused with a hint within wait (and shadow is
// false), a wait of up to the rest of wait with TryAcquireTimeout. A
// wait that would pass ctx's deadline is a refusal. The error is Redis's
// or ctx's; ErrPermitsExceedRate is a refusal with the Config's interval
// (of the part whose rate is below the permits) as hint, Result.Part
// naming that part, and the error in Outcome.Note.
func (g *Gate) Decide(ctx context.Context, t Target, wait time.Duration, shadow bool) (Outcome, error) {
	return g.DecideN(ctx, t, g.permits, wait, shadow)
}

// DecideN is Decide for n permits instead of the Gate's: a request whose
// cost varies. n must be at least 1; n over a part's rate is
// ErrPermitsExceedRate as in Decide.
func (g *Gate) DecideN(ctx context.Context, t Target, n int64, wait time.Duration, shadow bool) (Outcome, error) {
	start := time.Now()
	var o Outcome
	err := g.retry(ctx, t, func() error {
		var err error
		o, err = g.decide(ctx, t, n, wait, shadow, start)
		return err
	})
	o.Waited = time.Since(start)
	if errors.Is(err, ratelimiter.ErrPermitsExceedRate) {
		part := g.partNamed(t, err)
		res := ratelimiter.Result{RetryAfter: max(g.cfgs[part].Interval, time.Second), Part: part}
		return Outcome{Result: res, Exact: true, Waited: o.Waited, Note: err}, nil
	}
	return o, err
}

// partNamed returns the index of the part of t that err names, or 0.
func (g *Gate) partNamed(t Target, err error) int {
	var le *ratelimiter.LimiterError
	parts, perr := g.parts(t)
	if perr != nil || !errors.As(err, &le) {
		return 0
	}
	for i, rl := range parts {
		if rl.Name() == le.Limiter {
			return i
		}
	}
	return 0
}

func (g *Gate) decide(ctx context.Context, rl Target, n int64, wait time.Duration, shadow bool, start time.Time) (Outcome, error) {
	res, err := rl.Allow(ctx, n)
	first := Outcome{Result: res, Exact: true}
	left := wait - time.Since(start)
	if err != nil || res.Granted || shadow || res.RetryAfter > left {
		return first, err
	}
	ok, err := rl.TryAcquireTimeout(ctx, n, left)
	switch {
	case ok:
		return Outcome{Result: ratelimiter.Result{Granted: true, Limit: res.Limit, Interval: res.Interval, Part: res.Part}}, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// The wait would pass the request's deadline: refused.
		return first, nil
	case err != nil:
		return Outcome{}, err
	}
	// Others took the permits within the bound: the current hint.
	res, err = rl.Allow(ctx, n)
	return Outcome{Result: res, Exact: true}, err
}
