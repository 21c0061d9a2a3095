package ratelimiter_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// stop and resume SIGSTOP and SIGCONT a redis-server of the test's own.
func stop(t *testing.T, srv *redistest.Server) {
	t.Helper()
	require.NoError(t, syscall.Kill(srv.Pid(), syscall.SIGSTOP))
}

func resume(t *testing.T, srv *redistest.Server) {
	t.Helper()
	require.NoError(t, syscall.Kill(srv.Pid(), syscall.SIGCONT))
}

// Redis failing mid-lease: a live lease keeps handing out what Redis
// granted, and nothing beyond it. With the value key corrupted, the next
// lease call fails with ErrCorruptState and writes nothing, and so does
// the return at Close (its permits are reported Kept). With the server
// stopped (SIGSTOP), callers get the lease's permits, a caller that needs
// Redis gets its context's error, and once the server resumes every
// permit not handed out is given back: the records hold exactly the
// grants.
func TestLeaseRedisErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("corrupt value", func(t *testing.T) {
		g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2, MaxPermits: 8},
			ratelimiter.Config{Rate: 1000, Interval: time.Minute}, nil)
		g.grant(t, 3) // the second takes a lease of 3, the third is handed out
		value := g.rdb.Get(ctx, g.l.Keys().Value).Val()
		require.NoError(t, g.rdb.Set(ctx, g.l.Keys().Value, "x", 0).Err())
		before := snapshot(t, g.rdb, g.l)
		leased := g.leased.Load()
		var err error
		for i := 0; i < 64 && err == nil; i++ {
			_, err = g.l.TryAcquire(ctx, 1)
		}
		require.ErrorIs(t, err, ratelimiter.ErrCorruptState, "the lease call")
		require.Positive(t, g.leased.Load()-leased, "the live lease handed out what Redis granted")
		require.Equal(t, before, snapshot(t, g.rdb, g.l), "nothing written")

		// A new lease, then the value corrupted again: Close's return fails.
		require.NoError(t, g.rdb.Set(ctx, g.l.Keys().Value, value, 0).Err())
		leased = g.leased.Load()
		g.grant(t, 3)
		require.Positive(t, g.leased.Load()-leased)
		require.NoError(t, g.rdb.Set(ctx, g.l.Keys().Value, "x", 0).Err())
		before = snapshot(t, g.rdb, g.l)
		require.ErrorIs(t, g.c.Close(ctx), ratelimiter.ErrCorruptState)
		require.Equal(t, before, snapshot(t, g.rdb, g.l), "the failed return wrote nothing")
		evs := g.ev.all()
		last := evs[len(evs)-1]
		require.Equal(t, ratelimiter.LeaseClosed, last.End)
		require.ErrorIs(t, last.Err, ratelimiter.ErrCorruptState)
		require.Positive(t, last.Kept)
		s := g.ev.sum()
		require.Equal(t, s.permits, s.handed+s.returned+s.kept)
	})
	t.Run("SIGSTOP", func(t *testing.T) {
		redistest.Need(t)
		srv, err := redistest.StartWrapped(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2, MaxPermits: 8},
			ratelimiter.Config{Rate: 1000, Interval: time.Minute}, srv)
		var granted int64
		for i := 0; i < 5; i++ { // a lease of 3 (handed out), then a lease of 7
			ok, err := g.l.TryAcquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			granted++
		}
		stop(t, srv)
		resumed := false
		defer func() {
			if !resumed {
				resume(t, srv)
			}
		}()
		var lastErr error
		for i := 0; i < 64; i++ {
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			ok, err := g.l.TryAcquire(short, 1)
			cancel()
			if err != nil {
				lastErr = err
				break
			}
			require.True(t, ok)
			granted++
		}
		require.ErrorIs(t, lastErr, context.DeadlineExceeded, "the lease ran out while Redis was stopped")
		require.Greater(t, granted, int64(5), "granted from the lease while Redis was stopped")
		resume(t, srv)
		resumed = true
		require.NoError(t, g.c.Close(ctx))
		held, _, _ := g.held(t)
		require.Equal(t, granted, held, "the records hold exactly the grants")
		s := g.ev.sum()
		t.Logf("%d grants; %d leases: %d permits, %d handed out, %d returned, %d kept", granted, s.leases, s.permits, s.handed, s.returned, s.kept)
		require.Zero(t, s.kept)
	})
}

