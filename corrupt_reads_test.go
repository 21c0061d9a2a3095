package ratelimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// TestCorruptStateReadsAlike is issue 22's fifth item: on each corrupt
// state every call either fails with ErrCorruptState, all of them alike,
// or reads the state the same way: AvailablePermits, Allow, TryAcquire
// (combining on and off) and a composite agree on whether a permit is
// there and how many, Remaining is never below 0, and a refusal's hint
// is never too soon (after it, on the same clock, the permit is granted;
// a record that never expires gives a hint beyond 100 years).
func TestCorruptStateReadsAlike(t *testing.T) {
	ctx := context.Background()
	rec := func(permits byte) string {
		return string([]byte{16, permits, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, permits, 0, 0, 0})
	}
	type state struct {
		value   string           // "" for none
		records map[string]int64 // member: ms before now (negative: after)
		config  map[string]string
		corrupt bool // every call fails with ErrCorruptState
	}
	states := map[string]state{
		"0-byte record in the window":     {value: "8", records: map[string]int64{"": 10, rec(2): 20}},
		"1-byte record in the window":     {value: "8", records: map[string]int64{"x": 10, rec(2): 20}},
		"1-byte record oldest, none left": {value: "0", records: map[string]int64{"x": 500, rec(10): 10}},
		"1-byte record expired":           {value: "8", records: map[string]int64{"x": 1500, rec(2): 20}},
		"value -5":                        {value: "-5", records: map[string]int64{rec(3): 100, rec(4): 200}},
		"record at score 1e18":            {value: "0", records: map[string]int64{rec(10): -1e18}},
		"interval 1e13 ms":                {value: "8", records: map[string]int64{rec(2): 20}, config: map[string]string{"interval": "10000000000000"}, corrupt: true},
		"keep-alive 1e13 ms":              {value: "8", records: map[string]int64{rec(2): 20}, config: map[string]string{"keepAliveTime": "10000000000000"}, corrupt: true},
	}
	for name, st := range states {
		t.Run(name, func(t *testing.T) {
			l, rdb, clock := setup(t, ratelimiter.Config{Rate: 10, Interval: time.Second})
			k := l.Keys()
			write := func() {
				now := clock.Millis()
				p := rdb.TxPipeline()
				p.Del(ctx, k.Value, k.Permits)
				if st.value != "" {
					p.Set(ctx, k.Value, st.value, 0)
				}
				for m, ago := range st.records {
					score := float64(now - ago)
					if ago == -1e18 {
						score = 1e18
					}
					p.ZAdd(ctx, k.Permits, redis.Z{Score: score, Member: m})
				}
				for f, v := range st.config {
					p.HSet(ctx, k.Config, f, v)
				}
				_, err := p.Exec(ctx)
				require.NoError(t, err)
			}
			opts := []ratelimiter.Option{clock.option(), ratelimiter.WithClientID("c1")}
			direct := ratelimiter.NewClient(rdb, append(opts, ratelimiter.WithMaxBatch(1))...).Limiter(l.Name())
			all := ratelimiter.NewClient(rdb, opts...).All(l.Name())
			errs := map[string]error{}
			write()
			avail, err := l.AvailablePermits(ctx)
			errs["AvailablePermits"] = err
			write()
			res, err := l.Allow(ctx, 1)
			errs["Allow"] = err
			write()
			took, err := l.TryAcquire(ctx, 1)
			errs["TryAcquire"] = err
			write()
			tookDirect, err := direct.TryAcquire(ctx, 1)
			errs["TryAcquire without combining"] = err
			write()
			resAll, err := all.Allow(ctx, 1)
			errs["composite Allow"] = err
			write()
			errs["Release"] = l.Release(ctx, 1)
			write()
			errs["SetRate KeepState"] = l.SetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Second}, ratelimiter.KeepState())
			write()
			_, errs["Config"] = l.Config(ctx)
			for op, err := range errs {
				if st.corrupt && op != "SetRate KeepState" { // a rewrite repairs the config
					require.ErrorIs(t, err, ratelimiter.ErrCorruptState, op)
				} else {
					require.NoError(t, err, op)
				}
			}
			if st.corrupt {
				return
			}
			require.GreaterOrEqual(t, res.Remaining, int64(0))
			require.Equal(t, avail >= 1, res.Granted, "Allow vs AvailablePermits %d", avail)
			require.Equal(t, res.Granted, took, "TryAcquire vs Allow")
			require.Equal(t, res.Granted, tookDirect, "TryAcquire without combining vs Allow")
			require.Equal(t, res.Granted, resAll.Granted, "composite vs Allow")
			if res.Granted {
				require.Equal(t, avail-1, res.Remaining)
				return
			}
			require.Equal(t, avail, res.Remaining)
			write()
			res, err = l.Allow(ctx, 1)
			require.NoError(t, err)
			if name == "record at score 1e18" {
				require.Greater(t, res.RetryAfter, 100*365*24*time.Hour, "the record never expires")
				return
			}
			clock.Advance(res.RetryAfter)
			ok, err := l.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok, "refused after the hint %v", res.RetryAfter)
		})
	}
}
