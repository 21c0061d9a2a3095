package ratelimiter

import (
	"context"

	"github.com/goredisson/ratelimiter/internal/script"
)

// Release gives n permits back to the limiter now, up to its rate. It
// takes the same number out of permit records in the window (shrinking or
// removing them), so that the permits are not given back a second time
// when those records expire: a release never raises the budget of a later
// window. It takes them out of this Client's own records first, then out
// of Redisson's, oldest first, and out of other Go Clients' only when
// those hold too few (an operator's release from the CLI), never out of a
// record granted after the released grant while that grant's record is in
// the window: neither another Client's callers nor this Client's other
// callers get back permits they used, and no real-time interval holds more
// than the rate. Release only what the caller took within its interval: a
// release after the grant's interval ended gives back permits that
// already came back, out of newer records (docs/differences.md). It gives
// back at most what this Client's records among the 256 newest records in
// the window hold (then Redisson's, then other Go Clients'). n = 0 does
// nothing and sends nothing.
//
// Java Redisson's release (3.52 and later) only raises the value and
// leaves the records, so on a limiter shared with Java the permits it
// gives back are counted again when their records expire: each of its
// releases lets one later window grant up to that many permits over the
// rate (docs/protocol.md). It fails with ErrInvalidArgument for n < 0 or n over
// MaxPermits, and ErrNotInitialized when the limiter is not configured.
// Redisson has release since 3.52.
//
// On a Client with leases (WithLeases) the permits go first into this
// Client's live lease of the limiter, if any, up to what it handed out:
// that part is taken with no Redis call (the lease's record still counts
// it; it is handed out again or given back when the lease ends), and when
// it is all of n, Release returns nil having sent nothing.
func (r *Limiter) Release(ctx context.Context, n int64) error {
	if err := r.check(checkRelease(n, 1)); err != nil || n == 0 {
		r.c.eng.Forget() // local refusals may no longer hold
		return err
	}
	// Into the live lease first, up to what it handed out, then Redis.
	return r.c.eng.Release(ctx, r.target(), n)
}

// AvailablePermits returns the permits that can be taken now, after
// releasing the records whose interval has ended. It fails with
// ErrNotInitialized when the limiter is not configured.
//
// Unlike Redisson, it never reports (or stores) more than the rate when
// permits given back by Release meet records that expire: it recounts from
// the records in the window, as an acquisition does. Redisson stores the
// uncapped sum, which lets a later burst take more than the rate in one
// interval.
func (r *Limiter) AvailablePermits(ctx context.Context) (int64, error) {
	if err := r.check(nil); err != nil {
		return 0, err
	}
	return r.eval(ctx, script.Available, r.sk.All, r.c.stamp())
}
