package ratelimiter_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// serverMillis reads Redis TIME in ms, rounded down as the scripts do.
func serverMillis(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// stamps returns the scores of a permits key's records, oldest first.
func stamps(t *testing.T, rdb redis.UniversalClient, key string) []int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	out := make([]int64, len(zs))
	for i, z := range zs {
		out[i] = int64(z.Score)
	}
	return out
}

// By default every record a Go call writes (a single call, a combined
// batch, a composite, and the full window TrySetRate writes on an
// evicting server) is stamped by the server's clock when the script runs,
// whatever the Client's clock says. This runs in the short suite, which
// make test-servers runs on Redis 6.2 and Valkey: TIME is usable in a
// script that writes afterwards on each of them.
func TestServerClockStamps(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	// A Client clock an hour behind: it must not show in any stamp.
	behind := ratelimiter.WithClock(func() time.Time { return time.Now().Add(-time.Hour) })
	c := ratelimiter.NewClient(rdb, behind)
	name := uniqueName(t)
	cfg := ratelimiter.Config{Rate: 1000, Interval: time.Hour}
	for _, n := range []string{name + "-a", name + "-b"} {
		_, err := c.Limiter(n).TrySetRate(ctx, cfg)
		require.NoError(t, err)
	}
	before := serverMillis(t, rdb)
	ok, err := c.Limiter(name+"-a").TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	done := make(chan error, 8)
	for i := 0; i < 8; i++ { // concurrent: combined into batches
		go func() { done <- c.Limiter(name+"-a").Acquire(ctx, 1) }()
	}
	for i := 0; i < 8; i++ {
		require.NoError(t, <-done)
	}
	ok, err = c.All(name+"-a", name+"-b").TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	after := serverMillis(t, rdb)
	for _, n := range []string{name + "-a", name + "-b"} {
		got := stamps(t, rdb, c.Limiter(n).Keys().Permits)
		require.NotEmpty(t, got)
		for _, s := range got {
			require.True(t, s >= before && s <= after, "%s: stamp %d outside the server's [%d, %d]", n, s, before, after)
		}
	}
}

// WithServerClock(false) stamps with the Client's clock, and then a
// grant is never stamped before the window's newest record (a call held
// after it read its clock stamps at that record), unless that record is
// more than an interval ahead.
func TestClientClockNeverStampsBeforeNewest(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	at := func(ms int64) ratelimiter.Option {
		return func(c *ratelimiter.Client) {
			ratelimiter.WithClock(func() time.Time { return time.UnixMilli(base + ms) })(c)
			ratelimiter.WithServerClock(false)(c)
		}
	}
	name := uniqueName(t)
	cfg := ratelimiter.Config{Rate: 100, Interval: time.Minute}
	acquire := func(n string, ms int64) {
		c := ratelimiter.NewClient(rdb, at(ms))
		ok, err := c.Limiter(n).TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, n := range []string{name + "-stale", name + "-ahead"} {
		_, err := ratelimiter.NewClient(rdb, at(0)).Limiter(n).TrySetRate(ctx, cfg)
		require.NoError(t, err)
	}
	acquire(name+"-stale", 5000) // stamped by its clock: base+5s
	acquire(name+"-stale", 1000) // a stale reading: stamped at the newest, base+5s
	acquire(name+"-stale", 3000)
	require.Equal(t, []int64{base + 5000, base + 5000, base + 5000},
		stamps(t, rdb, ratelimiter.NewClient(rdb).Limiter(name+"-stale").Keys().Permits))
	acquire(name+"-ahead", 200000) // 200 s ahead
	acquire(name+"-ahead", 0)      // the newest is more than an interval ahead: its own
	require.Equal(t, []int64{base, base + 200000},
		stamps(t, rdb, ratelimiter.NewClient(rdb).Limiter(name+"-ahead").Keys().Permits))
}

// evalCounter counts the script calls a go-redis client sends.
type evalCounter struct{ n atomic.Int64 }

func (e *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (e *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			e.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (e *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An acquire sends three keys while the Client takes the limiter for
// OVERALL; a PER_CLIENT limiter answers that with nothing written, and the
// Client sends the PER_CLIENT keys from then on: one extra script call per
// PER_CLIENT limiter, not per acquisition. A limiter whose mode another
// writer changes keeps working both ways, and the Client learns it again.
func TestAcquireKeysFollowMode(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	var calls evalCounter
	rdb.AddHook(&calls)
	c := ratelimiter.NewClient(rdb, ratelimiter.WithLocalRefusals(false))
	admin := ratelimiter.NewClient(newRedis(t))
	name := uniqueName(t)
	l := c.Limiter(name)
	// The Client's first call also checks its permissions (a script):
	// make it on another limiter before counting.
	_, err := admin.Limiter(name+"-warm").TrySetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Hour})
	require.NoError(t, err)
	_, err = c.Limiter(name+"-warm").TryAcquire(ctx, 1)
	require.NoError(t, err)
	_, err = admin.Limiter(name).TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 3, Interval: time.Hour})
	require.NoError(t, err)
	taken := func(want bool) {
		t.Helper()
		ok, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, want, ok)
	}
	start := calls.n.Load()
	taken(true)
	require.EqualValues(t, 2, calls.n.Load()-start, "the first PER_CLIENT call: three keys, then five")
	taken(true)
	taken(true)
	taken(false)
	require.EqualValues(t, 5, calls.n.Load()-start, "then one call each")
	v, err := rdb.Get(ctx, l.Keys().ClientValue).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 0, v)
	n, err := rdb.Exists(ctx, l.Keys().Value, l.Keys().Permits).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written under the OVERALL keys")

	// Another writer makes it OVERALL: the PER_CLIENT keys are answered
	// with nothing written, five keys decide it, then three.
	require.NoError(t, admin.Limiter(name).SetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 2, Interval: time.Hour}))
	start = calls.n.Load()
	taken(true)
	require.EqualValues(t, 2, calls.n.Load()-start, "the first OVERALL call: PER_CLIENT keys, then five")
	taken(true)
	taken(false)
	require.EqualValues(t, 4, calls.n.Load()-start, "then one call each")
	left, err := rdb.Get(ctx, l.Keys().Value).Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(0), left)
	typ, err := rdb.HGet(ctx, l.Keys().Config, "type").Result()
	require.NoError(t, err)
	require.Equal(t, "0", typ, "the config hash is intact")
	v, err = rdb.Get(ctx, l.Keys().ClientValue).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 0, v, "nothing written under the PER_CLIENT keys")
}
