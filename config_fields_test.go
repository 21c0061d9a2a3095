package ratelimiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// maxHashDuration is the longest whole-millisecond Duration, the longest
// interval or keep-alive a config hash may hold.
const maxHashDuration = time.Duration(1<<63-1) / time.Millisecond * time.Millisecond

// TestConfigFields: Config accepts exactly what the scripts accept:
// decimal integers, rate in [1, 2^53-1], interval in [1, 9223372036854]
// (ms, the longest Duration), keepAliveTime absent or in [0, 9223372036854],
// type "0" or "1". Anything else is ErrCorruptState
// (a hash without rate, interval or type is ErrNotInitialized, as for the
// scripts), and an acquisition and AvailablePermits say the same.
func TestConfigFields(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	ok := func(rate, interval, keep int64, mode ratelimiter.Mode) *ratelimiter.Config {
		return &ratelimiter.Config{Mode: mode, Rate: rate, Interval: time.Duration(interval) * time.Millisecond,
			KeepAlive: time.Duration(keep) * time.Millisecond}
	}
	for _, tc := range []struct {
		name   string
		fields []string
		want   *ratelimiter.Config // nil: the error
		err    error
	}{
		{"plain", []string{"rate", "10", "interval", "1000", "type", "0"}, ok(10, 1000, 0, ratelimiter.Overall), nil},
		{"per client, keep-alive", []string{"rate", "1", "interval", "1", "type", "1", "keepAliveTime", "5000"}, ok(1, 1, 5000, ratelimiter.PerClient), nil},
		{"keep-alive 0", []string{"rate", "1", "interval", "1", "type", "0", "keepAliveTime", "0"}, ok(1, 1, 0, ratelimiter.Overall), nil},
		// The acquire script passes the field to PEXPIRE as read, which
		// refuses leading zeros: it must format this one.
		{"keep-alive with leading zeros", []string{"rate", "1", "interval", "1000", "type", "0", "keepAliveTime", "02000"}, ok(1, 1000, 2000, ratelimiter.Overall), nil},
		{"leading zeros", []string{"rate", "010", "interval", "0001000", "type", "0"}, ok(10, 1000, 0, ratelimiter.Overall), nil},
		{"rate 2^53-1", []string{"rate", "9007199254740991", "interval", "1000", "type", "0"}, ok(1<<53-1, 1000, 0, ratelimiter.Overall), nil},
		{"interval longest Duration", []string{"rate", "1", "interval", "9223372036854", "type", "0", "keepAliveTime", "9223372036854"},
			&ratelimiter.Config{Rate: 1, Interval: maxHashDuration, KeepAlive: maxHashDuration}, nil},
		{"interval 1e13", []string{"rate", "1", "interval", "10000000000000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"keep-alive 2^53-1", []string{"rate", "1", "interval", "1000", "type", "0", "keepAliveTime", "9007199254740991"}, nil, ratelimiter.ErrCorruptState},
		{"rate 0", []string{"rate", "0", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate -1", []string{"rate", "-1", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate 2^53", []string{"rate", "9007199254740992", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate Long.MAX_VALUE", []string{"rate", "9223372036854775807", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate beyond int64", []string{"rate", "99999999999999999999", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate hex", []string{"rate", "0x10", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate exponent", []string{"rate", "1e3", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate fraction", []string{"rate", "10.0", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate plus", []string{"rate", "+10", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate spaces", []string{"rate", " 10 ", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"rate empty", []string{"rate", "", "interval", "1000", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"interval 0", []string{"rate", "1", "interval", "0", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"interval -5", []string{"rate", "1", "interval", "-5", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"interval 2^53", []string{"rate", "1", "interval", "9007199254740992", "type", "0"}, nil, ratelimiter.ErrCorruptState},
		{"keep-alive -1", []string{"rate", "1", "interval", "1", "type", "0", "keepAliveTime", "-1"}, nil, ratelimiter.ErrCorruptState},
		{"keep-alive 1e17", []string{"rate", "1", "interval", "1", "type", "0", "keepAliveTime", "100000000000000000"}, nil, ratelimiter.ErrCorruptState},
		{"keep-alive text", []string{"rate", "1", "interval", "1", "type", "0", "keepAliveTime", "soon"}, nil, ratelimiter.ErrCorruptState},
		{"type 2", []string{"rate", "1", "interval", "1", "type", "2"}, nil, ratelimiter.ErrCorruptState},
		{"type 00", []string{"rate", "1", "interval", "1", "type", "00"}, nil, ratelimiter.ErrCorruptState},
		{"type -1", []string{"rate", "1", "interval", "1", "type", "-1"}, nil, ratelimiter.ErrCorruptState},
		{"no rate", []string{"interval", "1000", "type", "0"}, nil, ratelimiter.ErrNotInitialized},
		{"no type", []string{"rate", "1", "interval", "1000"}, nil, ratelimiter.ErrNotInitialized},
		{"keep-alive only", []string{"keepAliveTime", "0"}, nil, ratelimiter.ErrNotInitialized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("c1")).Limiter(uniqueName(t))
			require.NoError(t, rdb.HSet(ctx, l.Keys().Config, tc.fields).Err())
			got, err := l.Config(ctx)
			if tc.want != nil {
				require.NoError(t, err)
				require.Equal(t, *tc.want, got)
				require.NoError(t, got.Validate(), "what Config returns is a valid Config")
			} else {
				require.ErrorIs(t, err, tc.err)
				require.Equal(t, ratelimiter.Config{}, got)
			}
			// The scripts agree: both paths fail with the same sentinel, or
			// neither does.
			granted, aerr := l.TryAcquire(ctx, 1)
			if aerr == nil && tc.want != nil && tc.want.KeepAlive > 0 {
				keepAliveTTLs(t, rdb, l, *tc.want, granted)
			}
			_, perr := l.AvailablePermits(ctx)
			for what, serr := range map[string]error{"acquire": aerr, "available": perr} {
				if tc.want != nil {
					require.NoError(t, serr, what)
				} else {
					require.True(t, errors.Is(serr, tc.err), "%s: %v", what, serr)
				}
			}
		})
	}
}

// keepAliveTTLs fails t unless an acquisition on l, a limiter of cfg
// (with a keep-alive), just left its config and value keys, and its
// permits key when it granted (it holds the grant's record), with a TTL of
// at most the keep-alive. It runs before any other call: with a 1 ms
// interval the next call frees that record, and the empty key goes.
func keepAliveTTLs(t *testing.T, rdb *redis.Client, l *ratelimiter.Limiter, cfg ratelimiter.Config, granted bool) {
	t.Helper()
	ks := l.Keys()
	value, permits := ks.Value, ks.Permits
	if cfg.Mode == ratelimiter.PerClient {
		value, permits = ks.ClientValue, ks.ClientPermits
	}
	keys := []string{ks.Config, value}
	if granted {
		keys = append(keys, permits)
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		require.True(t, ttl > 0 && ttl <= cfg.KeepAlive, "%s: PTTL %v, want (0, %v]", k, ttl, cfg.KeepAlive)
	}
}
