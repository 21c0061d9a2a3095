package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// The failover tests kill (SIGKILL) the master that holds a few limiters
// while goroutines use them, and measure what the issue asks for:
//   - no panic, and every call returns by its deadline (+50 ms);
//   - errors only in the failover window, and normal service again within
//     5 s of the kill (cluster-node-timeout 1 s; Sentinel down-after 1 s);
//   - the limit still holds afterwards;
//   - how many acquisitions acknowledged to callers were lost with the
//     crash (asynchronous replication), with and without WithReplicaAck,
//     and the latency of an acquisition with and without it.
//
// Deployments: a 3+3 cluster (TestFailoverCluster; the ack run restarts
// the crashed node once a replica took over, so that the shard has a
// replica to acknowledge again), a Sentinel group through FailoverClient
// and NewFailoverClusterClient (TestFailoverSentinel), and a Sentinel group
// whose replicas are 300 ms behind at the crash
// (TestFailoverSentinelLaggingReplicas). Every run also drives a control
// client without the library, to show what go-redis does on its own. A
// call that ends late while the test process itself was not scheduled (a
// stall the ticker goroutine measures, seen under -race on 2 cores) is
// logged, not counted. Numbers are printed with t.Log
// (go test -v -run Failover).

const (
	foTryDeadline     = 300 * time.Millisecond // ctx deadline of each TryAcquire
	foAcquireDeadline = 500 * time.Millisecond // ctx deadline of each blocking Acquire
	foDeadlineSlack   = 50 * time.Millisecond  // a call may return this late
	foRecoverWithin   = 5 * time.Second        // service must be normal again by kill+this
	foPreKill         = 1500 * time.Millisecond
	foCleanStreak     = 1500 * time.Millisecond // errors must have stopped this long before we stop
	foHardStop        = 8 * time.Second         // stop the workers at kill+this whatever happens
	foLimitRate       = 5                       // permits per foLimitInterval on the limit limiters
	foLimitInterval   = 100 * time.Millisecond
)

// The clients are made with ContextTimeoutEnabled: without it go-redis does
// not apply a context's deadline to socket reads, and a call waits for a
// stalled server until ReadTimeout (3 s by default). Measured here: during
// the full resync of a restarted replica, acquisitions blocked in WAIT
// returned 190 ms after their deadline. (Clients in the cluster_test and
// sentinel_test files keep go-redis's defaults.)

// failoverSetup is one kind of deployment under test.
type failoverSetup struct {
	rdb redis.UniversalClient
	// switches, for Sentinel, starts counting failovers and returns a
	// function that stops and returns the count.
	switches func(ctx context.Context) func() int
	// kill crashes the master that holds the "{fo}" limiters.
	kill func(ctx context.Context) error
	// afterKill, if set, runs right after the kill, beside the workers (for
	// example to restart the crashed node once a replica took over).
	afterKill func(ctx context.Context) error
	// promoted waits until the failover is complete and returns a client on
	// the new master of the "{fo}" limiters.
	promoted func(ctx context.Context) (*redis.Client, error)
	// control is a second client of the same kind that the library never
	// uses: how long it takes to recover on its own is printed for
	// comparison.
	control redis.UniversalClient
	// waitControl keeps the workers going until the control client has
	// recovered too (or foHardStop), to measure how long it takes.
	waitControl bool
}

// callRec is one call made by a worker.
type callRec struct {
	kind       string // count, acquire, try
	start, end time.Time
	deadline   time.Duration
	granted    bool
	err        error
	seq        int64 // count calls: the score stamped on the permit record
}

// isAckOnly reports an error that only says the replicas did not
// acknowledge a grant in time (see WithReplicaAck): service, not outage.
func isAckOnly(err error) bool { return err != nil && errors.Is(err, ratelimiter.ErrReplicaAck) }

// seqClock makes a client stamp each acquisition with a score that the
// worker chose, so that the permit records on the promoted replica can be
// matched, one by one, against the grants the callers were told about.
type seqClock struct{ ms atomic.Int64 }

