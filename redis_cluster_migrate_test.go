package ratelimiter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestClusterSlotMigration moves a slot holding an OVERALL limiter, a
// PER_CLIENT limiter and a composite of both, the way redis-cli --cluster
// reshard does (IMPORTING and MIGRATING, other keys of the slot in batches
// of 10, then SETSLOT NODE), while a worker per kind calls TryAcquire. In a
// MIGRATING slot Redis runs a multi-key command on the source only when
// every key it declares is there, sends it to the target (ASK) when none
// is, and refuses it with TRYAGAIN when some are: every call whose keys
// all exist must be granted while they sit on the source, and after they
// moved. The test prints, per kind, the calls refused and how long calls
// were unavailable.
func TestClusterSlotMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := redistest.StartCluster(ctx, t)
	rdb := newClusterClient(t, c)

	cli := ratelimiter.NewClient(rdb)
	overall, perClient, fresh := cli.Limiter("{mig}:overall"), cli.Limiter("{mig}:perclient"), cli.Limiter("{mig}:fresh")
	for _, l := range []struct {
		lim  *ratelimiter.Limiter
		mode ratelimiter.Mode
	}{{overall, ratelimiter.Overall}, {perClient, ratelimiter.PerClient}, {fresh, ratelimiter.Overall}} {
		ok, err := l.lim.TrySetRate(ctx, ratelimiter.Config{Mode: l.mode, Rate: 1_000_000, Interval: time.Hour})
		require.NoError(t, err)
		require.True(t, ok)
	}
	composite := cli.All("{mig}:overall", "{mig}:perclient")
	kinds := []struct {
		name string
		call func(context.Context) (bool, error)
	}{
		{"OVERALL", func(ctx context.Context) (bool, error) { return overall.TryAcquire(ctx, 1) }},
		{"PER_CLIENT", func(ctx context.Context) (bool, error) { return perClient.TryAcquire(ctx, 1) }},
		{"composite", func(ctx context.Context) (bool, error) { return composite.TryAcquire(ctx, 1) }},
	}
	// Every limiter but fresh has its keys: the config, and the value and
	// permits of its mode (this Client's, for PER_CLIENT).
	for _, k := range kinds {
		ok, err := k.call(ctx)
		require.NoError(t, err, k.name)
		require.True(t, ok, k.name)
	}

	slot, src, dst := slotAndTarget(ctx, t, c, overall.Keys().Config)
	s, d := nodeRedis(t, src), nodeRedis(t, dst)
	srcID, err := s.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	dstID, err := d.Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)

	// Other keys of the slot, moved before the limiters' as a reshard may.
	limiterKeys := map[string]bool{}
	for _, l := range []*ratelimiter.Limiter{overall, perClient, fresh} {
		for _, k := range l.Keys().All() {
			limiterKeys[k] = true
		}
	}
	pipe := rdb.Pipeline()
	for i := 0; i < 1000; i++ {
		pipe.Set(ctx, fmt.Sprintf("{mig}:other:%d", i), i, 0)
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)

	// One worker per kind, from now until the slot has moved.
	type call struct {
		start, end time.Time
		ok         bool
		err        error
	}
	type mark struct {
		name string
		at   time.Time
	}
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		calls  = make([][]call, len(kinds))
		stop   bool
		wg     sync.WaitGroup
		phases []mark
	)
	halt := func() {
		mu.Lock()
		stop = true
		mu.Unlock()
		wg.Wait()
	}
	t.Cleanup(halt)
	for i, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := stop
				mu.Unlock()
				if done {
					return
				}
				start := time.Now()
				ok, err := k.call(ctx)
				mu.Lock()
				calls[i] = append(calls[i], call{start, time.Now(), ok, err})
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	// phase starts a phase and returns once every worker has made 20
	// calls that began in it (the first call it ends may have begun
	// before).
	phase := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		phases = append(phases, mark{name, time.Now()})
		base := make([]int, len(calls))
		for i := range calls {
			base[i] = len(calls[i])
		}
		for {
			done := true
			for i := range calls {
				done = done && len(calls[i]) >= base[i]+21
			}
			if done || ctx.Err() != nil {
				return
			}
			cond.Wait()
		}
	}
	move := func(keys []string) {
		args := []any{"MIGRATE", strings.Split(dst.Addr, ":")[0], dst.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, s.Do(ctx, args...).Err())
	}

	phase("stable")
	require.NoError(t, d.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, s.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	phase("migrating, limiter keys on the source")

	// A Client that has made no call yet (its first call probes the
	// user's permissions) is served as well; checked below, after the
	// report. A limiter never used has a config but no value or permits
	// keys: Redis refuses a script that declares both in a MIGRATING slot.
	newOK, newErr := ratelimiter.NewClient(rdb).Limiter("{mig}:overall").TryAcquire(ctx, 1)
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	newWaitErr := ratelimiter.NewClient(rdb).Limiter("{mig}:overall").Acquire(actx, 1)
	acancel()
	_, freshErr := fresh.TryAcquire(ctx, 1)

	for {
		keys, err := s.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		require.NoError(t, err)
		var batch []string
		for _, k := range keys {
			if !limiterKeys[k] {
				batch = append(batch, k)
			}
		}
		if len(batch) == 0 {
			break
		}
		for len(batch) > 0 {
			n := min(10, len(batch))
			move(batch[:n])
			batch = batch[n:]
		}
	}
	phase("other keys moved, limiter keys on the source")
	keys, err := s.ClusterGetKeysInSlot(ctx, slot, 100).Result()
	require.NoError(t, err)
	move(keys)
	phase("limiter keys moved, slot still migrating")
	require.NoError(t, d.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	require.NoError(t, s.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	for _, m := range masters {
		require.NoError(t, nodeRedis(t, m).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	phase("slot moved")
	mu.Lock()
	phases = append(phases, mark{"end", time.Now()})
	mu.Unlock()
	halt()

	// Report, then check: per kind and phase the calls refused, and the
	// longest time from the end of a granted call to the end of the next
	// one across the migration (unavailable: calls failed in between).
	for i, k := range kinds {
		var gap time.Duration
		var lastOK time.Time
		for _, cl := range calls[i] {
			if cl.ok && cl.err == nil {
				if !lastOK.IsZero() {
					gap = max(gap, cl.end.Sub(lastOK))
				}
				lastOK = cl.end
			}
		}
		t.Logf("%s: longest time between two grants %v", k.name, gap.Round(time.Millisecond))
		for p := 0; p+1 < len(phases); p++ {
			n, bad := 0, 0
			var first error
			for _, cl := range calls[i] {
				if cl.start.Before(phases[p].at) || !cl.start.Before(phases[p+1].at) {
					continue
				}
				n++
				if !cl.ok || cl.err != nil {
					bad++
					if first == nil {
						first = cl.err
					}
				}
			}
			t.Logf("%s, %s (%v): %d of %d calls not granted (first error: %v)",
				k.name, phases[p].name, phases[p+1].at.Sub(phases[p].at).Round(time.Millisecond), bad, n, first)
		}
	}
	require.NoError(t, newErr, "a new Client's OVERALL TryAcquire while its keys are on the source")
	require.True(t, newOK)
	require.NoError(t, newWaitErr, "a new Client's OVERALL Acquire while its keys are on the source")
	require.ErrorContains(t, freshErr, "TRYAGAIN")
	for i, k := range kinds {
		for _, cl := range calls[i] {
			require.NoErrorf(t, cl.err, "%s at %v", k.name, cl.start.Sub(phases[0].at))
			require.Truef(t, cl.ok, "%s at %v", k.name, cl.start.Sub(phases[0].at))
		}
	}
	owner, err := c.MasterForSlot(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, dst.Addr, owner.Addr)
	n, err := nodeRedis(t, dst).Exists(ctx, overall.Keys().Config, overall.Keys().Permits).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the limiter's keys are on the target")
}
