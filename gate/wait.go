package gate

import (
	"context"
	"errors"
	"time"
)

// Wait takes the Gate's permits from t before an outgoing call, waiting
// up to maxWait for them, or when maxWait is 0 up to ctx's deadline (as
// long as it takes when ctx has none). It returns true once granted and
// false, at once, when the wait hint shows that the permits cannot come
// within maxWait or ctx's deadline. Other errors are Redis's, the
// limiter's (ErrNotInitialized when the Gate has no Config and nobody
// configured it, ErrPermitsExceedRate) or ctx's when ctx ends while
// waiting.
func (g *Gate) Wait(ctx context.Context, rl Target, maxWait time.Duration) (bool, error) {
	var ok bool
	err := g.retry(ctx, rl, func() error {
		var err error
		if maxWait > 0 {
			ok, err = rl.TryAcquireTimeout(ctx, g.permits, maxWait)
		} else {
			err = rl.Acquire(ctx, g.permits)
			ok = err == nil
		}
		return err
	})
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The wait would pass ctx's deadline.
		return false, nil
	}
	return ok, err
}
