package ratelimiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// llmParts configures a requests-per-minute part (rate 3) and a
// tokens-per-minute part (rate 1000).
func llmParts(t *testing.T, opts ...ratelimiter.Option) (*ratelimiter.Composite, []*ratelimiter.Limiter, *redis.Client, *fakeClock) {
	t.Helper()
	c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
		{Rate: 3, Interval: time.Minute},
		{Rate: 1000, Interval: time.Minute},
	}, opts...)
	return c.All(names(p)...), p, rdb, clock
}

func available(t *testing.T, l *ratelimiter.Limiter) int64 {
	t.Helper()
	n, err := l.AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// TestWeightedAllOrNothing: a weighted call takes n × weight from each
// part or nothing; each part's records hold exactly its share; the Result
// names the binding part and says, per part, whether it was short and for
// how long.
func TestWeightedAllOrNothing(t *testing.T) {
	ctx := context.Background()
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			llm, p, rdb, clock := llmParts(t, opts...)
			rpm, tpm := p[0], p[1]

			res, err := llm.Weighted(1, 750).Allow(ctx, 1)
			require.NoError(t, err)
			require.True(t, res.Granted)
			require.Equal(t, 1, res.Part, "tokens admit no second such request, requests admit two")
			require.Equal(t, int64(250), res.Remaining, "the binding part's permits left")
			require.Equal(t, int64(1000), res.Limit)
			require.Equal(t, []ratelimiter.PartResult{
				{Permits: 1, Limit: 3, Interval: time.Minute, Remaining: 2, ResetAfter: time.Minute},
				{Permits: 750, Limit: 1000, Interval: time.Minute, Remaining: 250, ResetAfter: time.Minute},
			}, res.Parts)
			require.Equal(t, int64(1), recordPermits(t, rdb, rpm.Keys().Permits))
			require.Equal(t, int64(750), recordPermits(t, rdb, tpm.Keys().Permits))

			clock.Advance(10 * time.Second)
			before := partsPermits(t, rdb, p)
			res, err = llm.Weighted(1, 300).Allow(ctx, 1)
			require.NoError(t, err)
			require.False(t, res.Granted)
			require.Equal(t, 1, res.Part)
			require.Equal(t, 50003*time.Millisecond, res.RetryAfter, "the tokens' record expires in 50 s")
			require.False(t, res.Parts[0].Short, "the requests part had its permit")
			require.Zero(t, res.Parts[0].RetryAfter)
			require.Equal(t, int64(2), res.Parts[0].Remaining)
			require.True(t, res.Parts[1].Short)
			require.Equal(t, res.RetryAfter, res.Parts[1].RetryAfter)
			require.Equal(t, int64(250), res.Parts[1].Remaining)
			require.Equal(t, before, partsPermits(t, rdb, p), "a refusal writes nothing")
			require.Equal(t, int64(2), available(t, rpm))

			ok, err := llm.Weighted(2, 100).TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, int64(0), available(t, rpm))
			require.Equal(t, int64(150), available(t, tpm))
			// The requests part is spent: it binds now, though tokens remain.
			res, err = llm.Weighted(1, 1).Allow(ctx, 1)
			require.NoError(t, err)
			require.False(t, res.Granted)
			require.Equal(t, 0, res.Part)
			require.True(t, res.Parts[0].Short)
			require.False(t, res.Parts[1].Short)
			require.Equal(t, 50003*time.Millisecond, res.RetryAfter)
		})
	}
}

