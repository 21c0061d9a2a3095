package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimiter "github.com/goredisson/ratelimiter"
)

// A Client whose clock reads behind the window's newest record (it was
// held after reading it, or its clock is behind another writer's) stamps
// its record at the newest one instead, so that its permits do not come
// back before the newer ones; a newest record more than an interval ahead
// of its clock is not followed.
func TestStampNeverBeforeNewest(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	ahead := ratelimiter.NewClient(rdb).Limiter(name)
	_, err := ahead.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second})
	require.NoError(t, err)
	ok, err := ahead.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	newest := rdb.ZRangeWithScores(ctx, ahead.Keys().Permits, -1, -1).Val()[0].Score

	behind := ratelimiter.NewClient(rdb, aheadBy(-500*time.Millisecond)).Limiter(name)
	ok, err = behind.TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	recs := rdb.ZRangeWithScores(ctx, ahead.Keys().Permits, 0, -1).Val()
	require.Len(t, recs, 2)
	for _, r := range recs {
		require.Equal(t, newest, r.Score, "a record stamped before the newest one")
	}

	far := ratelimiter.NewClient(rdb, aheadBy(-2*time.Second)).Limiter(name)
	ok, err = far.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	oldest := rdb.ZRangeWithScores(ctx, ahead.Keys().Permits, 0, 0).Val()[0].Score
	require.Less(t, oldest, newest-1500, "the newest record is more than an interval ahead: not followed")
}
