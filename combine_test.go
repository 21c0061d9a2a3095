package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// eventually polls cond every few ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in 10 s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pauseScripts holds every script call on the server for d (CLIENT PAUSE
// WRITE), so that a test can queue requests behind one in flight.
func pauseScripts(t *testing.T, rdb *redis.Client, d time.Duration) {
	t.Helper()
	require.NoError(t, rdb.Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "WRITE").Err())
}

// TestCombiningBatchOrder: requests that arrive while a call is in flight
// go together in the next call and are decided in arrival order, each with
// its own outcome, hint and error.
func TestCombiningBatchOrder(t *testing.T) {
	ctx := context.Background()
	var seen decisions
	l, rdb, _ := setup(t, ratelimiter.Config{Rate: 8, Interval: time.Hour}, seen.hooks())
	pauseScripts(t, rdb, 300*time.Millisecond)

	results := make([]ratelimiter.Result, 5)
	errs := make([]error, 5)
	var wg sync.WaitGroup
	ask := func(i int, n int64, queued int) {
		wg.Add(1)
		go func() { defer wg.Done(); results[i], errs[i] = l.Allow(ctx, n) }()
		eventually(t, "request queued", func() bool { return ratelimiter.Pending(l) == queued })
	}
	wg.Add(1)
	go func() { defer wg.Done(); results[0], errs[0] = l.Allow(ctx, 1) }() // in flight, paused
	time.Sleep(20 * time.Millisecond)                                      // lets it reach Redis; the queueing below is what the test checks
	ask(1, 3, 1)
	ask(2, 5, 2)
	ask(3, 9, 3) // over the rate: an error for this request only
	ask(4, 2, 4)
	wg.Wait()

	require.NoError(t, errs[0])
	require.True(t, results[0].Granted)
	require.NoError(t, errs[1])
	require.True(t, results[1].Granted)
	require.Equal(t, int64(4), results[1].Remaining)
	require.NoError(t, errs[2])
	require.False(t, results[2].Granted, "5 asked, 4 left")
	require.Equal(t, int64(4), results[2].Remaining)
	require.Greater(t, results[2].RetryAfter, 59*time.Minute)
	require.ErrorIs(t, errs[3], ratelimiter.ErrPermitsExceedRate)
	require.NoError(t, errs[4])
	require.True(t, results[4].Granted, "a later smaller request is decided on its own")
	require.Equal(t, int64(2), results[4].Remaining)
	require.Equal(t, "2", rdb.Get(ctx, l.Keys().Value).Val())
	require.Equal(t, int64(6), recordPermits(t, rdb, l.Keys().Permits))
	require.Equal(t, int64(2), rdb.ZCard(ctx, l.Keys().Permits).Val(), "one record per script call")

	batches := map[int]int{}
	for _, d := range seen.list() {
		batches[d.Batch]++
	}
	require.Equal(t, map[int]int{1: 1, 4: 4}, batches, "one call alone, then one call for the four queued")
}

// TestCombiningCancelQueued: a queued request whose context ends leaves at
// once, without a Redis call; one whose context ends while its call is in
// flight returns at once, and the permits granted to it are given back.
func TestCombiningCancelQueued(t *testing.T) {
	ctx := context.Background()
	var seen decisions
	rdb := newRedis(t)
	c := ratelimiter.NewClient(rdb, seen.hooks())
	l := c.Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Hour})
	require.NoError(t, err)
	pauseScripts(t, rdb, 400*time.Millisecond)

	flyCtx, flyCancel := context.WithCancel(ctx)
	flyDone := make(chan error, 1)
	go func() { _, err := l.TryAcquire(flyCtx, 2); flyDone <- err }()
	time.Sleep(20 * time.Millisecond)

	qCtx, qCancel := context.WithCancel(ctx)
	qDone := make(chan error, 1)
	go func() { _, err := l.TryAcquire(qCtx, 1); qDone <- err }()
	eventually(t, "queued", func() bool { return ratelimiter.Pending(l) == 1 })
	qCancel()
	require.ErrorIs(t, <-qDone, context.Canceled)
	require.Zero(t, ratelimiter.Pending(l), "left the queue")

	flyCancel()
	require.ErrorIs(t, <-flyDone, context.Canceled)
	// The paused call still runs and grants 2; they are given back.
	eventually(t, "grant given back", func() bool {
		return rdb.Get(ctx, l.Keys().Value).Val() == "5" && rdb.Exists(ctx, l.Keys().Permits).Val() == 0
	})
	for _, d := range seen.list() {
		require.LessOrEqual(t, d.Batch, 1, "the canceled request was never sent")
	}
	eventually(t, "lane dropped", func() bool { return ratelimiter.Lanes(c) == 0 })
}