func (c *seqClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

type failoverResult struct {
	killAt         time.Time
	stoppedAt      time.Duration // kill -> workers stopped
	window         time.Duration // kill -> end of the last failed call
	ackWindow      time.Duration // kill -> end of the last call failed with ErrReplicaAck
	controlWindow  time.Duration // kill -> end of the control client's last failed SET (0: none failed)
	firstOK        time.Duration // kill -> end of the first successful call after the kill
	errs           int           // calls that failed (outage)
	ackOnly        int           // grants reported with ErrReplicaAck
	granted        int           // count grants told to callers (true, nil)
	lost           int           // of those, missing on the promoted master
	phantom        int           // records on the promoted master for calls that reported an error (ErrReplicaAck included)
	p50, p99       time.Duration // count TryAcquire latency before the kill
	calls          int
	lateCalls      []string
	excusedLate    []string // late, but the test process itself was stalled meanwhile
	errsOutside    []string
	limitViolation []string
	noService      []string // limiters without a grant after the failover
}

// assert logs the measurement and asserts what must hold. ack is whether
// the clients were made with WithReplicaAck.
func (res failoverResult) assert(t *testing.T, label string, ack bool) {
	t.Helper()
	t.Logf("%s: %d calls; failover window (kill -> end of the last failed call) %v; first success after the kill at %v; %d failed calls",
		label, res.calls, res.window.Round(time.Millisecond), res.firstOK.Round(time.Millisecond), res.errs)
	if ack {
		t.Logf("%s: %d acquisitions failed with ErrReplicaAck, the last at kill+%v", label, res.ackOnly, res.ackWindow.Round(time.Millisecond))
	}
	t.Logf("%s: count grants told to callers %d; lost on the promoted master %d; records there of calls that failed %d",
		label, res.granted, res.lost, res.phantom)
	t.Logf("%s: TryAcquire latency before the kill (8 goroutines): p50 %v p99 %v",
		label, res.p50.Round(time.Microsecond), res.p99.Round(time.Microsecond))
	if res.controlWindow > 0 {
		t.Logf("%s: control client without the library (SET on the same slot): last failed at kill+%v; the workers stopped at kill+%v",
			label, res.controlWindow.Round(time.Millisecond), res.stoppedAt.Round(time.Millisecond))
	}
	if len(res.excusedLate) > 0 {
		t.Logf("%s: %d calls late while the test process itself was stalled (not counted): %v", label, len(res.excusedLate), res.excusedLate)
	}
	require.Emptyf(t, res.lateCalls, "%d calls returned more than %v after their deadline", len(res.lateCalls), foDeadlineSlack)
	require.Emptyf(t, res.errsOutside, "errors outside the failover window [kill, kill+%v]", foRecoverWithin)
	require.LessOrEqualf(t, res.window, foRecoverWithin, "service not normal within %v of the kill", foRecoverWithin)
	require.Emptyf(t, res.limitViolation, "the limit did not hold after the failover")
	require.Emptyf(t, res.noService, "limiters without a grant after the failover")
	if ack {
		// Every grant told to a caller was on a replica before the caller
		// heard of it, and the promoted replica is the most up to date one.
		require.Zero(t, res.lost, "a grant acknowledged by the replicas was lost")
		require.LessOrEqualf(t, res.ackWindow, foRecoverWithin+time.Second, "replica acknowledgements did not come back")
	}
}

// clusterFailoverSetup starts a cluster whose master of "{fo}" will be
// killed. With restart, a supervisor-like restart brings the crashed node
// back once a replica has taken over, so that the shard has a replica again
// (WithReplicaAck needs one); the node comes back on its old address as a
// replica and answers MOVED there, which is enough for any client to
// recover. Without restart nothing answers on the old address, and only the
// library's topology refresh gets the client going again.
func clusterFailoverSetup(t *testing.T, ctx context.Context, restart bool) failoverSetup {
	c := redistest.StartCluster(ctx, t)
	newClient := func() *redis.ClusterClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	owner, err := c.MasterForKey(ctx, "{fo}")
	require.NoError(t, err)
	var afterKill func(ctx context.Context) error
	if restart {
		afterKill = func(ctx context.Context) error {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := c.WaitHealthy(wctx); err != nil {
				return err
			}
			_, err := c.Restart(wctx, owner)
			return err
		}
	}
	return failoverSetup{
		rdb:         newClient(),
		control:     newClient(),
		waitControl: !restart,
		kill:        func(context.Context) error { return c.Kill(owner) },
		afterKill:   afterKill,
		promoted: func(ctx context.Context) (*redis.Client, error) {
			if err := c.WaitHealthy(ctx); err != nil {
				return nil, err
			}
			m, err := c.MasterForKey(ctx, "{fo}")
			if err != nil {
				return nil, err
			}
			if m.Addr == owner.Addr {
				return nil, fmt.Errorf("slot of {fo} still on the killed master %s", owner.Addr)
			}
			return redis.NewClient(&redis.Options{Addr: m.Addr}), nil
		},
	}
}

// sentinelFailoverSetup starts a Sentinel setup whose master will be
// killed. The library gets a redis.FailoverClient, or with clusterClient a
// redis.NewFailoverClusterClient (a ClusterClient over the Sentinel group).
func sentinelFailoverSetup(t *testing.T, ctx context.Context, clusterClient bool) failoverSetup {
	s := redistest.StartSentinel(ctx, t)
	opt := func() *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true}
	}
	newClient := func() redis.UniversalClient {
		var rdb redis.UniversalClient = redis.NewFailoverClient(opt())
		if clusterClient {
			rdb = redis.NewFailoverClusterClient(opt())
		}
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	master, err := s.Master(ctx)
	require.NoError(t, err)
	return failoverSetup{
		rdb:      newClient(),
		control:  newClient(),
		switches: sentinelSwitches(t, s.SentinelAddrs()),
		kill:     func(context.Context) error { return s.Kill(master) },
		promoted: func(ctx context.Context) (*redis.Client, error) {
			m, err := s.WaitFailover(ctx, master)
			if err != nil {
				return nil, err
			}
			return redis.NewClient(&redis.Options{Addr: m.Addr}), nil
		},
	}
}

