package ratelimiter_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// runFailover runs one failover scenario on setup: normal service for
// foPreKill, then the kill, until the errors have stopped (see
// killAndRecover); it returns what the callers saw and what the promoted
// master holds.
func runFailover(t *testing.T, setup failoverSetup, opts ...ratelimiter.Option) failoverResult {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	fr := newFailoverRun(ctx, t, setup, opts)
	fr.startWorkers(ctx)
	go fr.stalls.watch(fr.stop)
	select {
	case <-time.After(foPreKill):
	case <-ctx.Done():
	}
	go fr.runControl(ctx)
	killErr, afterErr := fr.killAndRecover(ctx)
	fr.stopAll()

	for _, st := range fr.stalls.list {
		t.Logf("test process stalled %v at kill%+v", st.gap.Round(time.Millisecond), st.at.Sub(fr.killAt).Round(time.Millisecond))
	}
	require.NoError(t, killErr)
	require.NoError(t, afterErr)
	close(fr.panics)
	for p := range fr.panics {
		t.Errorf("worker panicked: %s", p)
	}

	res, counted := fr.tally()
	fr.countLost(ctx, &res, counted)
	fr.checkLimit(&res)
	return res
}

// failoverRun is one failover scenario in progress: the limiters, the
// workers and what they recorded, and the moments the checks need.
type failoverRun struct {
	t     *testing.T
	setup failoverSetup
	opts  []ratelimiter.Option

	counts    []*ratelimiter.Limiter // one per count worker: every grant stays as one record
	seqBase   int64                  // count records are scored seqBase+seq
	seq       atomic.Int64
	perClient *ratelimiter.Client // one client: one PER_CLIENT budget
	workers   []foWorker

	wg             sync.WaitGroup
	stop           chan struct{} // closed to stop the workers, the control client and the stall watch
	recs           [][]callRec   // what each worker recorded, by worker
	panics         chan string
	lastErrNs      atomic.Int64 // end of the last failed call (ErrReplicaAck not counted)
	controlLastErr atomic.Int64 // the control client's last failed SET
	controlDone    chan struct{}
	stalls         stallWatch

	killAt    time.Time
	stoppedAt time.Duration // kill -> workers stopped
}

// foWorker is the loop body of one worker goroutine: one call, recorded.
type foWorker struct {
	kind string
	run  func(ctx context.Context) callRec
}

// foLimited are the limiters whose limit checkLimit checks, with the
// workers (indexes into failoverRun.workers) that use each.
var foLimited = []struct {
	name     string
	from, to int
}{{"{fo}:overall", 3, 4}, {"{fo}:perclient", 5, 6}, {"{fo}:try", 7, 7}}

func newFailoverRun(ctx context.Context, t *testing.T, setup failoverSetup, opts []ratelimiter.Option) *failoverRun {
	fr := &failoverRun{
		t: t, setup: setup, opts: opts,
		seqBase:     time.Now().UnixMilli(),
		perClient:   ratelimiter.NewClient(setup.rdb, opts...),
		stop:        make(chan struct{}),
		controlDone: make(chan struct{}),
		stalls:      stallWatch{done: make(chan struct{})},
	}
	fr.configure(ctx)
	// Blocking Acquire and a polling TryAcquire do not share a limiter: the
	// poller would win most races against a waiter that sleeps until the
	// hint (Redisson's algorithm has no fairness), and starve it past its
	// deadline even without a failover.
	fr.workers = []foWorker{
		fr.countWorker(0), fr.countWorker(1), fr.countWorker(2), // 0-2
		fr.acquireWorker("{fo}:overall"), fr.acquireWorker("{fo}:overall"), // 3-4
		fr.acquireWorker("{fo}:perclient"), fr.acquireWorker("{fo}:perclient"), // 5-6
		fr.tryWorker("{fo}:try"), // 7
	}
	fr.recs = make([][]callRec, len(fr.workers))
	fr.panics = make(chan string, len(fr.workers))
	return fr
}