// TestCombiningLimitHoldsAcrossClients: three Clients, each with many
// goroutines, on one limiter: every record ever written (sampled while the
// test runs) fits the limit in every sliding window of the interval less
// stampSlack. The slack is the protocol's: each client stamps a record with
// its clock reading taken before its script runs, so a call that read the
// clock first may run second, and its record lands up to that gap inside
// a window the other call already closed (Redisson alone shows the same,
// compat's mixed load).
func TestCombiningLimitHoldsAcrossClients(t *testing.T) {
	ctx := context.Background()
	const rate, interval = 20, time.Second
	name := uniqueName(t)
	var clients []*ratelimiter.Limiter
	for i := 0; i < 3; i++ {
		c := ratelimiter.NewClient(newRedis(t))
		clients = append(clients, c.Limiter(name))
	}
	_, err := clients[0].TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(t, err)

	stop := make(chan struct{})
	records := sampleRecords(t, newRedis(t), clients[0].Keys().Permits, interval, stop)
	stalls := watchStalls()
	var granted atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(2500 * time.Millisecond)
	for _, l := range clients {
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					var ok bool
					var err error
					if g%2 == 0 {
						ok, err = l.TryAcquire(ctx, 1+int64(g%3))
					} else {
						cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
						err = l.Acquire(cctx, 1)
						cancel()
						ok = err == nil
						if err != nil && ctx.Err() == nil {
							err = nil
						}
					}
					require.NoError(t, err)
					if ok {
						granted.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(stop)
	recs := <-records
	require.NotEmpty(t, recs)
	checkWindows(t, recs, rate, interval-stampWindowSlack(t, stalls()))
	require.Greater(t, granted.Load(), int64(rate), "the run granted more than one window's worth")
}

// stampSlack is how much shorter than the interval the windows are that
// tests with several Clients check (see TestCombiningLimitHoldsAcrossClients):
// the longest a caller may be held between its clock reading and its script
// on a loaded 2-core machine under -race (100 ms was exceeded once at a
// load average of 10).
const stampSlack = 300 * time.Millisecond

// stampWindowSlack is stampSlack plus the longest stall of this process
// during the run (logged): a caller held that long between reading its
// clock and its script running stamps its record that much early, which
// is the real-time gap issue 21 is about, not a fault of the code under
// test. A check with it no longer catches overshoots at window edges
// within the stall; at most 3/4 of the interval is taken off.
func stampWindowSlack(t *testing.T, stall time.Duration) time.Duration {
	slack := min(stampSlack+stall, time.Second*3/4)
	t.Logf("windows checked at the interval less %v (the protocol's %v and this process's longest stall %v)", slack, stampSlack, stall)
	return slack
}

// record is one permit record seen in Redis.
type record struct {
	at      int64 // score, ms
	permits int64
}

// sampleRecords collects every record of key it sees, sampling every 5 ms
// until stop, for a limiter of the given interval. A record that vanished
// before its interval had passed (by the first sample that missed it) was
// released (a caller that had gone gives its grant back, Release rewrites
// or removes the newest records): its permits came back, so it is left
// out, else a window would count them twice.
func sampleRecords(t *testing.T, rdb *redis.Client, key string, interval time.Duration, stop <-chan struct{}) <-chan []record {
	out := make(chan []record, 1)
	go func() {
		seen := map[string]record{}
		released := map[string]bool{}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for done := false; !done; {
			select {
			case <-stop:
				done = true
			case <-tick.C:
			}
			at := time.Now().UnixMilli()
			now := map[string]bool{}
			for _, z := range rdb.ZRangeWithScores(context.Background(), key, 0, -1).Val() {
				member := z.Member.(string)
				m := grantKey(member, int64(z.Score))
				now[m] = true
				seen[m] = record{at: int64(z.Score), permits: int64(binary.LittleEndian.Uint32([]byte(member[len(member)-4:])))}
			}
			for m, r := range seen {
				if !now[m] && !released[m] && at < r.at+interval.Milliseconds() {
					released[m] = true
				}
			}
		}
		recs := make([]record, 0, len(seen))
		for m, r := range seen {
			if !released[m] {
				recs = append(recs, r)
			}
		}
		out <- recs
	}()
	return out
}

// checkWindows fails when the records in any window (t - interval, t] hold
// more than rate permits.
func checkWindows(t *testing.T, recs []record, rate int64, interval time.Duration) {
	t.Helper()
	for _, end := range recs {
		var sum int64
		for _, r := range recs {
			if r.at > end.at-interval.Milliseconds() && r.at <= end.at {
				sum += r.permits
			}
		}
		require.LessOrEqual(t, sum, rate, "window ending at %d holds %d permits", end.at, sum)
	}
}

// TestWaitersOneCallPerWake: 100 goroutines blocked in Acquire on one
// limiter wait in one queue: far fewer script calls than grants (every
// waiter woken by its own timer makes one call per waiter per wake), the
// limit holds, and no goroutine or lane is left behind.
func TestWaitersOneCallPerWake(t *testing.T) {
	ctx := context.Background()
	const rate, interval = 10, 200 * time.Millisecond
	srv := ownServer(t) // the test counts the server's script calls
	rdb := redistest.Client(t, srv.Addr())
	c := ratelimiter.NewClient(rdb)
	l := c.Limiter(uniqueName(t))
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(t, err)
	stop := make(chan struct{})
	records := sampleRecords(t, redistest.Client(t, srv.Addr()), l.Keys().Permits, interval, stop)
	calls := redistest.ScriptCalls(t, rdb)

	var granted atomic.Int64
	var wg sync.WaitGroup
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for g := 0; g < 100; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.Acquire(runCtx, 1) == nil {
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	made := redistest.ScriptCalls(t, rdb) - calls
	checkWindows(t, <-records, rate, interval)
	t.Logf("%d grants, %d script calls: %.2f calls per grant", granted.Load(), made, float64(made)/float64(granted.Load()))
	require.GreaterOrEqual(t, granted.Load(), int64(rate*5), "two seconds of a 50/s limiter")
	require.LessOrEqual(t, float64(made)/float64(granted.Load()), 1.2)
	eventually(t, "lane dropped", func() bool { return ratelimiter.Lanes(c) == 0 })
}
