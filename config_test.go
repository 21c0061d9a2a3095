package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func TestTrySetRate(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))

	cfg := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 7, Interval: 1500 * time.Millisecond}
	ok, err := l.TrySetRate(ctx, cfg)
	require.NoError(t, err)
	require.True(t, ok)
	h, err := rdb.HGetAll(ctx, l.Keys().Config).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"rate": "7", "interval": "1500", "type": "1", "keepAliveTime": "0"}, h)
	ttl, err := rdb.PTTL(ctx, l.Keys().Config).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "no keep-alive, no TTL")

	// A second call changes nothing and says so.
	ok, err = l.TrySetRate(ctx, ratelimiter.Config{Rate: 99, Interval: time.Minute, KeepAlive: time.Hour})
	require.NoError(t, err)
	require.False(t, ok)
	h2, err := rdb.HGetAll(ctx, l.Keys().Config).Result()
	require.NoError(t, err)
	require.Equal(t, h, h2)
	got, err := l.Config(ctx)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
}

func TestTrySetRateKeepAliveTTL(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	ok, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Second, KeepAlive: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	ttl, err := rdb.PTTL(ctx, l.Keys().Config).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute)
	require.LessOrEqual(t, ttl, time.Hour)
	require.Equal(t, "3600000", rdb.HGet(ctx, l.Keys().Config, "keepAliveTime").Val())
}

func TestTrySetRateFillsMissingFields(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	// A config hash that a Redisson older than 3.38 wrote has no keepAliveTime.
	require.NoError(t, rdb.HSet(ctx, l.Keys().Config, "rate", "3", "interval", "1000", "type", "0").Err())
	ok, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: 2 * time.Second})
	require.NoError(t, err)
	require.False(t, ok, "type was present")
	h := rdb.HGetAll(ctx, l.Keys().Config).Val()
	require.Equal(t, map[string]string{"rate": "3", "interval": "1000", "type": "0", "keepAliveTime": "0"}, h)
}

func TestConfigMissingAndOld(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	got, err := l.Config(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.Config{}, got)

	require.NoError(t, rdb.HSet(ctx, l.Keys().Config, "rate", "3", "interval", "250", "type", "1").Err())
	got, err = l.Config(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 3, Interval: 250 * time.Millisecond}, got)
}

func TestSetRateResetsNewModeState(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := ratelimiter.Config{Mode: mode, Rate: 5, Interval: time.Second}
			l, rdb, _ := setup(t, cfg)
			ok, err := l.TryAcquire(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, int64(2), rdb.Exists(ctx, valueKey(l, mode), permitsKey(l, mode)).Val())

			cfg.Rate, cfg.KeepAlive = 10, 5*time.Second
			require.NoError(t, l.SetRate(ctx, cfg))
			h := rdb.HGetAll(ctx, l.Keys().Config).Val()
			require.Equal(t, "10", h["rate"])
			require.Equal(t, "5000", h["keepAliveTime"])
			require.Equal(t, int64(0), rdb.Exists(ctx, valueKey(l, mode), permitsKey(l, mode)).Val())
			ttl := rdb.PTTL(ctx, l.Keys().Config).Val()
			require.Greater(t, ttl, 4*time.Second)

			n, err := l.AvailablePermits(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(10), n)
		})
	}
}

func TestSetRatePerClientLeavesOtherClients(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	a := ratelimiter.NewClient(rdb).Limiter(name)
	b := ratelimiter.NewClient(rdb).Limiter(name)
	cfg := ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 3, Interval: time.Minute}
	_, err := a.TrySetRate(ctx, cfg)
	require.NoError(t, err)
	for _, l := range []*ratelimiter.Limiter{a, b} {
		ok, err := l.TryAcquire(ctx, 3)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, a.SetRate(ctx, cfg))
	require.Equal(t, int64(0), rdb.Exists(ctx, a.Keys().ClientValue, a.Keys().ClientPermits).Val())
	require.Equal(t, int64(2), rdb.Exists(ctx, b.Keys().ClientValue, b.Keys().ClientPermits).Val())
	nb, err := b.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(0), nb)
}

func TestSetRateModeChangeDeletesAllState(t *testing.T) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: time.Second})
	k := l.Keys()
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, k.ClientValue, 1, 0).Err())
	for _, opts := range [][]ratelimiter.SetRateOption{nil, {ratelimiter.KeepState()}} {
		require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 5, Interval: time.Second}, opts...))
		require.Equal(t, int64(0), rdb.Exists(ctx, k.Value, k.Permits, k.ClientValue, k.ClientPermits).Val())
		require.Equal(t, "1", rdb.HGet(ctx, k.Config, "type").Val())
		require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: time.Second}))
		_, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
	}
}

