package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

func TestRelease(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Minute})
	k := l.Keys()

	// No value yet: release starts from the rate and caps there.
	require.NoError(t, l.Release(ctx, 3))
	require.Equal(t, "10", rdb.Get(ctx, k.Value).Val())

	_, err := l.TryAcquire(ctx, 8)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, 5))
	require.Equal(t, "7", rdb.Get(ctx, k.Value).Val())
	require.Equal(t, int64(1), rdb.ZCard(ctx, k.Permits).Val(), "records stay")
	require.NoError(t, l.Release(ctx, 100))
	require.Equal(t, "10", rdb.Get(ctx, k.Value).Val())

	other := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	require.ErrorIs(t, other.Release(ctx, 1), ratelimiter.ErrNotInitialized)
}

func TestAvailablePermits(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
	k := l.Keys()
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(10), n)
	require.Equal(t, "10", rdb.Get(ctx, k.Value).Val(), "first read stores the rate")

	_, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)
	clock.Advance(500 * time.Millisecond)
	_, err = l.TryAcquire(ctx, 5)
	require.NoError(t, err)
	n, err = l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	clock.Advance(600 * time.Millisecond)
	n, err = l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	require.Equal(t, "5", rdb.Get(ctx, k.Value).Val())
	require.Equal(t, int64(1), rdb.ZCard(ctx, k.Permits).Val())

	other := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	_, err = other.AvailablePermits(ctx)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
}

// TestAvailablePermitsNeverExceedsRate covers a Redisson defect: permits
// given back by release plus expiring records are summed without a cap,
// and the stored value then lets a burst exceed the rate.
func TestAvailablePermitsNeverExceedsRate(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
	_, err := l.TryAcquire(ctx, 10)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx, 5))
	clock.Advance(time.Second)
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(10), n, "Redisson would store and report 15")
	require.Equal(t, "10", rdb.Get(ctx, l.Keys().Value).Val())
}

func TestAvailablePermitsCopiesConfigTTL(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
	require.NoError(t, rdb.PExpire(ctx, l.Keys().Config, time.Minute).Err())
	_, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	ttl := rdb.PTTL(ctx, l.Keys().Value).Val()
	require.Greater(t, ttl, 50*time.Second)
	require.LessOrEqual(t, ttl, time.Minute)
}

func TestTTLRefresh(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
		t.Run(mode.String()+"/keep-alive", func(t *testing.T) {
			l, rdb, _ := setup(t, ratelimiter.Config{Mode: mode, Rate: 10, Interval: time.Second, KeepAlive: time.Hour})
			// Shorten every TTL, then show that each kind of use renews them.
			for _, use := range []func() error{
				func() error { _, err := l.TryAcquire(ctx, 2); return err },
				func() error { _, err := l.TryAcquire(ctx, 10); return err }, // refused
				func() error { return l.Release(ctx, 1) },
			} {
				for _, key := range []string{l.Keys().Config, valueKey(l, mode), permitsKey(l, mode)} {
					rdb.PExpire(ctx, key, time.Minute)
				}
				require.NoError(t, use())
				for _, key := range []string{l.Keys().Config, valueKey(l, mode), permitsKey(l, mode)} {
					require.Greater(t, rdb.PTTL(ctx, key).Val(), 59*time.Minute, key)
				}
			}
		})
		t.Run(mode.String()+"/config-ttl", func(t *testing.T) {
			l, rdb, _ := setup(t, ratelimiter.Config{Mode: mode, Rate: 10, Interval: time.Second})
			_, err := l.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, valueKey(l, mode)).Val())
			require.NoError(t, rdb.PExpire(ctx, l.Keys().Config, 30*time.Second).Err())
			_, err = l.TryAcquire(ctx, 1)
			require.NoError(t, err)
			for _, key := range []string{valueKey(l, mode), permitsKey(l, mode)} {
				ttl := rdb.PTTL(ctx, key).Val()
				require.Greater(t, ttl, 20*time.Second, key)
				require.LessOrEqual(t, ttl, 30*time.Second, key)
			}
			require.NoError(t, l.Release(ctx, 1))
		})
	}
}

// A Release takes its permits out of the releasing Client's own records,
// oldest first, never out of another Go Client's nor out of a record
// granted after the releaser's: B takes 50 at 0 ms, A takes 50 at 505 ms,
// B releases its 50 unused at 611 ms, and A asks for 50 at 611, 1000 and
// 1504 ms, all within A's interval [505 ms, 1505 ms) of a 100/s limiter.
// Taken out of A's newer record (the newest-first rule), the 50 came back
// at 611 ms and B's record gave 50 more at 1000 ms: 150 granted within
// the interval. A and B as two Clients, and as two callers of one Client (one
// Limiter, whose records all carry the Client's tag).
func TestReleaseNeverFreesNewerGrants(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "two-clients", true: "one-client"}[shared], func(t *testing.T) {
			ctx := context.Background()
			b, rdb, clock := setup(t, ratelimiter.Config{Rate: 100, Interval: time.Second})
			a := b
			if !shared {
				a = ratelimiter.NewClient(rdb, clock.option()).Limiter(b.Name())
			}
			take := func(l *ratelimiter.Limiter, n int64) bool {
				ok, err := l.TryAcquire(ctx, n)
				require.NoError(t, err)
				return ok
			}
			require.True(t, take(b, 50))
			clock.Advance(505 * time.Millisecond)
			require.True(t, take(a, 50))
			granted := int64(50)                  // A's, at 505 ms
			clock.Advance(106 * time.Millisecond) // 611 ms
			require.NoError(t, b.Release(ctx, 50))
			for _, step := range []time.Duration{0, 389 * time.Millisecond, 504 * time.Millisecond} { // 611, 1000, 1504 ms
				clock.Advance(step)
				if take(a, 50) {
					granted += 50
				}
			}
			require.Equal(t, int64(100), granted, "granted within [505 ms, 1505 ms): A's 50 and B's unused 50, once")
		})
	}
}