// TestWeightedZeroWeight: a part of weight 0 is neither read nor written;
// it need not even be configured.
func TestWeightedZeroWeight(t *testing.T) {
	ctx := context.Background()
	llm, p, rdb, _ := llmParts(t)
	missing := llm.Parts()[0].Name() + ":none"
	c := ratelimiter.NewClient(rdb)
	all := c.All(p[0].Name(), p[1].Name(), missing)

	res, err := all.Weighted(0, 40, 0).Allow(ctx, 2)
	require.NoError(t, err)
	require.True(t, res.Granted)
	require.Equal(t, 1, res.Part)
	require.Equal(t, int64(920), res.Remaining)
	require.Equal(t, ratelimiter.PartResult{}, res.Parts[0], "not read")
	require.Equal(t, ratelimiter.PartResult{}, res.Parts[2], "not read")
	require.Equal(t, int64(80), res.Parts[1].Permits)
	require.Equal(t, int64(0), rdb.Exists(ctx, p[0].Keys().Permits, p[0].Keys().Value).Val(), "the requests part untouched")
	require.Equal(t, int64(80), recordPermits(t, rdb, p[1].Keys().Permits))
	require.NoError(t, all.Weighted(0, 40, 0).Release(ctx, 1))
	require.Equal(t, int64(960), available(t, p[1]))

	_, err = all.Weighted(1, 1, 1).Allow(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
	var le *ratelimiter.LimiterError
	require.ErrorAs(t, err, &le)
	require.Equal(t, missing, le.Limiter, "the error names the part")
	require.Equal(t, int64(0), rdb.Exists(ctx, p[0].Keys().Permits).Val(), "a refusal writes nothing")
	require.Equal(t, int64(40), recordPermits(t, rdb, p[1].Keys().Permits))
}

// TestWeightedErrors: weights that cannot be used fail before anything is
// sent (on limiters that are not configured, a call that reached Redis
// would fail with ErrNotInitialized); a part's permits above its rate fail
// with ErrPermitsExceedRate naming it and take nothing.
func TestWeightedErrors(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	c := ratelimiter.NewClient(rdb)
	base := uniqueName(t)
	none := c.All(base+":a", base+":b")
	for name, tc := range map[string]struct {
		w []int64
		n int64
	}{
		"too few":           {[]int64{1}, 1},
		"too many":          {[]int64{1, 1, 1}, 1},
		"negative":          {[]int64{1, -1}, 1},
		"all zero":          {[]int64{0, 0}, 1},
		"above MaxPermits":  {[]int64{1, ratelimiter.MaxPermits + 1}, 1},
		"n times weight":    {[]int64{1, 1 << 20}, 1 << 12},
		"n times weight, 0": {[]int64{0, 1 << 31}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			v := none.Weighted(tc.w...)
			for call, f := range compositeCalls(v, tc.n) {
				err := f()
				require.ErrorIs(t, err, ratelimiter.ErrInvalidWeights, call)
				require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, call)
				require.NotErrorIs(t, err, ratelimiter.ErrNotInitialized, call)
			}
			err := v.Release(ctx, tc.n)
			require.ErrorIs(t, err, ratelimiter.ErrInvalidWeights)
			require.NotErrorIs(t, err, ratelimiter.ErrNotInitialized)
		})
	}
	require.Nil(t, ratelimiter.WeightsOf(none))
	require.Equal(t, []int64{2, 0}, ratelimiter.WeightsOf(none.Weighted(2, 0)))

	llm, p, rdb2, _ := llmParts(t)
	before := partsPermits(t, rdb2, p)
	for call, f := range compositeCalls(llm.Weighted(1, 1001), 1) {
		err := f()
		require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate, call)
		var le *ratelimiter.LimiterError
		require.ErrorAs(t, err, &le, call)
		require.Equal(t, p[1].Name(), le.Limiter, call)
	}
	res, err := llm.Weighted(1, 600).Allow(ctx, 2)
	require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)
	require.Equal(t, 1, res.Part)
	require.True(t, res.Parts[1].Short)
	require.Zero(t, res.Parts[1].RetryAfter, "no wait helps")
	require.Equal(t, before, partsPermits(t, rdb2, p), "nothing taken")
}

// TestWeightedExceedsRateAgrees: acquire_all.lua's rule for permits above
// a part's rate (RLEXCEED for one request, a refusal with hint 0 in a
// table reply) is exceedsRate's: on a fresh limiter, n × w is granted
// exactly when ExceedsRate says it fits, by TryAcquire and by Allow.
func TestWeightedExceedsRateAgrees(t *testing.T) {
	ctx := context.Background()
	const rate = 12
	for _, tc := range [][2]int64{{1, 12}, {1, 13}, {2, 6}, {2, 7}, {3, 4}, {3, 5}, {4, 3}, {13, 1}, {12, 1}} {
		n, w := tc[0], tc[1]
		for _, how := range []string{"TryAcquire", "Allow"} {
			c, p, _, _ := setupParts(t, []ratelimiter.Config{{Rate: 100, Interval: time.Hour}, {Rate: rate, Interval: time.Hour}})
			v := c.All(names(p)...).Weighted(1, w)
			var ok bool
			var err error
			if how == "TryAcquire" {
				ok, err = v.TryAcquire(ctx, n)
			} else {
				var res ratelimiter.Result
				res, err = v.Allow(ctx, n)
				ok = res.Granted
			}
			over := ratelimiter.ExceedsRate(n, w, rate)
			require.Equal(t, over, errors.Is(err, ratelimiter.ErrPermitsExceedRate), "%s n=%d w=%d: %v", how, n, w, err)
			require.Equal(t, !over, ok, "%s n=%d w=%d", how, n, w)
		}
	}
}

