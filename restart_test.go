package ratelimiter_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// Restarts and replaced masters (internal/script/restart.go): a server
// that comes back from a snapshot, or a replica promoted before it got
// the last grants, holds a window with fewer records than were granted.
// Without the fill, the permits granted since are granted again within
// the same interval: 15 more grants on a full window of 20 here.

// restartRate and restartInterval: the interval is long enough that the
// restart and the grants counted after it fall inside it on a loaded
// machine (a restart takes well under a second here).
const (
	restartRate     = 20
	restartInterval = 4 * time.Second
)

// burst takes 5 permits, lets between() run (a snapshot, a detach), then
// takes the other 15: the window is full. It returns when the first grant
// was asked: every record is stamped after it, so no more may be granted
// before start + restartInterval.
func burst(t *testing.T, ctx context.Context, l *ratelimiter.Limiter, between func()) (start time.Time) {
	t.Helper()
	start = time.Now()
	for i := 0; i < restartRate; i++ {
		if i == 5 {
			between()
		}
		ok, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok, "grant %d of a fresh window", i)
	}
	return start
}

// grantsUntil tries to take a permit every 20 ms until end and returns how
// many were granted; errors (a connection the restart broke) are counted
// apart, for the log. It fails the test when less than half the interval
// is left: the check would then say little.
func grantsUntil(t *testing.T, ctx context.Context, l *ratelimiter.Limiter, end time.Time) (granted, errs int) {
	t.Helper()
	require.Greater(t, time.Until(end), restartInterval/2, "the burst and the restart took most of the window")
	for time.Now().Before(end) {
		ok, err := l.TryAcquire(ctx, 1)
		switch {
		case err != nil:
			errs++
		case ok:
			granted++
		}
		time.Sleep(20 * time.Millisecond)
	}
	return granted, errs
}

func TestRestartFromSnapshotKeepsTheLimit(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time restart run")
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Persistence is off (redisproc): SAVE writes the snapshot, and the
	// restart (SIGTERM, no save points) loads it without saving again, as
	// a crash after a scheduled snapshot would.
	srv, err := redisproc.StartWrapped(ctx, nil)
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: restartRate, Interval: restartInterval}))

	start := burst(t, ctx, l, func() { require.NoError(t, rdb.Save(ctx).Err()) })
	require.NoError(t, srv.Restart(ctx))
	restarted := time.Since(start)
	granted, errs := grantsUntil(t, ctx, l, start.Add(restartInterval))
	t.Logf("restart took %v after the burst began; %d granted and %d errors before the window ended", restarted, granted, errs)
	require.Zero(t, granted, "a restart from a snapshot taken after 5 of 20 grants must not grant the other 15 again")

	// One interval after the restart was seen, the limiter grants again.
	require.Eventually(t, func() bool {
		ok, err := l.TryAcquire(ctx, 1)
		return err == nil && ok
	}, 2*restartInterval, 50*time.Millisecond)
}

func TestPromotedReplicaKeepsTheLimit(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time failover run")
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, err := redisproc.StartWrapped(ctx, nil)
	require.NoError(t, err)
	defer primary.Close()
	replica, err := redisproc.StartWrapped(ctx, nil)
	require.NoError(t, err)
	defer replica.Close()
	rdb, rep, promote := failoverPair(t, ctx, primary, replica)
	l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: restartRate, Interval: restartInterval}))

	start := burst(t, ctx, l, func() {
		// The replica has the first 5 grants, then is promoted: it never
		// gets the other 15.
		acked, err := rdb.Do(ctx, "WAIT", 1, 2000).Int()
		require.NoError(t, err)
		require.Equal(t, 1, acked, "the replica did not acknowledge the first grants")
		require.NoError(t, rep.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
	})
	promote()
	granted, errs := grantsUntil(t, ctx, l, start.Add(restartInterval))
	t.Logf("%d granted and %d errors on the promoted replica before the window ended", granted, errs)
	require.Zero(t, granted, "a replica promoted after 5 of 20 grants must not grant the other 15 again")
}

