package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// On a go-redis Ring of two servers every operation works, each limiter's
// five keys land on one shard (the Ring hashes their common tag), names
// whose keys would be split are refused before anything is sent, and so
// are composites whose parts would be on different shards.
func TestRing(t *testing.T) {
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addrs := map[string]string{}
	for _, shard := range []string{"a", "b"} {
		srv, err := redistest.StartWrapped(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		addrs[shard] = srv.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	defer ring.Close()
	c := ratelimiter.NewClient(ring)
	perShard := map[string]int{}
	for i := 0; i < 16; i++ {
		l := c.Limiter(fmt.Sprintf("%s-%d", uniqueName(t), i))
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Minute})
		require.NoError(t, err)
		ok, err := l.TryAcquire(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, l.Release(ctx, 1))
		n, err := l.AvailablePermits(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), n)
		k := l.Keys()
		for shard, addr := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			held, err := rdb.Exists(ctx, k.Config, k.Value, k.Permits).Result()
			rdb.Close()
			require.NoError(t, err)
			require.Contains(t, []int64{0, 3}, held, "limiter %s split over shards", l.Name())
			if held == 3 {
				perShard[shard]++
			}
		}
	}
	require.Len(t, perShard, 2, "16 limiters all on one shard: %v", perShard)

	if err := c.Limiter("a{b").Release(ctx, 0); !errors.Is(err, ratelimiter.ErrCrossSlot) {
		t.Errorf("name a{b on a Ring: %v, want ErrCrossSlot", err)
	}
	_, err := c.All("{t}x", "{t}y").TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized, "parts sharing a tag reach Redis")
	_, err = c.All("x", "y").TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrCrossSlot, "parts on different shards")
}