// configure sets up the limiters. The count limiter has a rate nobody
// reaches and an interval nothing leaves, so every grant stays as one
// record; the others have foLimitRate per foLimitInterval.
func (fr *failoverRun) configure(ctx context.Context) {
	admin := ratelimiter.NewClient(fr.setup.rdb, fr.opts...)
	fr.counts = nil
	for i := 0; i < foCountWorkers; i++ {
		l := admin.Limiter(fmt.Sprintf("{fo}:count:%d", i))
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 1 << 40, Interval: 24 * time.Hour})
		require.NoError(fr.t, err)
		fr.counts = append(fr.counts, l)
	}
	modes := map[string]ratelimiter.Mode{"{fo}:overall": ratelimiter.Overall, "{fo}:perclient": ratelimiter.PerClient, "{fo}:try": ratelimiter.Overall}
	for _, l := range foLimited {
		_, err := admin.Limiter(l.name).TrySetRate(ctx, ratelimiter.Config{Mode: modes[l.name], Rate: foLimitRate, Interval: foLimitInterval})
		require.NoError(fr.t, err)
	}
}

// foCountWorkers is the number of count workers, each on a count limiter
// of its own.
const foCountWorkers = 3

// countWorker calls TryAcquire on count limiter i through a client of
// its own whose clock stamps each record with the call's sequence number.
// A limiter per worker, whose calls follow one another: on the client's
// clock a grant is never stamped before the newest record, so a call that
// ran after a later-numbered one would take that one's number.
func (fr *failoverRun) countWorker(i int) foWorker {
	clk := &seqClock{}
	lim := ratelimiter.NewClient(fr.setup.rdb, append(slices.Clone(fr.opts), ratelimiter.WithClock(clk.now), ratelimiter.WithServerClock(false))...).Limiter(fmt.Sprintf("{fo}:count:%d", i))
	return foWorker{"count", func(ctx context.Context) callRec {
		s := fr.seqBase + fr.seq.Add(1)
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

// limiter returns name on a client of its own, or on the shared client
// for the PER_CLIENT limiter (one client, one budget).
func (fr *failoverRun) limiter(name string) *ratelimiter.Limiter {
	if name == "{fo}:perclient" {
		return fr.perClient.Limiter(name)
	}
	return ratelimiter.NewClient(fr.setup.rdb, fr.opts...).Limiter(name)
}

// acquireWorker calls the blocking Acquire with foAcquireDeadline.
func (fr *failoverRun) acquireWorker(name string) foWorker {
	lim := fr.limiter(name)
	return foWorker{"acquire", func(ctx context.Context) callRec {
		cctx, cancel := context.WithTimeout(ctx, foAcquireDeadline)
		defer cancel()
		r := callRec{kind: "acquire", start: time.Now(), deadline: foAcquireDeadline}
		r.err = lim.Acquire(cctx, 1)
		r.granted = r.err == nil || isAckOnly(r.err)
		r.end = time.Now()
		return r
	}}
}

// tryWorker polls with TryAcquire.
func (fr *failoverRun) tryWorker(name string) foWorker {
	lim := fr.limiter(name)
	return foWorker{"try", func(ctx context.Context) callRec {
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

// startWorkers runs every worker in a goroutine until stop is closed.
func (fr *failoverRun) startWorkers(ctx context.Context) {
	for i, w := range fr.workers {
		fr.wg.Add(1)
		go fr.work(ctx, i, w)
	}
}

// work is worker i's loop: it records each call, remembers when the last
// failure ended, and reports a panic instead of crashing the test binary.
func (fr *failoverRun) work(ctx context.Context, i int, w foWorker) {
	defer fr.wg.Done()
	defer func() {
		if p := recover(); p != nil {
			fr.panics <- fmt.Sprintf("%v\n%s", p, debug.Stack())
		}
	}()
	for n := 0; n < 1_000_000; n++ { // bounded; stop ends it long before
		select {
		case <-fr.stop:
			return
		default:
		}
		r := w.run(ctx)
		if r.err != nil && !isAckOnly(r.err) {
			fr.lastErrNs.Store(r.end.UnixNano())
		}
		fr.recs[i] = append(fr.recs[i], r)
		if r.err != nil {
			// Back off a little, as a real caller would; a tight loop of
			// instant failures would take the CPU the servers need to
			// fail over.
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// runControl makes plain SETs on the limiters' slot with the control
// client, no library, until stop, and remembers its last failure.
func (fr *failoverRun) runControl(ctx context.Context) {
	defer close(fr.controlDone)
	if fr.setup.control == nil {
		return
	}
	for n := 0; n < 1_000_000; n++ {
		select {
		case <-fr.stop:
			return
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, foTryDeadline)
		err := fr.setup.control.Set(cctx, "{fo}:control", n, 0).Err()
		cancel()
		if err != nil {
			fr.controlLastErr.Store(time.Now().UnixNano())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// killAndRecover kills the master, runs afterKill beside the workers, and
// returns once the errors have stopped for foCleanStreak (and, with
// waitControl, the control client's too), or at foHardStop. It returns the
// errors of kill and afterKill.
func (fr *failoverRun) killAndRecover(ctx context.Context) (killErr, afterErr error) {
	fr.killAt = time.Now()
	killErr = fr.setup.kill(ctx)
	after := make(chan error, 1)
	go func() {
		if fr.setup.afterKill == nil || killErr != nil {
			after <- nil
			return
		}
		after <- fr.setup.afterKill(ctx)
	}()
	for !fr.recovered(time.Now()) {
		time.Sleep(20 * time.Millisecond)
	}
	close(fr.stop)
	fr.stoppedAt = time.Since(fr.killAt)
	return killErr, <-after
}

// recovered reports whether the run may stop at now: foHardStop has
// passed, or more than a second after the kill the errors (with
// waitControl, the control client's too) have stopped for foCleanStreak.
func (fr *failoverRun) recovered(now time.Time) bool {
	clean := func(last int64) bool { return last != 0 && now.Sub(time.Unix(0, last)) > foCleanStreak }
	if now.Sub(fr.killAt) > foHardStop {
		return true
	}
	return now.Sub(fr.killAt) > time.Second && clean(fr.lastErrNs.Load()) &&
		(!fr.setup.waitControl || clean(fr.controlLastErr.Load()))
}

// stopAll waits for the workers, the control client and the stall watch
// to end after stop was closed.
func (fr *failoverRun) stopAll() {
	fr.wg.Wait()
	<-fr.controlDone
	<-fr.stalls.done
}

// stallWatch records the test process's own stalls: a ticker's gaps above
// 50 ms (scheduling delays of this process under load, -race, GC).
type stallWatch struct {
	mu   sync.Mutex
	list []stall
	done chan struct{} // closed when watch returns
}

type stall struct {
	at  time.Time
	gap time.Duration
}

// watch ticks every 5 ms until stop and records the gaps.
func (s *stallWatch) watch(stop <-chan struct{}) {
	defer close(s.done)
	prev := time.Now()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tk.C:
			if gap := now.Sub(prev); gap > 50*time.Millisecond {
				s.mu.Lock()
				s.list = append(s.list, stall{at: prev, gap: gap})
				s.mu.Unlock()
			}
			prev = now
		}
	}
}

// longest returns the longest stall recorded (0 if none).
func (s *stallWatch) longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m time.Duration
	for _, st := range s.list {
		m = max(m, st.gap)
	}
	return m
}

// watchStalls starts a stallWatch; the function it returns stops it and
// returns the longest stall.
func watchStalls() func() time.Duration {
	s := &stallWatch{done: make(chan struct{})}
	stop := make(chan struct{})
	go s.watch(stop)
	return func() time.Duration {
		close(stop)
		<-s.done
		return s.longest()
	}
}

// excuses reports whether a stall of the test process inside call r covers
// its lateness: then the call is not late, this process was not running
// (seen under -race on 2 cores: 0.4-0.5 s stalls).
func (s *stallWatch) excuses(r callRec, late time.Duration) bool {
	for _, st := range s.list {
		if st.at.Before(r.end) && st.at.Add(st.gap).After(r.start) && st.gap+foDeadlineSlack >= late {
			return true
		}
	}
	return false
}