// TestWeightedRelease: Release gives back n × weight to each part of
// nonzero weight from its oldest records (so that they do not come back
// twice), nothing for records that already left the window, never above
// the rate, and, when a part cannot be released, nothing to any part.
func TestWeightedRelease(t *testing.T) {
	ctx := context.Background()
	llm, p, rdb, clock := llmParts(t)
	rpm, tpm := p[0], p[1]

	// Reserve 750 tokens, use 300: give back 450.
	require.NoError(t, llm.Weighted(1, 750).Acquire(ctx, 1))
	require.NoError(t, llm.Weighted(0, 450).Release(ctx, 1))
	require.Equal(t, int64(2), available(t, rpm), "the request stays taken")
	require.Equal(t, int64(700), available(t, tpm))
	require.Equal(t, int64(300), recordPermits(t, rdb, tpm.Keys().Permits), "the record shrank")
	ok, err := llm.Weighted(1, 700).TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)

	// A plain composite's Release gives n to every part, at once.
	require.NoError(t, llm.Release(ctx, 1))
	require.Equal(t, int64(2), available(t, rpm))
	require.Equal(t, int64(1), available(t, tpm))

	// Once the records left the window, their permits are back already:
	// a late Release gives back nothing and never lifts a part past its
	// rate.
	clock.Advance(time.Minute)
	require.NoError(t, llm.Weighted(1, 500).Release(ctx, 1))
	require.Equal(t, int64(3), available(t, rpm))
	require.Equal(t, int64(1000), available(t, tpm))
	ok, err = llm.Weighted(3, 1000).TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = llm.Weighted(1, 1).TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok, "the window holds no more than each rate")

	// Asking more than the records hold gives back what they hold.
	require.NoError(t, llm.Weighted(5, 5000).Release(ctx, 1))
	require.Equal(t, int64(3), available(t, rpm))
	require.Equal(t, int64(1000), available(t, tpm))
	require.Equal(t, int64(0), recordPermits(t, rdb, tpm.Keys().Permits))
}

// TestWeightedReleaseAtomic: a Release that one part refuses (not
// configured, or state the protocol does not expect) writes nothing to
// the others.
func TestWeightedReleaseAtomic(t *testing.T) {
	ctx := context.Background()
	llm, p, rdb, _ := llmParts(t)
	require.NoError(t, llm.Weighted(2, 600).Acquire(ctx, 1))
	snapshot := func() []any {
		var out []any
		for _, l := range p {
			k := l.Keys()
			out = append(out, rdb.Get(ctx, k.Value).Val(), rdb.ZRangeWithScores(ctx, k.Permits, 0, -1).Val())
		}
		return out
	}
	before := snapshot()

	missing := p[1].Name() + ":none"
	c := ratelimiter.NewClient(rdb)
	err := c.All(p[0].Name(), p[1].Name(), missing).Weighted(1, 100, 1).Release(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
	var le *ratelimiter.LimiterError
	require.ErrorAs(t, err, &le)
	require.Equal(t, missing, le.Limiter)
	require.Equal(t, before, snapshot())

	// The last part's value is not a number: refused before any write.
	bad := p[1].Name() + ":bad"
	_, err = c.Limiter(bad).TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Minute})
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, c.Limiter(bad).Keys().Value, "x", 0).Err())
	err = c.All(p[0].Name(), p[1].Name(), bad).Weighted(1, 100, 1).Release(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrCorruptState)
	require.ErrorAs(t, err, &le)
	require.Equal(t, bad, le.Limiter)
	require.Equal(t, before, snapshot())

	// Same with the bad part first: its records' key of the wrong type.
	bad2 := p[1].Name() + ":bad2"
	_, err = c.Limiter(bad2).TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Minute})
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, c.Limiter(bad2).Keys().Permits, "x", 0).Err())
	err = c.All(bad2, p[0].Name(), p[1].Name()).Weighted(1, 1, 100).Release(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrCorruptState)
	require.Equal(t, before, snapshot())

	require.NoError(t, llm.Weighted(1, 100).Release(ctx, 1))
	require.Equal(t, int64(2), available(t, p[0]))
	require.Equal(t, int64(500), available(t, p[1]))
}