// TestLeaseDeniedCommandLeavesStateUntouched: a Client with leases whose
// Redis user lacks one command of README.md's ACL line, each in turn,
// asks a configured limiter (an expired record, a live one, a value) until
// its demand makes it call lease.lua. Every call that fails leaves the
// limiter's keys exactly as they were: the permission check refuses
// before the script, or the script fails on a read before its first
// write.
func TestLeaseDeniedCommandLeavesStateUntouched(t *testing.T) {
	admin := newRedis(t)
	ctx := context.Background()
	cmds, _ := readmeACL(t)
	user := "lease-denied-" + strings.ReplaceAll(uniqueName(t), "/", "-")
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	name := uniqueName(t)
	var calls, failed, typed int
	for _, withheld := range cmds {
		as := readmeUser(t, admin, user, withheld)
		l := ratelimiter.NewClient(as, ratelimiter.WithLeases(ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2})).Limiter(name)
		k := l.Keys()
		keys := []string{k.Config, k.Value, k.ClientValue, k.Permits, k.ClientPermits}
		now := time.Now().UnixMilli()
		p := admin.TxPipeline()
		p.Del(ctx, keys...)
		p.HSet(ctx, k.Config, "rate", "1000", "interval", "60000", "type", "0")
		p.Set(ctx, k.Value, "996", 0)
		p.ZAdd(ctx, k.Permits, redis.Z{Score: float64(now - 120_000), Member: string([]byte{16, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0})},
			redis.Z{Score: float64(now - 1000), Member: string([]byte{16, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0})})
		_, err := p.Exec(ctx)
		require.NoError(t, err)
		for i := 0; i < 4; i++ {
			before := keyState(t, admin, keys)
			_, err := l.TryAcquire(ctx, 1)
			calls++
			if err == nil {
				continue
			}
			failed++
			if errors.Is(err, ratelimiter.ErrPermissionDenied) {
				typed++
			}
			if after := keyState(t, admin, keys); !assertSame(t, before, after) {
				t.Errorf("without +%s, TryAcquire %d failed (%v) and changed the state:\nbefore %v\nafter  %v", withheld, i, err, before, after)
			}
		}
		as.Close()
	}
	t.Logf("%d calls, %d failed (%d with ErrPermissionDenied)", calls, failed, typed)
	require.Positive(t, failed)
}

// A Redis user that may acquire but not run lease.lua (no ZREM, which
// the lease scripts need and acquire.lua runs only to take back its own
// record when DECRBY was refused) gets every permit through acquire.lua:
// the lease call is refused before anything is sent, and its callers fall
// back to acquire.lua instead of failing.
func TestLeasePermissionDeniedFallsBack(t *testing.T) {
	admin := newRedis(t)
	ctx := context.Background()
	user := "lease-nozrem-" + strings.ReplaceAll(uniqueName(t), "/", "-")
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	as := readmeUser(t, admin, user, "zrem")
	defer as.Close()
	var leased int
	c := ratelimiter.NewClient(as, ratelimiter.WithLeases(ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2}),
		ratelimiter.WithHooks(ratelimiter.Hooks{Decision: func(d ratelimiter.Decision) {
			if d.Leased {
				leased++
			}
		}}))
	name := uniqueName(t)
	_, err := ratelimiter.NewClient(admin).Limiter(name).TrySetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Minute})
	require.NoError(t, err)
	l := c.Limiter(name)
	for i := 0; i < 10; i++ {
		ok, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err, "TryAcquire %d", i)
		require.True(t, ok)
	}
	require.Zero(t, leased)
	require.NoError(t, c.Close(ctx))
	n, err := l.AvailablePermits(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(990), n)
}
