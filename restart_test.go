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
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, err := redisproc.StartWrapped(ctx, nil)
	require.NoError(t, err)
	defer primary.Close()
	replica, err := redisproc.StartWrapped(ctx, nil)
	require.NoError(t, err)
	defer replica.Close()
	host, port, _ := net.SplitHostPort(primary.Addr())
	rep := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rep.Close()
	require.NoError(t, rep.ReplicaOf(ctx, host, port).Err())
	require.Eventually(t, func() bool {
		return strings.Contains(rep.Info(ctx, "replication").Val(), "master_link_status:up")
	}, 10*time.Second, 20*time.Millisecond, "the replica never synced")

	// The application's client dials whichever server is the master now,
	// as a Sentinel client does after a failover.
	var master atomic.Value
	master.Store(primary.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr: primary.Addr(),
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, master.Load().(string))
		},
	})
	defer rdb.Close()
	l := ratelimiter.NewClient(rdb).Limiter(redistest.Name(t))
	require.NoError(t, l.SetRate(ctx, ratelimiter.Config{Rate: restartRate, Interval: restartInterval}))

	start := burst(t, ctx, l, func() {
		// The replica has the first 5 grants, then is promoted: it never
		// gets the other 15.
		acked, err := rdb.Do(ctx, "WAIT", 1, 2000).Int()
		require.NoError(t, err)
		require.Equal(t, 1, acked, "the replica did not acknowledge the first grants")
		require.NoError(t, rep.ReplicaOf(ctx, "NO", "ONE").Err())
	})
	master.Store(replica.Addr())
	require.NoError(t, primary.Close())
	granted, errs := grantsUntil(t, ctx, l, start.Add(restartInterval))
	t.Logf("%d granted and %d errors on the promoted replica before the window ended", granted, errs)
	require.Zero(t, granted, "a replica promoted after 5 of 20 grants must not grant the other 15 again")
}
