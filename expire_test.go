package ratelimiter_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

func allKeys(l *ratelimiter.Limiter) []string {
	k := l.Keys()
	return []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits}
}

// fillAllKeys gives the limiter all five keys, both modes' state.
func fillAllKeys(t *testing.T) (*ratelimiter.Limiter, func(string) time.Duration) {
	ctx := context.Background()
	l, rdb, _ := setup(t, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 10, Interval: time.Minute})
	_, err := l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 3, 0).Err())
	require.NoError(t, rdb.ZAdd(ctx, l.Keys().Permits, redisZ(1)).Err())
	require.Equal(t, int64(5), rdb.Exists(ctx, allKeys(l)...).Val())
	return l, func(key string) time.Duration { return rdb.PTTL(ctx, key).Val() }
}

func TestExpire(t *testing.T) {
	ctx := context.Background()
	l, ttl := fillAllKeys(t)
	ok, err := l.Expire(ctx, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range allKeys(l) {
		require.Greater(t, ttl(k), 50*time.Second, k)
	}
	d, err := l.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Greater(t, d, 50*time.Second)
	require.LessOrEqual(t, d, time.Minute)

	// NX: every key has a TTL, so nothing changes.
	ok, err = l.ExpireIf(ctx, time.Hour, ratelimiter.ExpireNX)
	require.NoError(t, err)
	require.False(t, ok)
	// GT: an hour is later.
	ok, err = l.ExpireIf(ctx, time.Hour, ratelimiter.ExpireGT)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, ttl(l.Keys().ClientPermits), 59*time.Minute)
	// LT with a later time changes nothing.
	ok, err = l.ExpireIf(ctx, 2*time.Hour, ratelimiter.ExpireLT)
	require.NoError(t, err)
	require.False(t, ok)

	ok, err = l.ClearExpire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range allKeys(l) {
		require.Equal(t, time.Duration(-1), ttl(k), k)
	}
	ok, err = l.ClearExpire(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	d, err = l.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.TTLPersistent, d)

	// XX: no key has a TTL now.
	ok, err = l.ExpireIf(ctx, time.Hour, ratelimiter.ExpireXX)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestExpireAt(t *testing.T) {
	ctx := context.Background()
	l, ttl := fillAllKeys(t)
	at := time.Now().Add(time.Hour)
	ok, err := l.ExpireAt(ctx, at)
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range allKeys(l) {
		require.InDelta(t, time.Hour.Seconds(), ttl(k).Seconds(), 60, k)
	}
	ok, err = l.ExpireAtIf(ctx, at.Add(-time.Minute), ratelimiter.ExpireGT)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = l.ExpireAtIf(ctx, at.Add(-time.Minute), ratelimiter.ExpireLT)
	require.NoError(t, err)
	require.True(t, ok)

	// A time in the past deletes the limiter, as in Redis.
	ok, err = l.ExpireAt(ctx, time.Now().Add(-time.Second))
	require.NoError(t, err)
	require.True(t, ok)
	exists, err := l.Exists(ctx)
	require.NoError(t, err)
	require.False(t, exists)
	d, err := l.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.TTLMissing, d)
}

func TestDeleteAndExists(t *testing.T) {
	ctx := context.Background()
	l, ttl := fillAllKeys(t)
	ok, err := l.Exists(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.Delete(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range allKeys(l) {
		require.Equal(t, time.Duration(-2), ttl(k), k)
	}
	ok, err = l.Delete(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = l.Exists(ctx)
	require.NoError(t, err)
	require.False(t, ok)
}

func TestExpireValidation(t *testing.T) {
	ctx := context.Background()
	l, _ := fillAllKeys(t)
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, time.Second + time.Microsecond} {
		_, err := l.Expire(ctx, d)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, d)
	}
	_, err := l.ExpireIf(ctx, time.Second, "YY")
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	_, err = l.ExpireAtIf(ctx, time.Now(), "nx")
	require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	d, err := l.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.TTLPersistent, d, "the refused calls changed nothing")
}

// TestExpireAtOutOfRange: a time whose Unix milliseconds do not fit in an
// int64 (UnixMilli would wrap to the past and Redis would delete the
// limiter), and the zero Time, are refused before anything is sent; the
// latest representable millisecond is sent as it is.
func TestExpireAtOutOfRange(t *testing.T) {
	ctx := context.Background()
	l, _ := fillAllKeys(t)
	rdb := newRedis(t)
	before := snapshot(t, rdb, l)
	for _, at := range []time.Time{
		time.Unix(1<<62, 0),
		time.UnixMilli(math.MaxInt64).Add(time.Millisecond),
		time.UnixMilli(math.MinInt64).Add(-time.Millisecond),
		{},
	} {
		for _, cond := range []ratelimiter.ExpireCondition{"", ratelimiter.ExpireGT} {
			ok, err := l.ExpireAtIf(ctx, at, cond)
			require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, "%v", at)
			require.False(t, ok)
		}
	}
	require.Equal(t, before, snapshot(t, rdb, l), "nothing changed")
	ok, err := l.ExpireAt(ctx, time.UnixMilli(math.MaxInt64))
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range allKeys(l) {
		// PTTL in ms, read raw: as a time.Duration it would overflow.
		ms, err := rdb.Do(ctx, "PTTL", k).Int64()
		require.NoError(t, err)
		require.Greater(t, ms, int64(math.MaxInt64/2), k)
	}
}

// TestRemainTimeToLiveBeyondDuration: a TTL longer than a time.Duration
// holds comes back as the longest Duration, not wrapped around.
func TestRemainTimeToLiveBeyondDuration(t *testing.T) {
	ctx := context.Background()
	l, _ := fillAllKeys(t)
	ok, err := l.ExpireAt(ctx, time.Now().AddDate(1000, 0, 0))
	require.NoError(t, err)
	require.True(t, ok)
	d, err := l.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Duration(math.MaxInt64), d)
}
