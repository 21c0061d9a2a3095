package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// These tests run against a real 6-node Redis Cluster (3 masters, 3
// replicas) started by topologies/redis-cluster.sh.

func newClusterClient(t testing.TB, c *redistest.Cluster) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// nodeRedis is a plain client on one cluster node, to look at what the
// library wrote where.
func nodeRedis(t testing.TB, n redistest.Node) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := redistest.StartCluster(ctx, t)
	rdb := newClusterClient(t, c)

	t.Run("NamesOnAllMasters", func(t *testing.T) {
		// Plain names, names with a {tag} in several positions, and names
		// that look like tags but are not (empty tag, unclosed brace after
		// a closed one).
		var names []string
		for i := 0; i < 12; i++ {
			names = append(names, fmt.Sprintf("cl-plain-%d", i))
			names = append(names, fmt.Sprintf("cl-user:{tenant-%d}:api", i))
		}
		names = append(names, "{cl-tag}", "cl-x{cl-y}z", "{cl-a}{cl-b}", "cl:{a}}", "cl-π-ünïcode")
		cli := ratelimiter.NewClient(rdb)
		masters := map[string][]string{}
		for _, name := range names {
			lim := cli.Limiter(name)
			k := lim.Keys()
			slot, err := c.KeySlot(ctx, k.Config)
			require.NoError(t, err)
			for _, key := range []string{k.Value, k.ClientValue, k.Permits, k.ClientPermits} {
				s, err := c.KeySlot(ctx, key)
				require.NoError(t, err)
				require.Equalf(t, slot, s, "name %q: key %q is in slot %d, config in %d", name, key, s, slot)
			}
			m, err := c.MasterForSlot(ctx, slot)
			require.NoError(t, err)
			masters[m.Addr] = append(masters[m.Addr], name)
		}
		require.Lenf(t, masters, 3, "names must land on all three masters: %v", masters)

		for _, name := range names {
			for _, mode := range []ratelimiter.Mode{ratelimiter.Overall, ratelimiter.PerClient} {
				name := fmt.Sprintf("%s-%s", name, mode)
				t.Run(name, func(t *testing.T) {
					exerciseAllOperations(ctx, t, rdb, name, mode, func(key string) *redis.Client {
						owner, err := c.MasterForKey(ctx, key)
						require.NoError(t, err)
						return nodeRedis(t, owner)
					})
				})
			}
		}
	})

	t.Run("CrossSlotName", func(t *testing.T) {
		cli := ratelimiter.NewClient(rdb)
		for _, name := range []string{"a{b", "{}x", "a}b{c", "x{}"} {
			lim := cli.Limiter(name)
			k := lim.Keys()
			// Prove the premise on the server: the five keys are not all in
			// one slot.
			slots := map[int]bool{}
			for _, key := range []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits} {
				s, err := c.KeySlot(ctx, key)
				require.NoError(t, err)
				slots[s] = true
			}
			require.Greaterf(t, len(slots), 1, "name %q: keys should span slots", name)

			cfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: time.Second}
			calls := map[string]error{}
			_, calls["TrySetRate"] = lim.TrySetRate(ctx, cfg)
			calls["SetRate"] = lim.SetRate(ctx, cfg)
			_, calls["UpdateRate"] = lim.UpdateRate(ctx, cfg)
			_, calls["TryAcquire"] = lim.TryAcquire(ctx, 1)
			_, calls["TryAcquireTimeout"] = lim.TryAcquireTimeout(ctx, 1, time.Second)
			calls["Acquire"] = lim.Acquire(ctx, 1)
			_, calls["Allow"] = lim.Allow(ctx, 1)
			calls["Release"] = lim.Release(ctx, 1)
			_, calls["AvailablePermits"] = lim.AvailablePermits(ctx)
			_, calls["Config"] = lim.Config(ctx)
			_, calls["Expire"] = lim.Expire(ctx, time.Minute)
			_, calls["ExpireAt"] = lim.ExpireAt(ctx, time.Now().Add(time.Minute))
			_, calls["ClearExpire"] = lim.ClearExpire(ctx)
			_, calls["RemainTimeToLive"] = lim.RemainTimeToLive(ctx)
			_, calls["Delete"] = lim.Delete(ctx)
			_, calls["Exists"] = lim.Exists(ctx)
			for op, err := range calls {
				require.ErrorIsf(t, err, ratelimiter.ErrCrossSlot, "%s(%q)", op, name)
				require.ErrorIsf(t, err, ratelimiter.ErrInvalidArgument, "%s(%q)", op, name)
				var rerr redis.Error
				require.Falsef(t, errors.As(err, &rerr), "%s(%q) returned a raw Redis error: %v", op, name, err)
			}
			// Nothing was written anywhere.
			for _, key := range []string{k.Config, k.Value, k.Permits} {
				n, err := rdb.Exists(ctx, key).Result()
				require.NoError(t, err)
				require.Zerof(t, n, "key %q written for cross-slot name %q", key, name)
			}
		}
	})

	t.Run("ConcurrentLimitersAcrossMasters", func(t *testing.T) {
		// 30 limiters, 3 clients each (PER_CLIENT budgets are per client),
		// 6 goroutines hammering them: every limiter grants exactly its rate
		// within one long interval, never more.
		const limiters, rate = 30, 7
		clients := []*ratelimiter.Client{
			ratelimiter.NewClient(rdb), ratelimiter.NewClient(rdb), ratelimiter.NewClient(rdb),
		}
		granted := make([]atomic.Int64, limiters)
		for i := 0; i < limiters; i++ {
			mode := ratelimiter.Overall
			if i%2 == 1 {
				mode = ratelimiter.PerClient
			}
			ok, err := clients[0].Limiter(fmt.Sprintf("cl-conc-%d", i)).
				TrySetRate(ctx, ratelimiter.Config{Mode: mode, Rate: rate, Interval: time.Hour})
			require.NoError(t, err)
			require.True(t, ok)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				cli := clients[g%3]
				for round := 0; round < 12; round++ {
					for i := 0; i < limiters; i++ {
						ok, err := cli.Limiter(fmt.Sprintf("cl-conc-%d", i)).TryAcquire(ctx, 1)
						if err != nil {
							errs <- err
							return
						}
						if ok {
							granted[i].Add(1)
						}
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for i := range granted {
			want := int64(rate)
			if i%2 == 1 {
				want = 3 * rate // each of the three clients has its own budget
			}
			require.Equalf(t, want, granted[i].Load(), "limiter cl-conc-%d", i)
		}
	})

	t.Run("ReplicaAck", func(t *testing.T) {
		testReplicaAck(ctx, t, rdb, 1)
	})

	t.Run("Composite", func(t *testing.T) {
		// Parts named with one hash tag share a slot and work as one;
		// parts in different slots fail with ErrCrossSlot, sending nothing.
		cli := ratelimiter.NewClient(rdb)
		cfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 5, Interval: time.Hour}
		for _, name := range []string{"user:{cl-42}:sec", "user:{cl-42}:hour", "cl-all-a", "cl-all-b"} {
			_, err := cli.Limiter(name).TrySetRate(ctx, cfg)
			require.NoError(t, err)
		}
		ok, err := cli.All("user:{cl-42}:sec", "user:{cl-42}:hour").TryAcquire(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		for _, name := range []string{"user:{cl-42}:sec", "user:{cl-42}:hour"} {
			n, err := cli.Limiter(name).AvailablePermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 3, n, name)
		}
		// Weighted: a share per part, and a Release of both at once.
		w := cli.All("user:{cl-42}:sec", "user:{cl-42}:hour").Weighted(0, 2)
		ok, err = w.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, cli.All("user:{cl-42}:sec", "user:{cl-42}:hour").Weighted(1, 3).Release(ctx, 1))
		for name, want := range map[string]int64{"user:{cl-42}:sec": 4, "user:{cl-42}:hour": 4} {
			n, err := cli.Limiter(name).AvailablePermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, want, n, name)
		}

		sa, err := c.KeySlot(ctx, "cl-all-a")
		require.NoError(t, err)
		sb, err := c.KeySlot(ctx, "cl-all-b")
		require.NoError(t, err)
		require.NotEqual(t, sa, sb, "premise: the names hash to different slots")
		calls := func() (n int64) {
			for _, node := range c.Nodes() {
				n += redistest.ScriptCalls(t, nodeRedis(t, node))
			}
			return n
		}
		before := calls()
		for op, call := range compositeCalls(cli.All("cl-all-a", "cl-all-b"), 1) {
			err := call()
			require.ErrorIs(t, err, ratelimiter.ErrCrossSlot, op)
			require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, op)
		}
		require.Equal(t, before, calls(), "no script call was sent")
		for _, name := range []string{"cl-all-a", "cl-all-b"} {
			n, err := cli.Limiter(name).AvailablePermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 5, n, name)
		}
	})

	t.Run("SlotMigration", func(t *testing.T) {
		// Move a limiter's slot to another master while it is in use: the
		// client gets MOVED, follows it, and the limiter keeps its state.
		cli := ratelimiter.NewClient(rdb)
		lim := cli.Limiter("cl-migrate")
		_, err := lim.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Hour})
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			ok, err := lim.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
		}
		slot, src, dst := slotAndTarget(ctx, t, c, lim.Keys().Config)
		migrateSlot(ctx, t, c, slot, src, dst)
		owner, err := c.MasterForSlot(ctx, slot)
		require.NoError(t, err)
		require.Equal(t, dst.Addr, owner.Addr)

		avail, err := lim.AvailablePermits(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 6, avail, "state must move with the slot")
		n := 0
		for i := 0; i < 10; i++ {
			ok, err := lim.TryAcquire(ctx, 1)
			require.NoError(t, err)
			if ok {
				n++
			}
		}
		require.Equal(t, 6, n)
		// The records are now on the new owner.
		cnt, err := nodeRedis(t, dst).ZCard(ctx, lim.Keys().Permits).Result()
		require.NoError(t, err)
		require.EqualValues(t, 10, cnt)
	})
}

