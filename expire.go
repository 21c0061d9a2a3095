package ratelimiter

import (
	"context"
	"math"
	"time"

	"github.com/goredisson/ratelimiter/internal/script"
)

// ExpireCondition limits when Expire and ExpireAt set a TTL, like the
// NX, XX, GT and LT flags of Redis's PEXPIRE (Redis 7.0 and later).
type ExpireCondition string

const (
	// ExpireNX sets the TTL only on keys that have none.
	ExpireNX ExpireCondition = "NX"
	// ExpireXX sets the TTL only on keys that have one.
	ExpireXX ExpireCondition = "XX"
	// ExpireGT sets the TTL only when it is later than the current one.
	ExpireGT ExpireCondition = "GT"
	// ExpireLT sets the TTL only when it is earlier than the current one.
	ExpireLT ExpireCondition = "LT"
)

// TTLPersistent and TTLMissing are what RemainTimeToLive returns for a
// limiter without a TTL and for one that does not exist, the values of
// Redis's PTTL and Redisson's remainTimeToLive.
const (
	TTLPersistent time.Duration = -1
	TTLMissing    time.Duration = -2
)

// Expire sets a TTL of ttl (whole milliseconds, at least 1 ms) on all five
// keys of the limiter. It reports whether any key got it.
func (r *Limiter) Expire(ctx context.Context, ttl time.Duration) (bool, error) {
	return r.ExpireIf(ctx, ttl, "")
}

// ExpireIf is Expire that sets the TTL only on the keys for which cond
// holds. An empty cond means always.
func (r *Limiter) ExpireIf(ctx context.Context, ttl time.Duration, cond ExpireCondition) (bool, error) {
	if ttl < time.Millisecond || ttl%time.Millisecond != 0 {
		return false, r.check(invalid("ttl %v must be a whole number of milliseconds, at least 1ms", ttl))
	}
	return r.expire(ctx, cond, "PEXPIRE", ttl.Milliseconds())
}

// ExpireAt makes all five keys of the limiter expire at t (to the
// millisecond; a time in the past deletes them). It reports whether any
// key changed. It fails with ErrInvalidArgument, sending nothing, for the
// zero Time and for a t whose Unix time in milliseconds does not fit in an
// int64 (beyond about 292 million years from 1970 either way).
func (r *Limiter) ExpireAt(ctx context.Context, t time.Time) (bool, error) {
	return r.ExpireAtIf(ctx, t, "")
}

// ExpireAtIf is ExpireAt that acts only on the keys for which cond holds.
// An empty cond means always.
func (r *Limiter) ExpireAtIf(ctx context.Context, t time.Time, cond ExpireCondition) (bool, error) {
	ms, ok := unixMilli(t)
	if !ok {
		return false, r.check(invalid("expiry time %v is zero or its Unix milliseconds overflow an int64", t))
	}
	return r.expire(ctx, cond, "PEXPIREAT", ms)
}

// Limits of Time.UnixMilli: beyond them its result wraps around.
var (
	minUnixMilli = time.UnixMilli(math.MinInt64)
	maxUnixMilli = time.UnixMilli(math.MaxInt64)
)

// unixMilli returns t's Unix time in milliseconds, and false for the zero
// Time or when it does not fit in an int64.
func unixMilli(t time.Time) (int64, bool) {
	if t.IsZero() || t.Before(minUnixMilli) || t.After(maxUnixMilli) {
		return 0, false
	}
	return t.UnixMilli(), true
}

// ClearExpire removes the TTL from all five keys and reports whether any
// key had one.
func (r *Limiter) ClearExpire(ctx context.Context) (bool, error) {
	return r.expire(ctx, "", "PERSIST")
}

func (r *Limiter) expire(ctx context.Context, cond ExpireCondition, args ...any) (bool, error) {
	switch cond {
	case "":
	case ExpireNX, ExpireXX, ExpireGT, ExpireLT:
		args = append(args, string(cond))
	default:
		return false, r.check(invalid("unknown expire condition %q", string(cond)))
	}
	if err := r.check(nil); err != nil {
		return false, err
	}
	if args[0] != "PERSIST" {
		// The keys may expire, the lease's record with them: no hand-out
		// from a lease after the call; its rest given back.
		defer r.dropLease()()
	}
	changed, err := r.eval(ctx, script.Expire, r.sk.All, args...)
	return changed == 1, err
}

// RemainTimeToLive returns the TTL of the limiter's config, TTLPersistent
// when it has none and TTLMissing when the limiter does not exist. A TTL
// longer than a time.Duration holds (about 292 years, which ExpireAt can
// set) is returned as the longest Duration.
func (r *Limiter) RemainTimeToLive(ctx context.Context) (time.Duration, error) {
	if err := r.check(nil); err != nil {
		return 0, err
	}
	ms, err := script.Bounded(ctx, func() (int64, error) {
		return r.c.rdb.Do(ctx, "PTTL", r.keys.Config).Int64()
	})
	if err != nil {
		return 0, r.result(err)
	}
	return ttlDuration(ms), nil
}

// ttlDuration turns a PTTL reply into a Duration: -1 and -2 become
// TTLPersistent and TTLMissing, milliseconds beyond a Duration the
// longest one.
func ttlDuration(ms int64) time.Duration {
	switch {
	case ms == -1:
		return TTLPersistent
	case ms < 0:
		return TTLMissing
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Delete deletes all five keys of the limiter and reports whether any
// existed.
func (r *Limiter) Delete(ctx context.Context) (bool, error) {
	defer r.c.eng.Forget() // local refusals may no longer hold
	if err := r.check(nil); err != nil {
		return false, err
	}
	defer r.dropLease()() // no hand-out from a lease after the call
	n, err := script.Bounded(ctx, func() (int64, error) {
		return r.c.rdb.Del(ctx, r.sk.All...).Result()
	})
	return n > 0, r.result(err)
}

// Exists reports whether the limiter's config exists.
func (r *Limiter) Exists(ctx context.Context) (bool, error) {
	if err := r.check(nil); err != nil {
		return false, err
	}
	n, err := script.Bounded(ctx, func() (int64, error) {
		return r.c.rdb.Exists(ctx, r.keys.Config).Result()
	})
	return n > 0, r.result(err)
}
