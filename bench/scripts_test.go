package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// The classic scripts take their time from ARGV, so these tests walk them
// through windows without sleeping, and check each rule by reading the
// keys the script keeps.

type decider func(classic, context.Context, int64) (bool, error)

func newClassic(t *testing.T, rate, intervalMs int64) (classic, *redis.Client) {
	rdb := redistest.Client(t, redisAddr)
	return classic{rdb: rdb, key: redistest.Name(t), rate: rate, interval: intervalMs}, rdb
}

// grants runs f at each time and returns how many were granted.
func grants(t *testing.T, c classic, f decider, times ...int64) int {
	t.Helper()
	n := 0
	for _, now := range times {
		ok, err := f(c, context.Background(), now)
		require.NoError(t, err)
		if ok {
			n++
		}
	}
	return n
}

// at returns n copies of now.
func at(now int64, n int) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = now
	}
	return ts
}

func TestFixedWindowGrantsRatePerClockWindow(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClassic(t, 3, 1000)
	// window 5 is [5000, 6000): 3 of 5 granted; every call is counted
	require.Equal(t, 3, grants(t, c, classic.fixedWindow, 5000, 5200, 5400, 5600, 5999))
	require.Equal(t, "5", rdb.Get(ctx, c.windowKey(5)).Val())
	ttl := rdb.PTTL(ctx, c.windowKey(5)).Val()
	require.True(t, ttl > 0 && ttl <= time.Second, "counter TTL %v, want (0, 1s]", ttl)
	// the next window starts from zero: 3 more right after the boundary,
	// 6 grants within 2 ms (the fixed window's known 2x)
	require.Equal(t, 3, grants(t, c, classic.fixedWindow, at(6000, 4)...))
	require.Equal(t, "4", rdb.Get(ctx, c.windowKey(6)).Val())
}

func TestSlidingLogGrantsRateInAnyWindow(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClassic(t, 3, 1000)
	require.Equal(t, 3, grants(t, c, classic.slidingLog, 0, 100, 200, 300, 999))
	require.Equal(t, []string{"0", "100", "200"}, scores(t, rdb, c.key))
	// at 1000 the grant at 0 is one interval old and leaves the window
	require.Equal(t, 1, grants(t, c, classic.slidingLog, 1000, 1050, 1099))
	require.Equal(t, []string{"100", "200", "1000"}, scores(t, rdb, c.key))
	// refusals are not logged; at 1100 and 1200 one grant each
	require.Equal(t, 2, grants(t, c, classic.slidingLog, 1100, 1100, 1200))
	require.Equal(t, []string{"1000", "1100", "1200"}, scores(t, rdb, c.key))
	ttl := rdb.PTTL(ctx, c.key).Val()
	require.True(t, ttl > 0 && ttl <= time.Second, "log TTL %v, want (0, 1s]", ttl)
}

func scores(t *testing.T, rdb *redis.Client, key string) []string {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = redisFloat(z.Score)
	}
	return out
}

func TestSlidingWindowCounterWeighsThePreviousWindow(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClassic(t, 10, 1000)
	require.Equal(t, 10, grants(t, c, classic.windowCounter, at(500, 12)...))
	require.Equal(t, "10", rdb.Get(ctx, c.windowKey(0)).Val())
	// at 1000 the previous window weighs fully: nothing
	require.Equal(t, 0, grants(t, c, classic.windowCounter, 1000))
	// at 1500 it weighs half (5 of 10): 5 grants, refused calls not counted
	require.Equal(t, 5, grants(t, c, classic.windowCounter, at(1500, 8)...))
	require.Equal(t, "5", rdb.Get(ctx, c.windowKey(1)).Val())
	// at 1900: 10*0.1 + 5 = 6, so 4 more
	require.Equal(t, 4, grants(t, c, classic.windowCounter, at(1900, 6)...))
	require.Equal(t, "9", rdb.Get(ctx, c.windowKey(1)).Val())
	// the counter outlives its window, to be read as the previous one
	ttl := rdb.PTTL(ctx, c.windowKey(1)).Val()
	require.True(t, ttl > time.Second && ttl <= 2*time.Second, "counter TTL %v, want (1s, 2s]", ttl)
}

func TestTokenBucketRefillsLazilyUpToCapacity(t *testing.T) {
	ctx := context.Background()
	c, rdb := newClassic(t, 4, 1000) // 4 tokens, one every 250 ms
	require.Equal(t, 4, grants(t, c, classic.tokenBucket, at(0, 5)...))
	require.Equal(t, map[string]string{"tokens": "0", "ts": "0"}, rdb.HGetAll(ctx, c.key).Val())
	require.Equal(t, 0, grants(t, c, classic.tokenBucket, 249))
	require.Equal(t, 1, grants(t, c, classic.tokenBucket, 250, 250))
	require.Equal(t, map[string]string{"tokens": "0", "ts": "250"}, rdb.HGetAll(ctx, c.key).Val())
	// half a token at 375 is not enough; the refusal writes nothing
	require.Equal(t, 0, grants(t, c, classic.tokenBucket, 375))
	require.Equal(t, map[string]string{"tokens": "0", "ts": "250"}, rdb.HGetAll(ctx, c.key).Val())
	// long idle: capped at capacity
	require.Equal(t, 4, grants(t, c, classic.tokenBucket, at(60_000, 6)...))
	require.Equal(t, map[string]string{"tokens": "0", "ts": "60000"}, rdb.HGetAll(ctx, c.key).Val())
	ttl := rdb.PTTL(ctx, c.key).Val()
	require.True(t, ttl > 0 && ttl <= time.Second, "bucket TTL %v, want (0, 1s]", ttl)
}

func TestFloorGrantsEveryCall(t *testing.T) {
	c, rdb := newClassic(t, 1, 1000)
	require.Equal(t, 5, grants(t, c, classic.floor, at(0, 5)...))
	require.Equal(t, "5", rdb.Get(context.Background(), c.key).Val())
}

func redisFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