// TestWeightedPartHints: each part's hint in Result.Parts is the hint the
// part alone gives for its permits (its own Allow on the same state), and
// the composite's is the longest.
func TestWeightedPartHints(t *testing.T) {
	ctx := context.Background()
	c, p, rdb, clock := setupParts(t, []ratelimiter.Config{
		{Rate: 4, Interval: 10 * time.Second},
		{Rate: 100, Interval: time.Minute},
		{Rate: 9, Interval: 30 * time.Second},
	})
	a := c.All(names(p)...)
	take := func(w ...int64) {
		ok, err := a.Weighted(w...).TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	take(2, 30, 1)
	clock.Advance(3 * time.Second)
	take(2, 60, 4) // left: 0, 10, 4
	clock.Advance(time.Second)
	for _, w := range [][]int64{{1, 1, 1}, {0, 11, 0}, {0, 50, 5}, {1, 70, 9}, {3, 0, 3}} {
		before := partsPermits(t, rdb, p)
		res, err := a.Weighted(w...).Allow(ctx, 1)
		require.NoError(t, err)
		require.False(t, res.Granted, "%v", w)
		var longest time.Duration
		part := -1
		for i, l := range p {
			pr := res.Parts[i]
			if w[i] == 0 {
				require.Equal(t, ratelimiter.PartResult{}, pr)
				continue
			}
			own, err := l.Allow(ctx, w[i])
			require.NoError(t, err)
			require.Equal(t, !own.Granted, pr.Short, "%v part %d", w, i)
			require.Equal(t, own.RetryAfter, pr.RetryAfter, "%v part %d: its own hint", w, i)
			if own.Granted {
				require.NoError(t, l.Release(ctx, w[i]))
			}
			if pr.RetryAfter > longest {
				longest, part = pr.RetryAfter, i
			}
		}
		require.Equal(t, longest, res.RetryAfter, "%v", w)
		require.Equal(t, part, res.Part, "%v", w)
		require.Equal(t, before, partsPermits(t, rdb, p), "%v: a refusal takes nothing", w)
	}
}

// TestWeightedLanes: views with other weights are decided apart: a local
// refusal of one weighting never refuses another.
func TestWeightedLanes(t *testing.T) {
	ctx := context.Background()
	llm, _, _, _ := llmParts(t)
	res, err := llm.Weighted(1, 900).Allow(ctx, 1)
	require.NoError(t, err)
	require.True(t, res.Granted)
	res, err = llm.Weighted(1, 900).Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, res.Granted)
	ok, err := llm.Weighted(1, 100).TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok, "the refusal of 900 tokens does not refuse 100")
	// The refused weighting is refused locally now, with its part hints.
	again, err := llm.Weighted(1, 900).Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, again.Granted)
	require.True(t, again.Parts[1].Short)
	require.Positive(t, again.Parts[1].RetryAfter)
}

// TestWeightedConcurrent: goroutines taking weighted permits of varied
// weights at once (combined into shared script calls) never take more
// than a part's rate, and each part's records hold exactly the grants'
// shares.
func TestWeightedConcurrent(t *testing.T) {
	ctx := context.Background()
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			c, p, rdb, _ := setupParts(t, []ratelimiter.Config{
				{Rate: 40, Interval: time.Hour},
				{Rate: 2000, Interval: time.Hour},
			}, opts...)
			a := c.All(names(p)...)
			var mu sync.Mutex
			var reqs, tokens int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 20 {
						w := int64(10 + 37*((g+i)%5)) // a few weightings, shared by goroutines
						res, err := a.Weighted(1, w).Allow(ctx, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if res.Granted {
							mu.Lock()
							reqs, tokens = reqs+1, tokens+w
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			require.LessOrEqual(t, reqs, int64(40))
			require.LessOrEqual(t, tokens, int64(2000))
			require.Positive(t, reqs)
			require.Equal(t, reqs, recordPermits(t, rdb, p[0].Keys().Permits))
			require.Equal(t, tokens, recordPermits(t, rdb, p[1].Keys().Permits))
			require.Equal(t, 40-reqs, available(t, p[0]))
			require.Equal(t, 2000-tokens, available(t, p[1]))
		})
	}
}

// TestWeightedAcquireWaits: a blocked weighted caller waits for the part
// that lacks its share and gets it when that part's records expire.
func TestWeightedAcquireWaits(t *testing.T) {
	ctx := context.Background()
	for mode, opts := range combiningModes {
		t.Run(mode, func(t *testing.T) {
			rdb := newRedis(t)
			c := ratelimiter.NewClient(rdb, opts...)
			base := uniqueName(t)
			req, tok := c.Limiter(base+":req"), c.Limiter(base+":tok")
			_, err := req.TrySetRate(ctx, ratelimiter.Config{Rate: 100, Interval: time.Hour})
			require.NoError(t, err)
			_, err = tok.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: 300 * time.Millisecond})
			require.NoError(t, err)
			a := c.All(req.Name(), tok.Name())
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := a.Weighted(1, 4+int64(g%2)).Acquire(ctx, 1); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			require.Equal(t, int64(4), recordPermits(t, rdb, req.Keys().Permits))
			records := rdb.ZRangeWithScores(ctx, tok.Keys().Permits, 0, -1).Val()
			require.LessOrEqual(t, mostInWindow(records, 300*time.Millisecond), int64(10), "at most 10 tokens in 300 ms")
			ok, err := a.Weighted(1, 11).TryAcquireTimeout(ctx, 1, time.Minute)
			require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)
			require.False(t, ok)
		})
	}
}
