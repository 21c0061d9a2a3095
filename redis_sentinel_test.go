package ratelimiter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// These tests run against a real Sentinel setup (one master, two replicas,
// three sentinels) started by topologies/redis-sentinel.sh.

func newFailoverClient(t testing.TB, s *redistest.Sentinel) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.MasterName(),
		SentinelAddrs: s.SentinelAddrs(),
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestSentinel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := redistest.StartSentinel(ctx, t)
	master, err := s.Master(ctx)
	require.NoError(t, err)
	masterClient := func(string) *redis.Client { return nodeRedis(t, master) }

	t.Run("FailoverClient", func(t *testing.T) {
		rdb := newFailoverClient(t, s)
		for _, name := range []string{"st-plain", "st:{tag}:x", "a{b"} { // no slots here: a{b is fine
			for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
				name := fmt.Sprintf("%s-%s", name, mode)
				t.Run(name, func(t *testing.T) { exerciseAllOperations(ctx, t, rdb, name, mode, masterClient) })
			}
		}
	})

	t.Run("FailoverClusterClient", func(t *testing.T) {
		// NewFailoverClusterClient is a ClusterClient whose one "shard" is
		// the Sentinel group. Without RouteByLatency/RouteRandomly every
		// command goes to the master.
		rdb := redis.NewFailoverClusterClient(&redis.FailoverOptions{
			MasterName:    s.MasterName(),
			SentinelAddrs: s.SentinelAddrs(),
		})
		t.Cleanup(func() { _ = rdb.Close() })
		for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
			name := fmt.Sprintf("st-fcc-%s", mode)
			t.Run(name, func(t *testing.T) { exerciseAllOperations(ctx, t, rdb, name, mode, masterClient) })
		}
		// A cluster client applies the slot rule even though a Sentinel
		// group has no slots: names stay portable to a real cluster.
		_, err := ratelimiter.NewClient(rdb).Limiter("a{b").TryAcquire(ctx, 1)
		require.ErrorIs(t, err, ratelimiter.ErrCrossSlot)
	})

	t.Run("ReplicaAck", func(t *testing.T) {
		testReplicaAck(ctx, t, newFailoverClient(t, s), 2)
	})

	t.Run("Replicated", func(t *testing.T) {
		// What the library writes on the master reaches both replicas,
		// stamps included: a script that read the master's TIME is
		// replicated by its effects, the stamps the master chose.
		rdb := newFailoverClient(t, s)
		lim := ratelimiter.NewClient(rdb).Limiter("st-replicated")
		_, err := lim.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Hour})
		require.NoError(t, err)
		before := serverMillis(t, rdb)
		for i := 0; i < 3; i++ {
			ok, err := lim.TryAcquire(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
		}
		after := serverMillis(t, rdb)
		m := nodeRedis(t, master)
		acked, err := m.Wait(ctx, 2, 5*time.Second).Result()
		require.NoError(t, err)
		require.EqualValues(t, 2, acked)
		onMaster := stamps(t, m, lim.Keys().Permits)
		for _, st := range onMaster {
			require.True(t, st >= before && st <= after, "stamp %d outside the master's [%d, %d]", st, before, after)
		}
		for _, n := range s.Servers() {
			if n.Addr == master.Addr {
				continue
			}
			r := nodeRedis(t, n)
			v, err := r.Get(ctx, lim.Keys().Value).Int64()
			require.NoError(t, err)
			require.EqualValues(t, 4, v, "replica %s", n.Addr)
			c, err := r.ZCard(ctx, lim.Keys().Permits).Result()
			require.NoError(t, err)
			require.EqualValues(t, 3, c, "replica %s", n.Addr)
			require.Equal(t, onMaster, stamps(t, r, lim.Keys().Permits), "replica %s", n.Addr)
		}
	})
}
