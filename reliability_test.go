package ratelimiter_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// TestLostValueKeyRecounts is issue 14's second defect: when the value key
// disappears while the window's records remain (what an evicting maxmemory
// policy does), the budget is recounted from the records instead of reset
// to the full rate.
func TestLostValueKeyRecounts(t *testing.T) {
	ctx := context.Background()
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
	ok, err := l.TryAcquire(ctx, 7)
	require.NoError(t, err)
	require.True(t, ok)
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, rdb.Del(ctx, l.Keys().Value).Err())

	ok, err = l.TryAcquire(ctx, 4)
	require.NoError(t, err)
	require.False(t, ok, "7 of 10 are still in the window")
	ok, err = l.TryAcquire(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "0", rdb.Get(ctx, l.Keys().Value).Val())

	require.NoError(t, rdb.Del(ctx, l.Keys().Value).Err())
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "availablePermits recounts too")
	require.NoError(t, rdb.Del(ctx, l.Keys().Value).Err())
	require.NoError(t, l.Release(ctx, 2))
	require.Equal(t, "2", rdb.Get(ctx, l.Keys().Value).Val(), "release recounts, then gives back")
}

// TestHintNeverSpins is issue 14's third defect: intervals and record
// scores beyond what a time.Duration holds gave hints of 0 or below, and
// waits looped on Redis. Every refusal's hint is positive and bounded, and
// a wait that cannot end in time returns after one script call.
func TestHintNeverSpins(t *testing.T) {
	ctx := context.Background()
	for name, prepare := range map[string]func(rdb *redis.Client, k wire.Keys){
		"interval 9223372036854 ms (the longest Duration)": func(rdb *redis.Client, k wire.Keys) {
			rdb.HSet(ctx, k.Config, "interval", "9223372036854")
		},
		"record far in the future": func(rdb *redis.Client, k wire.Keys) {
			rdb.Del(ctx, k.Permits)
			rdb.ZAdd(ctx, k.Permits, redis.Z{Score: 1e18, Member: string([]byte{16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 2, 0, 0, 0})})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var seen decisions
			l, rdb, _ := setup(t, ratelimiter.Config{Rate: 2, Interval: time.Minute}, seen.hooks())
			ok, err := l.TryAcquire(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
			prepare(rdb, l.Keys())

			res, err := l.Allow(ctx, 1)
			require.NoError(t, err)
			require.False(t, res.Granted)
			require.Positive(t, res.RetryAfter)

			calls := redistest.ScriptCalls(t, rdb)
			ok, err = l.TryAcquireTimeout(ctx, 1, time.Second)
			require.NoError(t, err)
			require.False(t, ok)
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			err = l.Acquire(dctx, 1)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Equal(t, int64(2), redistest.ScriptCalls(t, rdb)-calls, "one script call per wait")
		})
	}
	require.Equal(t, time.Duration(math.MaxInt64), ratelimiter.HintDuration(math.MaxInt64))
	require.Equal(t, time.Millisecond, ratelimiter.HintDuration(-5))
}

// TestBoundedWork is issue 8's fourth item: after an idle window on a
// limiter holding more records than one call may walk, the first call
// releases at most a chunk of the expired records (and grants from what it
// released), and a recount over too many records grants nothing rather
// than walk them all.
func TestBoundedWork(t *testing.T) {
	ctx := context.Background()
	const records = 12000
	l, rdb, clock := setup(t, ratelimiter.Config{Rate: 1000000, Interval: time.Second})
	fill := func(at int64) {
		p := rdb.Pipeline()
		for i := 0; i < records; i += 500 {
			zs := make([]redis.Z, 0, 500)
			for j := i; j < i+500; j++ {
				m := []byte{16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(j), byte(j >> 8), 1, 0, 0, 0}
				zs = append(zs, redis.Z{Score: float64(at), Member: string(m)})
			}
			p.ZAdd(ctx, l.Keys().Permits, zs...)
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
	}
	fill(clock.Millis())
	require.NoError(t, rdb.Set(ctx, l.Keys().Value, 1000000-records, 0).Err())
	clock.Advance(2 * time.Second) // every record has expired

	ok, err := l.TryAcquire(ctx, 1000000-records+500)
	require.NoError(t, err)
	require.True(t, ok, "the first call grants from the records it released")
	left := rdb.ZCard(ctx, l.Keys().Permits).Val()
	require.Equal(t, int64(records-1000+1), left, "one call released 1000 expired records")

	// A lost value key over more records than a recount may read.
	l2, rdb2, clock2 := setup(t, ratelimiter.Config{Rate: 1000000, Interval: time.Second})
	l, rdb, clock = l2, rdb2, clock2
	fill(clock.Millis())
	require.NoError(t, rdb.Del(ctx, l.Keys().Value).Err())
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok, "too many records to recount: nothing granted until they expire")
	clock.Advance(2 * time.Second)
	for i := 0; i < records/1000+1; i++ {
		_, err = l.TryAcquire(ctx, 1)
		require.NoError(t, err)
	}
	ok, err = l.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "once they expire, the budget comes back")
}

// TestScriptsAgree: acquire.lua carries its own copy of lib.lua's rules
// (redis_scripts.go), and acquire_all.lua applies them to each part of a
// composite. Fed the same states, the acquire path (how many single
// permits can be taken), a composite of the limiter alone, and lib.lua's
// path (AvailablePermits) see the same budget.
func TestScriptsAgree(t *testing.T) {
	ctx := context.Background()
	type state struct {
		value   string // "" for no value key
		records []float64
	}
	const rate = 10
	states := map[string]state{
		"fresh":                 {},
		"records in the window": {value: "6", records: []float64{-100, -50}},
		"some expired":          {value: "2", records: []float64{-1500, -1200, -10, -5}},
		"all expired":           {value: "0", records: []float64{-3000, -2000}},
		"value lost":            {records: []float64{-10, -20, -1500}},
		"value over the rate":   {value: "25", records: []float64{-10}},
		"released by Java":      {value: "9", records: []float64{-1500, -10}},
		"negative value":        {value: "-3", records: []float64{-10}},
	}
	for name, st := range states {
		t.Run(name, func(t *testing.T) {
			budgets := [3]int64{}
			for i := range budgets {
				l, rdb, clock := setup(t, ratelimiter.Config{Rate: rate, Interval: time.Second})
				now := float64(clock.Millis())
				for j, at := range st.records {
					m := []byte{16, byte(j), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0}
					require.NoError(t, rdb.ZAdd(ctx, l.Keys().Permits, redis.Z{Score: now + at, Member: string(m)}).Err())
				}
				if st.value != "" {
					require.NoError(t, rdb.Set(ctx, l.Keys().Value, st.value, 0).Err())
				}
				if i == 0 {
					n, err := l.AvailablePermits(ctx)
					require.NoError(t, err)
					budgets[i] = n
					continue
				}
				take := l.TryAcquire
				if i == 2 {
					take = ratelimiter.NewClient(rdb, clock.option()).All(l.Name()).TryAcquire
				}
				for {
					ok, err := take(ctx, 1)
					require.NoError(t, err)
					if !ok {
						break
					}
					budgets[i]++
				}
			}
			require.Equal(t, budgets[0], budgets[1], "AvailablePermits vs permits taken one by one")
			require.Equal(t, budgets[0], budgets[2], "AvailablePermits vs permits taken one by one by a composite")
		})
	}
}
