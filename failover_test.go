package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
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

func runFailover(t *testing.T, setup failoverSetup, opts ...ratelimiter.Option) failoverResult {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	seqBase := time.Now().UnixMilli()
	var seq atomic.Int64
	// The count limiter: a rate nobody reaches and an interval nothing
	// leaves, so every grant stays as one record.
	admin := ratelimiter.NewClient(setup.rdb, opts...)
	count := admin.Limiter("{fo}:count")
	_, err := count.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 1 << 40, Interval: 24 * time.Hour})
	require.NoError(t, err)
	limitCfg := func(m ratelimiter.Mode) ratelimiter.Config {
		return ratelimiter.Config{Mode: m, Rate: foLimitRate, Interval: foLimitInterval}
	}
	_, err = admin.Limiter("{fo}:overall").TrySetRate(ctx, limitCfg(ratelimiter.Overall))
	require.NoError(t, err)
	_, err = admin.Limiter("{fo}:perclient").TrySetRate(ctx, limitCfg(ratelimiter.PerClient))
	require.NoError(t, err)
	_, err = admin.Limiter("{fo}:try").TrySetRate(ctx, limitCfg(ratelimiter.Overall))
	require.NoError(t, err)

	type worker struct {
		kind string
		run  func(ctx context.Context) callRec
	}
	newCountWorker := func() worker {
		clk := &seqClock{}
		lim := ratelimiter.NewClient(setup.rdb, append(slices.Clone(opts), ratelimiter.WithClock(clk.now))...).Limiter("{fo}:count")
		return worker{"count", func(ctx context.Context) callRec {
			s := seqBase + seq.Add(1)
			clk.ms.Store(s)
			cctx, cancel := context.WithTimeout(ctx, foTryDeadline)
			defer cancel()
			r := callRec{kind: "count", start: time.Now(), deadline: foTryDeadline, seq: s}
			r.granted, r.err = lim.TryAcquire(cctx, 1)
			r.end = time.Now()
			// About a thousand calls a second per worker: plenty of grants in
			// flight at the kill, and CPU left for the servers (2 cores).
			time.Sleep(time.Millisecond)
			return r
		}}
	}
	perClient := ratelimiter.NewClient(setup.rdb, opts...) // one client: one PER_CLIENT budget
	newAcquireWorker := func(name string) worker {
		lim := ratelimiter.NewClient(setup.rdb, opts...).Limiter(name)
		if name == "{fo}:perclient" {
			lim = perClient.Limiter(name)
		}
		return worker{"acquire", func(ctx context.Context) callRec {
			cctx, cancel := context.WithTimeout(ctx, foAcquireDeadline)
			defer cancel()
			r := callRec{kind: "acquire", start: time.Now(), deadline: foAcquireDeadline}
			r.err = lim.Acquire(cctx, 1)
			r.granted = r.err == nil || isAckOnly(r.err)
			r.end = time.Now()
			return r
		}}
	}
	newTryWorker := func(name string) worker {
		lim := ratelimiter.NewClient(setup.rdb, opts...).Limiter(name)
		if name == "{fo}:perclient" {
			lim = perClient.Limiter(name)
		}
		return worker{"try", func(ctx context.Context) callRec {
			cctx, cancel := context.WithTimeout(ctx, foTryDeadline)
			defer cancel()
			r := callRec{kind: "try", start: time.Now(), deadline: foTryDeadline}
			r.granted, r.err = lim.TryAcquire(cctx, 1)
			r.end = time.Now()
			if !r.granted && r.err == nil {
				// Not granted: wait a little, as a real caller would, instead
				// of spinning on the CPU the servers need.
				time.Sleep(2 * time.Millisecond)
			}
			return r
		}}
	}
	// Blocking Acquire and a polling TryAcquire do not share a limiter: the
	// poller would win most races against a waiter that sleeps until the
	// hint (Redisson's algorithm has no fairness), and starve it past its
	// deadline even without a failover.
	workers := []worker{
		newCountWorker(), newCountWorker(), newCountWorker(), // 0-2
		newAcquireWorker("{fo}:overall"), newAcquireWorker("{fo}:overall"), // 3-4
		newAcquireWorker("{fo}:perclient"), newAcquireWorker("{fo}:perclient"), // 5-6
		newTryWorker("{fo}:try"), // 7
	}

	var (
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		lastErrNs atomic.Int64
		panics    = make(chan string, len(workers))
		recs      = make([][]callRec, len(workers))
	)
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					panics <- fmt.Sprintf("%v\n%s", p, debug.Stack())
				}
			}()
			for n := 0; n < 1_000_000; n++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				r := w.run(ctx)
				if r.err != nil && !isAckOnly(r.err) {
					lastErrNs.Store(r.end.UnixNano())
				}
				recs[i] = append(recs[i], r)
				if r.err != nil {
					// Back off a little, as a real caller would; a tight loop
					// of instant failures would take the CPU the servers need
					// to fail over.
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}

	// The test process's own stalls: a ticker's largest gaps (scheduling
	// delays of this process under load, -race, GC).
	type stall struct {
		at  time.Time
		gap time.Duration
	}
	var (
		stallMu sync.Mutex
		stalls  []stall
	)
	stallDone := make(chan struct{})
	go func() {
		defer close(stallDone)
		prev := time.Now()
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tk.C:
				if gap := now.Sub(prev); gap > 50*time.Millisecond {
					stallMu.Lock()
					stalls = append(stalls, stall{at: prev, gap: gap})
					stallMu.Unlock()
				}
				prev = now
			}
		}
	}()

	// Phase 1: normal service. Phase 2: kill, then run until the errors
	// have stopped for foCleanStreak (or foHardStop).
	select {
	case <-time.After(foPreKill):
	case <-ctx.Done():
	}
	// The control client: plain SETs on the limiters' slot, no library.
	var controlLastErr atomic.Int64
	controlDone := make(chan struct{})
	go func() {
		defer close(controlDone)
		if setup.control == nil {
			return
		}
		for n := 0; n < 1_000_000; n++ {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, foTryDeadline)
			err := setup.control.Set(cctx, "{fo}:control", n, 0).Err()
			cancel()
			if err != nil {
				controlLastErr.Store(time.Now().UnixNano())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	killAt := time.Now()
	killErr := setup.kill(ctx)
	afterErr := make(chan error, 1)
	go func() {
		if setup.afterKill == nil || killErr != nil {
			afterErr <- nil
			return
		}
		afterErr <- setup.afterKill(ctx)
	}()
	for {
		now := time.Now()
		last := lastErrNs.Load()
		clean := func(last int64) bool { return last != 0 && now.Sub(time.Unix(0, last)) > foCleanStreak }
		if now.Sub(killAt) > foHardStop ||
			(now.Sub(killAt) > time.Second && clean(last) && (!setup.waitControl || clean(controlLastErr.Load()))) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	stoppedAt := time.Since(killAt)
	wg.Wait()
	<-controlDone
	<-stallDone
	for _, st := range stalls {
		t.Logf("test process stalled %v at kill%+v", st.gap.Round(time.Millisecond), st.at.Sub(killAt).Round(time.Millisecond))
	}
	require.NoError(t, killErr)
	require.NoError(t, <-afterErr)
	close(panics)
	for p := range panics {
		t.Errorf("worker panicked: %s", p)
	}

	res := failoverResult{killAt: killAt, stoppedAt: stoppedAt}
	if last := controlLastErr.Load(); last != 0 {
		res.controlWindow = time.Unix(0, last).Sub(killAt)
	}
	var all []callRec
	for _, rs := range recs {
		all = append(all, rs...)
	}
	res.calls = len(all)
	var lastErrEnd time.Time
	var preKillLat []time.Duration
	told := map[int64]callRec{} // count grants told to callers, by score
	failedSeq := map[int64]bool{}
	for _, r := range all {
		if late := r.end.Sub(r.start) - r.deadline; late > foDeadlineSlack {
			msg := fmt.Sprintf("%s call at kill%+v took %v (deadline %v): %v",
				r.kind, r.start.Sub(killAt).Round(time.Millisecond), r.end.Sub(r.start).Round(time.Millisecond), r.deadline, r.err)
			// A call is not late when this process was not running: a stall
			// of the test process inside the call that covers the lateness
			// excuses it (seen under -race on 2 cores: 0.4-0.5 s stalls).
			excused := false
			for _, st := range stalls {
				if st.at.Before(r.end) && st.at.Add(st.gap).After(r.start) && st.gap+foDeadlineSlack >= late {
					excused = true
				}
			}
			if excused {
				res.excusedLate = append(res.excusedLate, msg)
			} else {
				res.lateCalls = append(res.lateCalls, msg)
			}
		}
		if r.kind == "count" && r.end.Before(killAt) {
			preKillLat = append(preKillLat, r.end.Sub(r.start))
		}
		switch {
		case isAckOnly(r.err):
			res.ackOnly++
			if d := r.end.Sub(killAt); d > res.ackWindow {
				res.ackWindow = d
			}
		case r.err != nil:
			res.errs++
			if r.end.After(lastErrEnd) {
				lastErrEnd = r.end
			}
			if r.end.Before(killAt) || r.start.After(killAt.Add(foRecoverWithin)) {
				res.errsOutside = append(res.errsOutside, fmt.Sprintf("%s call at kill%+v: %v",
					r.kind, r.start.Sub(killAt).Round(time.Millisecond), r.err))
			}
		}
		if r.kind == "count" {
			if r.granted && r.err == nil {
				told[r.seq] = r
			} else if r.err != nil {
				failedSeq[r.seq] = true
			}
		}
		if r.err == nil && r.end.After(killAt) && (res.firstOK == 0 || r.end.Sub(killAt) < res.firstOK) && r.start.After(killAt) {
			res.firstOK = r.end.Sub(killAt)
		}
	}
	if !lastErrEnd.IsZero() {
		res.window = lastErrEnd.Sub(killAt)
	}
	res.granted = len(told)
	sort.Slice(preKillLat, func(i, j int) bool { return preKillLat[i] < preKillLat[j] })
	if n := len(preKillLat); n > 0 {
		res.p50 = preKillLat[n/2]
		res.p99 = preKillLat[n*99/100]
	}

	// Which grants survived on the promoted master?
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	nm, err := setup.promoted(pctx)
	require.NoError(t, err)
	defer nm.Close()
	zs, err := nm.ZRangeWithScores(ctx, count.Keys().Permits, 0, -1).Result()
	require.NoError(t, err)
	present := map[int64]bool{}
	for _, z := range zs {
		present[int64(z.Score)] = true
	}
	for s := range told {
		if !present[s] {
			res.lost++
		}
	}
	for s := range present {
		if failedSeq[s] {
			res.phantom++
		}
	}

	// The limit holds after the failover: in every window of one interval
	// (less 1 ms) after service came back, the calls that started and ended
	// inside the window were granted at most the rate. Their records'
	// scores (epoch milliseconds, rounded down) then differ by less than
	// the interval, so a correct limiter cannot have granted more. (With
	// the full interval, two calls 99.1 ms apart can get scores 100 ms
	// apart, and the older record has rightly expired.)
	win := foLimitInterval - time.Millisecond
	from := killAt.Add(res.window).Add(foLimitInterval)
	checkWindows := func(label string, pick func(i int) bool) int {
		var grants []callRec
		for i, rs := range recs {
			if !pick(i) {
				continue
			}
			for _, r := range rs {
				if r.granted && r.start.After(from) {
					grants = append(grants, r)
				}
			}
		}
		for a := from; a.Before(killAt.Add(foHardStop)); a = a.Add(5 * time.Millisecond) {
			n := 0
			for _, r := range grants {
				if !r.start.Before(a) && r.end.Before(a.Add(win)) {
					n++
				}
			}
			if n > foLimitRate {
				var detail []string
				for _, r := range grants {
					if !r.start.Before(a) && r.end.Before(a.Add(win)) {
						detail = append(detail, fmt.Sprintf("[%v..%v %v]", r.start.Sub(killAt).Round(time.Millisecond), r.end.Sub(killAt).Round(time.Millisecond), r.err))
					}
				}
				res.limitViolation = append(res.limitViolation,
					fmt.Sprintf("%s: %d grants in the window at kill%+v: %v", label, n, a.Sub(killAt).Round(time.Millisecond), detail))
				break
			}
		}
		return len(grants)
	}
	for _, l := range []struct {
		name     string
		from, to int
	}{{"{fo}:overall", 3, 4}, {"{fo}:perclient", 5, 6}, {"{fo}:try", 7, 7}} {
		if n := checkWindows(l.name, func(i int) bool { return i >= l.from && i <= l.to }); n == 0 {
			res.noService = append(res.noService, l.name)
		}
	}
	return res
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

// quietRedisLog keeps go-redis from printing one line per failed dial to
// the dead master (thousands during a failover): it prints the first few
// to stderr, counts the rest, and puts back a logger like go-redis's
// default afterwards. go-redis's logger is global; the failover tests do
// not run in parallel with others.
func quietRedisLog(t *testing.T) {
	l := &countingLogger{}
	redis.SetLogger(l)
	t.Cleanup(func() {
		redis.SetLogger(stderrLogger{log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)})
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