// TestFailoverToSkewedReplica: the replica holds every grant, but its
// clock differs from the old master's. Ahead by 2 s of a 4 s interval,
// it sees the burst's records expire 2 s early: without the fill, the
// whole rate again within the window. Behind, the records look younger:
// the limit holds on its own, and the test reports how long the limiter
// refused after the window (up to the step, plus the fill's interval).
func TestFailoverToSkewedReplica(t *testing.T) {
	redistest.SkipIfShort(t, "real-time failover runs")
	for _, skew := range []time.Duration{2 * time.Second, -2 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			redistest.Need(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			shift := redistest.NewClockShift(t, skew)
			primary, err := redisproc.StartWrapped(ctx, nil)
			require.NoError(t, err)
			defer primary.Close()
			replica, err := redisproc.StartWrapped(ctx, shift.Wrapper())
			require.NoError(t, err)
			defer replica.Close()
			rdb, rep, promote := failoverPair(t, ctx, primary, replica)
			l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
			require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: restartRate, Interval: restartInterval}))

			start := burst(t, ctx, l, func() {})
			acked, err := rdb.Do(ctx, "WAIT", 1, 2000).Int()
			require.NoError(t, err)
			require.Equal(t, 1, acked, "the replica did not acknowledge the grants")
			require.NoError(t, rep.Do(ctx, "REPLICAOF", "NO", "ONE").Err())
			promote()
			granted, errs := grantsUntil(t, ctx, l, start.Add(restartInterval))
			t.Logf("skew %v: %d granted and %d errors on the promoted replica before the window ended", skew, granted, errs)
			require.Zero(t, granted, "a replica whose clock differs must not grant the window's permits again")
			require.Eventually(t, func() bool {
				ok, err := l.TryAcquire(ctx, 1)
				return err == nil && ok
			}, 3*restartInterval, 20*time.Millisecond)
			t.Logf("skew %v: first grant %v after the window ended", skew, time.Since(start.Add(restartInterval)).Round(10*time.Millisecond))
		})
	}
}

// TestClockStepAhead: the master's clock steps 3 s ahead (an NTP step)
// while a window of 6 s is full. Its records then expire 3 s early; the
// Client's next acquisition carries the most the server's clock may read
// (from its reading at the burst), its script answers RLSTEP, and the
// Client fills the window before they expire.
func TestClockStepAhead(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time clock step run")
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shift := redistest.NewClockShift(t, 0)
	srv, err := redisproc.StartWrapped(ctx, shift.Wrapper())
	require.NoError(t, err)
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	const interval = 6 * time.Second
	l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: restartRate, Interval: interval}))

	start := burst(t, ctx, l, func() {})
	shift.Set(t, 3*time.Second)
	granted, errs := grantsUntil(t, ctx, l, start.Add(interval))
	t.Logf("%d granted and %d errors after a 3 s step before the window ended", granted, errs)
	require.Zero(t, granted, "a step ahead must not grant the window's permits again")
}

// failoverPair makes replica a replica of primary and returns a client
// that dials whichever is the master, the replica's client, and the
// switch to the replica (the old master is then stopped), as a Sentinel
// client follows a failover.
func failoverPair(t *testing.T, ctx context.Context, primary, replica *redisproc.Server) (*redis.Client, *redis.Client, func()) {
	t.Helper()
	host, port, _ := net.SplitHostPort(primary.Addr())
	rep := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { _ = rep.Close() })
	require.NoError(t, rep.Do(ctx, "REPLICAOF", host, port).Err())
	require.Eventually(t, func() bool {
		return strings.Contains(rep.Info(ctx, "replication").Val(), "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond, "the replica never synced")
	var master atomic.Value
	master.Store(primary.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr: primary.Addr(),
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, master.Load().(string))
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, rep, func() {
		master.Store(replica.Addr())
		require.NoError(t, primary.Close())
	}
}
