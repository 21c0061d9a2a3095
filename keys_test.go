package ratelimiter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

func TestKeyLayout(t *testing.T) {
	rdb := newRedis(t)
	const id = "3f2c0a4e-8a55-4bb4-9c1e-0123456789ab"
	cases := []struct {
		name   string
		mapper func(string) string
		want   wire.Keys
	}{
		{"api", nil, wire.Keys{
			Config: "api", Value: "{api}:value", ClientValue: "{api}:value:" + id,
			Permits: "{api}:permits", ClientPermits: "{api}:permits:" + id,
		}},
		{"{user42}:login", nil, wire.Keys{
			Config: "{user42}:login", Value: "{user42}:login:value", ClientValue: "{user42}:login:value:" + id,
			Permits: "{user42}:login:permits", ClientPermits: "{user42}:login:permits:" + id,
		}},
		{"api", func(s string) string { return "svc:" + s }, wire.Keys{
			Config: "svc:api", Value: "{svc:api}:value", ClientValue: "{svc:api}:value:" + id,
			Permits: "{svc:api}:permits", ClientPermits: "{svc:api}:permits:" + id,
		}},
	}
	for _, tc := range cases {
		opts := []ratelimiter.Option{ratelimiter.WithClientID(id)}
		if tc.mapper != nil {
			opts = append(opts, ratelimiter.WithNameMapper(tc.mapper))
		}
		l := ratelimiter.NewClient(rdb, opts...).Limiter(tc.name)
		require.Equal(t, tc.want, l.Keys(), tc.name)
	}
}

// TestKeysInRedis proves that the calls touch exactly the keys of the
// layout, for both modes, by listing what exists afterwards.
func TestKeysInRedis(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	prefix := uniqueName(t)
	c := ratelimiter.NewClient(rdb, ratelimiter.WithNameMapper(func(s string) string { return prefix + s }))
	plain, tagged := prefix+"plain", prefix+"{t}x"
	for _, tc := range []struct {
		mode ratelimiter.Mode
		name string
		want []string
	}{
		{ratelimiter.Overall, "plain", []string{plain, "{" + plain + "}:value", "{" + plain + "}:permits"}},
		{ratelimiter.PerClient, "{t}x", []string{tagged, tagged + ":value:" + c.ID(), tagged + ":permits:" + c.ID()}},
	} {
		l := c.Limiter(tc.name)
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: tc.mode, Rate: 5, Interval: time.Second})
		require.NoError(t, err)
		ok, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)

		var found []string
		iter := rdb.Scan(ctx, 0, "*"+prefix+tc.name+"*", 100).Iterator()
		for iter.Next(ctx) {
			found = append(found, iter.Val())
		}
		require.NoError(t, iter.Err())
		require.ElementsMatch(t, tc.want, found)
	}
}

func TestClientID(t *testing.T) {
	rdb := newRedis(t)
	a := ratelimiter.NewClient(rdb)
	b := ratelimiter.NewClient(rdb)
	require.Len(t, a.ID(), 36)
	require.Equal(t, strings.ToLower(a.ID()), a.ID())
	require.NotEqual(t, a.ID(), b.ID())
	require.Equal(t, "fixed", ratelimiter.NewClient(rdb, ratelimiter.WithClientID("fixed")).ID())
}