func TestUpdateRate(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	cfg := ratelimiter.Config{Rate: 5, Interval: time.Second}
	ok, err := l.UpdateRate(ctx, cfg)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, int64(0), rdb.Exists(ctx, l.Keys().Config).Val(), "a refused update writes nothing")

	_, err = l.TrySetRate(ctx, cfg)
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)
	ok, err = l.UpdateRate(ctx, ratelimiter.Config{Rate: 8, Interval: time.Second})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "8", rdb.HGet(ctx, l.Keys().Config, "rate").Val())
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(8), n, "without KeepState the budget starts afresh")
}

func TestKeepState(t *testing.T) {
	ctx := context.Background()
	cfg := ratelimiter.Config{Rate: 10, Interval: 10 * time.Second}
	l, rdb, clock := setup(t, cfg)
	k := l.Keys()
	// Records at t0 (3 permits) and t0+6s (4 permits).
	_, err := l.TryAcquire(ctx, 3)
	require.NoError(t, err)
	clock.Advance(6 * time.Second)
	_, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)

	// A new interval of 5 s drops the first record; 4 permits stay used.
	ok, err := l.UpdateRate(ctx, ratelimiter.Config{Rate: 6, Interval: 5 * time.Second, KeepAlive: time.Minute}, ratelimiter.KeepState())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "2", rdb.Get(ctx, k.Value).Val())
	require.Equal(t, int64(1), rdb.ZCard(ctx, k.Permits).Val())
	for _, key := range []string{k.Config, k.Value, k.Permits} {
		require.Greater(t, rdb.PTTL(ctx, key).Val(), 50*time.Second, key)
	}

	// A rate below what is used keeps the debt: 3 - 4 = -1, and nothing
	// is available.
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: 3, Interval: 5 * time.Second, KeepAlive: time.Minute}, ratelimiter.KeepState()))
	require.Equal(t, "-1", rdb.Get(ctx, k.Value).Val())
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "never below 0")
}

// Lowering a rate with KeepState under the permits in the window is not
// undone by a later Release (issue: 225 in the window of a limiter
// lowered from 1000 to 100, a release of 100 unused made 100 available):
// the window never holds more than the new rate's worth of new grants
// until its records leave it.
func TestKeepStateDebtSurvivesRelease(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 1000, Interval: 10 * time.Second})
	for i := 0; i < 9; i++ {
		ok, err := l.TryAcquire(ctx, 25)
		require.NoError(t, err)
		require.True(t, ok)
		clock.Advance(100 * time.Millisecond)
	}
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: 100, Interval: 10 * time.Second}, ratelimiter.KeepState()))
	require.NoError(t, l.Release(ctx, 100))
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "125 still in the window of a 100 limiter")
	ok, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok)
	// As the records leave the window, what comes back is the rate less
	// what is left in it, never more.
	clock.Advance(10 * time.Second)
	n, err = l.AvailablePermits(ctx)
	require.NoError(t, err)
	held := int64(0)
	for _, z := range rdb.ZRangeWithScores(ctx, l.Keys().Permits, 0, -1).Val() {
		if int64(z.Score) > clock.Millis()-10_000 {
			m, err := wire.Decode([]byte(z.Member.(string)))
			require.NoError(t, err)
			held += int64(m.Permits)
		}
	}
	require.LessOrEqual(t, n+held, int64(100), "available %d beside %d still in the window", n, held)
}

func TestConfigValidation(t *testing.T) {
	ctx := context.Background()
	// Nothing listens here: an error other than ErrInvalidArgument would
	// mean that something was sent.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l := ratelimiter.NewClient(rdb).Limiter("x")
	bad := []ratelimiter.Config{
		{Rate: 0, Interval: time.Second},
		{Rate: -1, Interval: time.Second},
		{Rate: 1 << 53, Interval: time.Second},
		{Rate: 1, Interval: 0},
		{Rate: 1, Interval: 999 * time.Microsecond},
		{Rate: 1, Interval: 1500 * time.Microsecond},
		{Rate: 1, Interval: time.Second, KeepAlive: 500 * time.Millisecond},
		{Rate: 1, Interval: time.Second, KeepAlive: -time.Second},
		{Rate: 1, Interval: time.Second, KeepAlive: time.Minute + time.Microsecond},
		{Mode: 2, Rate: 1, Interval: time.Second},
		{Mode: -1, Rate: 1, Interval: time.Second},
	}
	for _, cfg := range bad {
		_, err := l.TrySetRate(ctx, cfg)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, "%+v", cfg)
		require.ErrorIs(t, l.SetRate(ctx, cfg), ratelimiter.ErrInvalidArgument, "%+v", cfg)
		_, err = l.UpdateRate(ctx, cfg, ratelimiter.KeepState())
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, "%+v", cfg)
	}
	// The largest exact rate is accepted (and then fails to connect).
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1<<53 - 1, Interval: time.Second, KeepAlive: time.Second})
	require.Error(t, err)
	require.NotErrorIs(t, err, ratelimiter.ErrInvalidArgument)
}