// exerciseAllOperations runs every operation of the library on one limiter
// through rdb (a cluster or failover client) and checks each result, and
// that the state lives on the master that owner names for a key.
func exerciseAllOperations(ctx context.Context, t *testing.T, rdb redis.UniversalClient, name string, mode ratelimiter.Mode, owner func(key string) *redis.Client) {
	cli := ratelimiter.NewClient(rdb)
	lim := cli.Limiter(name)
	cfg := ratelimiter.Config{Mode: mode, Rate: 3, Interval: time.Hour}

	ok, err := lim.TrySetRate(ctx, cfg)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = lim.TrySetRate(ctx, ratelimiter.Config{Mode: mode, Rate: 9, Interval: time.Hour})
	require.NoError(t, err)
	require.False(t, ok)
	got, err := lim.Config(ctx)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
	exists, err := lim.Exists(ctx)
	require.NoError(t, err)
	require.True(t, exists)

	res, err := lim.Allow(ctx, 1)
	require.NoError(t, err)
	require.True(t, res.Granted)
	ok, err = lim.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = lim.TryAcquireTimeout(ctx, 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = lim.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, ok, "rate 3 must be exhausted")
	res, err = lim.Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, res.Granted)
	require.Greater(t, res.RetryAfter, 50*time.Minute)
	_, err = lim.TryAcquire(ctx, 4)
	require.ErrorIs(t, err, ratelimiter.ErrPermitsExceedRate)
	ok, err = lim.TryAcquireTimeout(ctx, 1, 10*time.Millisecond)
	require.NoError(t, err)
	require.False(t, ok)
	actx, acancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = lim.Acquire(actx, 1)
	acancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	avail, err := lim.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Zero(t, avail)
	require.NoError(t, lim.Release(ctx, 2))
	avail, err = lim.AvailablePermits(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, avail)
	require.NoError(t, lim.Acquire(ctx, 2))

	// The state is on the master that owns the slot, under this mode's keys.
	k := lim.Keys()
	valueKey, permitsKey := k.Value, k.Permits
	if mode == ratelimiter.PerClient {
		valueKey, permitsKey = k.ClientValue, k.ClientPermits
	}
	node := owner(k.Config)
	v, err := node.Get(ctx, valueKey).Int64()
	require.NoError(t, err)
	require.Zero(t, v)
	recs, err := node.ZRange(ctx, permitsKey, 0, -1).Result()
	require.NoError(t, err)
	var held uint32
	for _, m := range recs {
		held += binary.LittleEndian.Uint32([]byte(m[len(m)-4:]))
	}
	require.EqualValues(t, 3, held, "3 granted, 2 released (out of the records), 2 granted")

	// Rate changes.
	updated, err := lim.UpdateRate(ctx, ratelimiter.Config{Mode: mode, Rate: 5, Interval: time.Hour}, ratelimiter.KeepState())
	require.NoError(t, err)
	require.True(t, updated)
	avail, err = lim.AvailablePermits(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, avail, "keepState: 5 - 3 permits held by the records in the window")
	require.NoError(t, lim.SetRate(ctx, ratelimiter.Config{Mode: mode, Rate: 4, Interval: time.Hour}))
	avail, err = lim.AvailablePermits(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, avail, "SetRate resets the state")

	// Expiry.
	ok, err = lim.Expire(ctx, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ttl, err := lim.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Greater(t, ttl, 50*time.Second)
	ok, err = lim.ExpireIf(ctx, 2*time.Minute, ratelimiter.ExpireNX)
	require.NoError(t, err)
	require.False(t, ok, "NX: every key has a TTL already")
	ok, err = lim.ExpireAtIf(ctx, time.Now().Add(2*time.Minute), ratelimiter.ExpireGT)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = lim.ExpireAt(ctx, time.Now().Add(3*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	pttl, err := node.PTTL(ctx, valueKey).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, 2*time.Minute, "expiry reaches the value key too")
	ok, err = lim.ClearExpire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	ttl, err = lim.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.TTLPersistent, ttl)

	// Deletion.
	ok, err = lim.Delete(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	exists, err = lim.Exists(ctx)
	require.NoError(t, err)
	require.False(t, exists)
	ttl, err = lim.RemainTimeToLive(ctx)
	require.NoError(t, err)
	require.Equal(t, ratelimiter.TTLMissing, ttl)
	updated, err = lim.UpdateRate(ctx, cfg)
	require.NoError(t, err)
	require.False(t, updated, "UpdateRate needs an existing limiter")
	_, err = lim.TryAcquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrNotInitialized)
}

