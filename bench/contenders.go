package main

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// A contender is one rate limiter implementation under test.
type contender struct {
	name string
	// noRule marks the floor: it grants every call, so exactness does not
	// apply.
	noRule bool
	// open sets up the limiter called key with rate grants per interval and
	// returns it. Keys are fresh: nothing of key exists yet.
	open func(ctx context.Context, key string, rate int64, interval time.Duration) (limiter, error)
	// blocking, when not nil, has callers concurrent callers block in
	// acquire(1) on the limiter called key (opened before) until d has
	// passed, and returns the grants.
	blocking func(ctx context.Context, key string, callers int, d time.Duration) (int64, error)
}

// A limiter is one opened limiter of a contender.
type limiter interface {
	// run makes decisions from callers concurrent callers for d, one
	// permit each, and reports them; with stamps it keeps each grant's
	// time.
	run(ctx context.Context, callers int, d time.Duration, stamps bool) (outcome, error)
	// latency makes n decisions one after another and reports their
	// latencies.
	latency(ctx context.Context, n int) (latencies, error)
	// once makes one decision.
	once(ctx context.Context) (bool, error)
}

// outcome is what one run decided.
type outcome struct {
	decisions int64 // -1 when the contender does not count them (Redisson)
	grants    int64
	stamps    []int64 // grant times, Unix nanoseconds, sorted (only when asked)
}

// latencies are the round trips of sequential decisions. each is nil when
// only the mean is known (Redisson's peer times the whole series).
type latencies struct {
	each []time.Duration
	mean time.Duration
}

// contenders returns every contender against rdb, ours first (the
// reference of every ratio). peer may be nil: Redisson is then left out.
func contenders(rdb *redis.Client, peer *javaPeer) []contender {
	cs := []contender{
		ours("ratelimiter (default)", rdb),
		ours("ratelimiter WithMaxBatch(1)", rdb, ratelimiter.WithMaxBatch(1)),
	}
	if peer != nil {
		cs = append(cs, redisson(peer))
	}
	return append(cs,
		gcra(rdb),
		classicContender("fixed window", rdb, classic.fixedWindow),
		classicContender("sliding log", rdb, classic.slidingLog),
		classicContender("sliding window counter", rdb, classic.windowCounter),
		classicContender("token bucket", rdb, classic.tokenBucket),
		floor(rdb),
	)
}

// ours is this library's Limiter in OVERALL mode.
func ours(name string, rdb *redis.Client, opts ...ratelimiter.Option) contender {
	c := ratelimiter.NewClient(rdb, opts...)
	return contender{name: name, open: func(ctx context.Context, key string, rate int64, interval time.Duration) (limiter, error) {
		l := c.Limiter(key)
		if _, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rate, Interval: interval}); err != nil {
			return nil, err
		}
		return goLimiter(func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) }), nil
	}, blocking: func(ctx context.Context, key string, callers int, d time.Duration) (int64, error) {
		return acquireLoop(ctx, c.Limiter(key), callers, d)
	}}
}

// gcra is github.com/go-redis/redis_rate/v10 with a burst of one
// interval's rate, so that an idle limiter grants rate at once, as the
// window algorithms do.
func gcra(rdb *redis.Client) contender {
	rl := redis_rate.NewLimiter(rdb)
	return contender{name: "GCRA (redis_rate v10)", open: func(ctx context.Context, key string, rate int64, interval time.Duration) (limiter, error) {
		lim := redis_rate.Limit{Rate: int(rate), Burst: int(rate), Period: interval}
		return goLimiter(func(ctx context.Context) (bool, error) {
			res, err := rl.Allow(ctx, key, lim)
			if err != nil {
				return false, err
			}
			return res.Allowed > 0, nil
		}), nil
	}}
}

// floorName is the floor's name in the tables.
const floorName = "floor: one-command script"

// floor is the one-command script: what any Lua limiter costs at least.
func floor(rdb *redis.Client) contender {
	c := classicContender(floorName, rdb, classic.floor)
	c.noRule = true
	return c
}

// classicContender runs one of the scripts of lua/ with the caller's clock.
func classicContender(name string, rdb *redis.Client, decide func(classic, context.Context, int64) (bool, error)) contender {
	return contender{name: name, open: func(ctx context.Context, key string, rate int64, interval time.Duration) (limiter, error) {
		c := classic{rdb: rdb, key: key, rate: rate, interval: interval.Milliseconds()}
		return goLimiter(func(ctx context.Context) (bool, error) {
			return decide(c, ctx, time.Now().UnixMilli())
		}), nil
	}}
}
