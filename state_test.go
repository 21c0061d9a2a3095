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

func redisZ(permits uint32) redis.Z {
	m, _ := wire.Encode(wire.Bc0I, make([]byte, 16), permits)
	return redis.Z{Score: float64(time.Now().UnixMilli()), Member: m}
}

// TestCorruptState: whatever unexpected state a limiter's keys hold, every
// call returns ErrCorruptState and leaves the keys exactly as they were.
func TestCorruptState(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(rdb *redis.Client, k wire.Keys){
		"config not a hash":    func(rdb *redis.Client, k wire.Keys) { rdb.Del(ctx, k.Config); rdb.Set(ctx, k.Config, "x", 0) },
		"rate not a number":    func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "ten") },
		"interval fractional":  func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "interval", "1.5") },
		"keepAlive not number": func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "keepAliveTime", "x") },
		"unknown type":         func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "type", "2") },
		"value not a number":   func(rdb *redis.Client, k wire.Keys) { rdb.Set(ctx, k.Value, "lots", 0) },
		"value a list":         func(rdb *redis.Client, k wire.Keys) { rdb.Del(ctx, k.Value); rdb.RPush(ctx, k.Value, "1") },
		"permits a string":     func(rdb *redis.Client, k wire.Keys) { rdb.Del(ctx, k.Permits); rdb.Set(ctx, k.Permits, "1", 0) },
		"interval 1e13":        func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "interval", "10000000000000") },
		// Fields another client may write that Lua's doubles cannot count
		// exactly, or that tonumber reads but Java and Config() do not.
		"rate hex":            func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "0x10") },
		"rate exponent":       func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "1e3") },
		"rate Long.MAX_VALUE": func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "9223372036854775807") },
		"rate 2^53":           func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "9007199254740992") },
		"rate zero":           func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "0") },
		"rate negative":       func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "-5") },
		"rate empty":          func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "rate", "") },
		"interval zero":       func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "interval", "0") },
		"interval negative":   func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "interval", "-1000") },
		"interval 2^63": func(rdb *redis.Client, k wire.Keys) {
			rdb.HSet(ctx, k.Config, "interval", "9223372036854775807")
		},
		"keepAlive 1e17": func(rdb *redis.Client, k wire.Keys) {
			rdb.HSet(ctx, k.Config, "keepAliveTime", "100000000000000000")
		},
		"keepAlive negative": func(rdb *redis.Client, k wire.Keys) { rdb.HSet(ctx, k.Config, "keepAliveTime", "-1") },
		"value exponent":     func(rdb *redis.Client, k wire.Keys) { rdb.Set(ctx, k.Value, "1e3", 0) },
		"value beyond 2^53":  func(rdb *redis.Client, k wire.Keys) { rdb.Set(ctx, k.Value, "90071992547409930", 0) },
		"value with space":   func(rdb *redis.Client, k wire.Keys) { rdb.Set(ctx, k.Value, " 5", 0) },
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
			_, err := l.TryAcquire(ctx, 4)
			require.NoError(t, err)
			clock.Advance(2 * time.Second) // so the records are due for release
			corrupt(rdb, l.Keys())
			// refused asserts that a call failed with ErrCorruptState and
			// changed nothing; mayPass allows calls that never read the bad
			// part (release does not read records, a KeepState rewrite only
			// reads records in the window) to succeed.
			refused := func(what string, mayPass bool, call func() error) {
				before := snapshot(t, rdb, l)
				err := call()
				if err == nil && mayPass {
					return
				}
				require.ErrorIs(t, err, ratelimiter.ErrCorruptState, what)
				require.Equal(t, before, snapshot(t, rdb, l), what)
			}
			records := name == "permits a string"
			// A keepState rewrite writes a new config over a bad field and
			// recounts the value from the records.
			rewrites := name != "config not a hash" && name != "permits a string"
			refused("available", false, func() error { _, err := l.AvailablePermits(ctx); return err })
			refused("acquire", false, func() error { _, err := l.TryAcquire(ctx, 1); return err })
			refused("composite", false, func() error { _, err := ratelimiter.NewClient(rdb).All(l.Name()).Allow(ctx, 1); return err })
			refused("release", records, func() error { return l.Release(ctx, 1) })
			refused("keep state", rewrites, func() error {
				return l.SetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Second}, ratelimiter.KeepState())
			})
		})
	}
}

func TestConfigCorrupt(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	l := ratelimiter.NewClient(rdb).Limiter(uniqueName(t))
	require.NoError(t, rdb.Set(ctx, l.Keys().Config, "x", 0).Err())
	_, err := l.Config(ctx)
	require.ErrorIs(t, err, ratelimiter.ErrCorruptState)
	_, err = l.TrySetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Second})
	require.ErrorIs(t, err, ratelimiter.ErrCorruptState)
	require.Equal(t, "x", rdb.Get(ctx, l.Keys().Config).Val())

	require.NoError(t, rdb.Del(ctx, l.Keys().Config).Err())
	require.NoError(t, rdb.HSet(ctx, l.Keys().Config, "rate", "1", "interval", "x", "type", "0").Err())
	_, err = l.Config(ctx)
	require.ErrorIs(t, err, ratelimiter.ErrCorruptState)
}

// TestRepairLostPermitsSet: Redisson's script fails on every call when the
// value says nothing is left and the records are gone. Ours writes a
// record of the permits out, stamped now, so that they come back one
// interval later: nothing would ever release them otherwise, and starting
// afresh at once would grant them twice when an evicting policy dropped
// the records (issue 22).
func TestRepairLostPermitsSet(t *testing.T) {
	ctx := context.Background()
	for _, composite := range []bool{false, true} {
		l, rdb, clock := setup(t, ratelimiter.Config{Rate: 5, Interval: time.Hour})
		take := l.Allow
		if composite {
			take = ratelimiter.NewClient(rdb, clock.option()).All(l.Name()).Allow
		}
		_, err := l.TryAcquire(ctx, 4)
		require.NoError(t, err)
		require.NoError(t, rdb.Del(ctx, l.Keys().Permits).Err())
		n, err := l.AvailablePermits(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the value stands")
		res, err := take(ctx, 2)
		require.NoError(t, err)
		require.False(t, res.Granted, "4 permits are out")
		require.Equal(t, time.Hour+3*time.Millisecond, res.RetryAfter)
		require.Equal(t, int64(4), recordPermits(t, rdb, l.Keys().Permits), "a record holds the lost permits")
		clock.Advance(time.Hour + 3*time.Millisecond)
		res, err = take(ctx, 5)
		require.NoError(t, err)
		require.True(t, res.Granted, "they come back an interval later (composite %v)", composite)
	}
}
