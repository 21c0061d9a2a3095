package ratelimiter

import "context"

// Release gives n permits back to the limiter, up to its rate; the records
// of the acquisitions stay until their interval ends. n = 0 does nothing
// and sends nothing. It fails with ErrInvalidArgument for n < 0 or n over
// MaxPermits, and ErrNotInitialized when the limiter is not configured.
// Redisson has release since 3.52.
func (r *Limiter) Release(ctx context.Context, n int64) error {
	if n < 0 || n > MaxPermits {
		return r.check(invalid("permits %d out of range [0, %d]", n, int64(MaxPermits)))
	}
	if err := r.check(nil); err != nil || n == 0 {
		return err
	}
	_, err := r.eval(ctx, scriptRelease, r.keyList, n)
	return err
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
	return r.eval(ctx, scriptAvailable, r.keyList, r.nowMillis())
}