// foLag is how long, in the lagging-replica runs, the replication stream is
// held back before the master is killed: the state of a master whose
// replicas are behind (slow network, busy replica) or whose machine dies
// with unsent data. Not a wait for a condition: it is the condition.
const foLag = 300 * time.Millisecond

// laggingSentinelSetup is sentinelFailoverSetup with the master behind the
// harness's proxy: "kill" first holds back the replication stream for
// foLag, then kills the master and drops what was held back.
func laggingSentinelSetup(t *testing.T, ctx context.Context) failoverSetup {
	s := redistest.StartSentinelBehindProxy(ctx, t)
	newClient := func() *redis.Client {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	master, err := s.Master(ctx)
	require.NoError(t, err)
	return failoverSetup{
		rdb:      newClient(),
		control:  newClient(),
		switches: sentinelSwitches(t, s.SentinelAddrs()),
		kill: func(ctx context.Context) error {
			if err := s.FreezeReplication(); err != nil {
				return err
			}
			select {
			case <-time.After(foLag):
			case <-ctx.Done():
				return ctx.Err()
			}
			t.Logf("replication held back for %v: %d bytes, then the master is killed", foLag, s.HeldBackBytes())
			return s.Kill(master)
		},
		promoted: func(ctx context.Context) (*redis.Client, error) {
			m, err := s.WaitFailover(ctx, master)
			if err != nil {
				return nil, err
			}
			return redis.NewClient(&redis.Options{Addr: m.Addr}), nil
		},
	}
}

// foAck is the replica acknowledgement the "ack" runs ask for: one replica
// (each cluster master has one; Sentinel promotes the most up-to-date of
// the two).
var foAck = ratelimiter.WithReplicaAck(1, 100*time.Millisecond)

func TestFailoverCluster(t *testing.T) {
	quietRedisLog(t)
	for _, ack := range []bool{false, true} {
		name, opts := "async", []ratelimiter.Option(nil)
		if ack {
			name, opts = "replica-ack", []ratelimiter.Option{foAck}
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := runFailover(t, clusterFailoverSetup(t, ctx, ack), opts...)
			res.assert(t, "cluster/"+name, ack)
		})
	}
}

func TestFailoverSentinel(t *testing.T) {
	quietRedisLog(t)
	for _, ack := range []bool{false, true} {
		name, opts := "async", []ratelimiter.Option(nil)
		if ack {
			name, opts = "replica-ack", []ratelimiter.Option{foAck}
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := runSentinelFailover(t, ctx, func() failoverSetup { return sentinelFailoverSetup(t, ctx, false) }, opts...)
			res.assert(t, "sentinel/"+name, ack)
		})
	}
	t.Run("failover-cluster-client", func(t *testing.T) {
		// redis.NewFailoverClusterClient: a ClusterClient whose slot map
		// comes from the sentinels, so it gets the library's reloads.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res := runSentinelFailover(t, ctx, func() failoverSetup { return sentinelFailoverSetup(t, ctx, true) })
		res.assert(t, "sentinel/failover-cluster-client", false)
	})
}