// slotAndTarget returns key's slot, the master that serves it and another
// master to move it to.
func slotAndTarget(ctx context.Context, t *testing.T, c *redistest.Cluster, key string) (int, redistest.Node, redistest.Node) {
	t.Helper()
	slot, err := c.KeySlot(ctx, key)
	require.NoError(t, err)
	src, err := c.MasterForSlot(ctx, slot)
	require.NoError(t, err)
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	var dst redistest.Node
	for _, m := range masters {
		if m.Addr != src.Addr {
			dst = m
			break
		}
	}
	require.NotEmpty(t, dst.Addr)
	return slot, src, dst
}

// migrateSlot moves slot from src to dst the way redis-cli --cluster
// reshard does: IMPORTING/MIGRATING, MIGRATE the keys, then SETSLOT NODE on
// every master.
func migrateSlot(ctx context.Context, t *testing.T, c *redistest.Cluster, slot int, src, dst redistest.Node) {
	t.Helper()
	s, d := nodeRedis(t, src), nodeRedis(t, dst)
	srcID, err := s.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := d.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	require.NoError(t, d.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, s.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	for i := 0; i < 100; i++ {
		keys, err := s.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", dst.Addr[:len("127.0.0.1")], dst.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, s.Do(ctx, args...).Err())
	}
	require.NoError(t, d.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	require.NoError(t, s.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	for _, m := range masters {
		require.NoError(t, nodeRedis(t, m).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	// Wait (bounded) until every node's CLUSTER SLOTS agrees.
	deadline := time.Now().Add(10 * time.Second)
	for {
		agree := true
		for _, n := range c.Alive() {
			slots, err := nodeRedis(t, n).ClusterSlots(ctx).Result()
			require.NoError(t, err)
			for _, r := range slots {
				if slot >= int(r.Start) && slot <= int(r.End) && r.Nodes[0].Addr != dst.Addr {
					agree = false
				}
			}
		}
		if agree {
			return
		}
		require.Truef(t, time.Now().Before(deadline), "slot %d not moved to %s on every node", slot, dst.Addr)
		time.Sleep(20 * time.Millisecond)
	}
}

// testReplicaAck checks WithReplicaAck on a deployment whose masters have
// exactly `replicas` replicas, and prints the latency of an acquisition
// with and without it (sequential calls, one goroutine).
func testReplicaAck(ctx context.Context, t *testing.T, rdb redis.UniversalClient, replicas int) {
	for _, bad := range []ratelimiter.Option{
		ratelimiter.WithReplicaAck(0, time.Second),
		ratelimiter.WithReplicaAck(1, 0),
	} {
		_, err := ratelimiter.NewClient(rdb, bad).Limiter("ack-bad").TryAcquire(ctx, 1)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument)
	}

	cfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 1 << 40, Interval: time.Hour}
	plain := ratelimiter.NewClient(rdb).Limiter("{ack}:plain")
	acked := ratelimiter.NewClient(rdb, ratelimiter.WithReplicaAck(replicas, time.Second)).Limiter("{ack}:acked")
	for _, l := range []*ratelimiter.Limiter{plain, acked} {
		_, err := l.TrySetRate(ctx, cfg)
		require.NoError(t, err)
	}

	// Enough replicas: granted, no error; denials are not affected.
	ok, err := acked.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	small := ratelimiter.NewClient(rdb, ratelimiter.WithReplicaAck(replicas, time.Second)).Limiter("{ack}:small")
	_, err = small.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.PerClient, Rate: 2, Interval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, small.Acquire(ctx, 2))
	res, err := small.Allow(ctx, 1)
	require.NoError(t, err)
	require.False(t, res.Granted)
	require.Greater(t, res.RetryAfter, time.Minute)

	// More replicas than there are: the permits are taken, the call fails
	// with ErrReplicaAck after the timeout (or the context's deadline).
	tooMany := ratelimiter.NewClient(rdb, ratelimiter.WithReplicaAck(replicas+1, 30*time.Millisecond)).Limiter("{ack}:toomany")
	_, err = tooMany.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Hour})
	require.NoError(t, err)
	ok, err = tooMany.TryAcquire(ctx, 3)
	require.False(t, ok)
	require.ErrorIs(t, err, ratelimiter.ErrReplicaAck)
	require.Contains(t, err.Error(), fmt.Sprintf("%d of %d;", replicas, replicas+1), "the error says how many replicas acknowledged")
	avail, err := tooMany.AvailablePermits(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 7, avail, "the permits of a grant without enough acks stay taken")
	err = tooMany.Acquire(ctx, 1)
	require.ErrorIs(t, err, ratelimiter.ErrReplicaAck)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	start := time.Now()
	_, err = tooMany.TryAcquire(dctx, 1)
	cancel()
	// Redis answers WAIT on its server tick (100 ms at hz 10), after this
	// deadline; the call returns at the deadline instead.
	require.Truef(t, errors.Is(err, ratelimiter.ErrReplicaAck) || errors.Is(err, context.DeadlineExceeded), "err = %v", err)
	require.Less(t, time.Since(start), time.Second, "WAIT must not outlast the context's deadline by far")

	// A composite: its one script call writes every part, and its one
	// WAIT covers them all.
	allAcked := ratelimiter.NewClient(rdb, ratelimiter.WithReplicaAck(replicas, time.Second))
	for _, name := range []string{"{ack}:all-1", "{ack}:all-2"} {
		_, err = allAcked.Limiter(name).TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Hour})
		require.NoError(t, err)
	}
	ok, err = allAcked.All("{ack}:all-1", "{ack}:all-2").TryAcquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	allShort := ratelimiter.NewClient(rdb, ratelimiter.WithReplicaAck(replicas+1, 30*time.Millisecond))
	ok, err = allShort.All("{ack}:all-1", "{ack}:all-2").TryAcquire(ctx, 3)
	require.False(t, ok)
	require.ErrorIs(t, err, ratelimiter.ErrReplicaAck)
	res, err = allShort.All("{ack}:all-1", "{ack}:all-2").Allow(ctx, 9)
	require.NoError(t, err, "a refusal waits for nothing")
	require.False(t, res.Granted)
	for _, name := range []string{"{ack}:all-1", "{ack}:all-2"} {
		avail, err := allAcked.Limiter(name).AvailablePermits(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 5, avail, "%s: both grants' permits are taken", name)
	}

	// Latency with and without, one call at a time.
	const n = 1000
	measure := func(l *ratelimiter.Limiter) (p50, p99 time.Duration) {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			s := time.Now()
			ok, err := l.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			lat = append(lat, time.Since(s))
		}
		slices.Sort(lat)
		return lat[n/2], lat[n*99/100]
	}
	measure(plain) // warm up connections and script caches
	measure(acked)
	p50, p99 := measure(plain)
	a50, a99 := measure(acked)
	t.Logf("TryAcquire latency, %d sequential calls: without replica ack p50 %v p99 %v; WithReplicaAck(%d) p50 %v p99 %v",
		n, p50.Round(time.Microsecond), p99.Round(time.Microsecond), replicas, a50.Round(time.Microsecond), a99.Round(time.Microsecond))
	// Every acked grant is on the replicas by the time the caller hears of it.
	cnt, err := acked.AvailablePermits(ctx)
	require.NoError(t, err)
	require.EqualValues(t, cfg.Rate-2*n-1, cnt)
}