// TestFailoverSentinelLaggingReplicas measures what asynchronous
// replication costs when the replicas are behind at the crash, and that
// WithReplicaAck prevents it: without it, the grants of the last foLag are
// lost and granted again by the promoted replica; with it, no grant that a
// caller was told about is lost (the calls during the lag fail with
// ErrReplicaAck instead). The failover window here is counted from the
// start of the lag, foLag before the kill.
func TestFailoverSentinelLaggingReplicas(t *testing.T) {
	quietRedisLog(t)
	for _, ack := range []bool{false, true} {
		name, opts := "async", []ratelimiter.Option(nil)
		if ack {
			name, opts = "replica-ack", []ratelimiter.Option{foAck}
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := runSentinelFailover(t, ctx, func() failoverSetup { return laggingSentinelSetup(t, ctx) }, opts...)
			res.assert(t, "sentinel-lagging/"+name, ack)
			if !ack {
				// The setup must show the risk, or the ack run proves nothing.
				require.Positive(t, res.lost, "no grant lost although the replicas were %v behind", foLag)
			}
		})
	}
}

// redisLog is go-redis's logger for this package's tests, set once in
// TestMain: redis.SetLogger writes a global that the background
// goroutines of earlier tests' Clients (a clock check) may still read,
// a data race, so tests switch where it writes instead.
var redisLog = &switchLogger{def: stderrLogger{log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)}}

type switchLogger struct {
	def stderrLogger
	to  atomic.Pointer[countingLogger]
}

func (s *switchLogger) Printf(ctx context.Context, format string, v ...interface{}) {
	if c := s.to.Load(); c != nil {
		c.Printf(ctx, format, v...)
		return
	}
	s.def.Printf(ctx, format, v...)
}

// quietRedisLog keeps go-redis from printing one line per failed dial to
// the dead master (thousands during a failover): it prints the first few
// to stderr, counts the rest, and writes as go-redis's default does
// afterwards. The failover tests do not run in parallel with others.
func quietRedisLog(t *testing.T) {
	l := &countingLogger{}
	redisLog.to.Store(l)
	t.Cleanup(func() {
		redisLog.to.Store(nil)
		if n := l.n.Load(); n > 5 {
			t.Logf("go-redis logged %d lines during the failover (first 5 on stderr)", n)
		}
	})
}

type countingLogger struct{ n atomic.Int64 }

func (l *countingLogger) Printf(_ context.Context, format string, v ...interface{}) {
	if l.n.Add(1) <= 5 {
		fmt.Fprintf(os.Stderr, "redis: "+format+"\n", v...)
	}
}

type stderrLogger struct{ l *log.Logger }

func (s stderrLogger) Printf(_ context.Context, format string, v ...interface{}) {
	_ = s.l.Output(2, fmt.Sprintf(format, v...))
}

// runSentinelFailover runs a Sentinel failover scenario, and once more on a
// fresh deployment if the sentinels failed over more than once. The
// scenario and its assertions assume one failover; on a loaded 2-core
// machine a stall of the newly promoted master can make the sentinels see
// it down too and fail over again to a replica that had not caught up
// (seen once in a CI-like run: two +switch-master, 1,489 grants lost).
// That is Sentinel doing its job on a stalled host, not the library.
func runSentinelFailover(t *testing.T, ctx context.Context, setup func() failoverSetup, opts ...ratelimiter.Option) failoverResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s := setup()
		switches := s.switches(ctx)
		res := runFailover(t, s, opts...)
		n := switches()
		if n <= 1 || attempt == 2 {
			return res
		}
		t.Logf("the sentinels failed over %d times in one run (a stalled host); running the scenario again", n)
	}
}

// sentinelSwitches returns a function that starts listening to a
// sentinel's +switch-master events and returns a function that stops and
// tells how many distinct new masters were announced.
func sentinelSwitches(t *testing.T, addrs []string) func(ctx context.Context) func() int {
	return func(ctx context.Context) func() int {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addrs[0]})
		sub := sc.Subscribe(ctx, "+switch-master")
		_, err := sub.Receive(ctx) // the subscription is in place
		require.NoError(t, err)
		seen := map[string]bool{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for m := range sub.Channel() {
				// "<name> <old ip> <old port> <new ip> <new port>"
				if f := strings.Fields(m.Payload); len(f) == 5 {
					seen[f[3]+":"+f[4]] = true
				}
			}
		}()
		return func() int {
			_ = sub.Close()
			<-done
			_ = sc.Close()
			return len(seen)
		}
	}
}
