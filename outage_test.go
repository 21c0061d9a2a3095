package ratelimiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// Degraded mode (WithOutageFallback) against a real redis-server that is
// stopped under load and started again on its port.

const (
	outageRate     = 40
	outageInterval = time.Second
	outageReplicas = 2 // two Clients, each at half the rate: 20 per interval
	outageProbe    = 100 * time.Millisecond
	// outageBack bounds the time from the server answering PING again to
	// the end of the outage: one probe period, the probe's PING, and
	// scheduling on a loaded machine.
	outageBack = outageProbe + 200*time.Millisecond
	// outageFound bounds the time from the stop to the outage: the
	// calls' deadlines are at most 200 ms, and the first script call
	// unanswered by its deadline begins it (go-redis's retries hide the
	// refused dials for longer).
	outageFound = 500 * time.Millisecond
)

// outageCall is one acquisition of the load: when it was made and
// returned, the latest it may return (its timeout or context deadline),
// and the Decision its Client reported.
type outageCall struct {
	start, end, due time.Time
	d               ratelimiter.Decision
	err             error
}

// decisionKey carries a *ratelimiter.Decision that the DecisionContext
// hook fills, so that each call finds its own Decision.
type decisionKey struct{}

// outageClient is one process of the fleet: a Client with the fallback,
// what its calls and outages were.
type outageClient struct {
	l      *ratelimiter.Limiter
	c      *ratelimiter.Client
	mu     sync.Mutex
	calls  []outageCall
	events []ratelimiter.OutageEvent
	at     []time.Time // of events
}

func newOutageClient(t *testing.T, addr, name string) *outageClient {
	oc := &outageClient{}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	oc.c = ratelimiter.NewClient(rdb,
		ratelimiter.WithOutageFallback(ratelimiter.OutageFallback{Replicas: outageReplicas, Probe: outageProbe}),
		ratelimiter.WithHooks(ratelimiter.Hooks{
			DecisionContext: func(ctx context.Context, d ratelimiter.Decision) {
				if p, ok := ctx.Value(decisionKey{}).(*ratelimiter.Decision); ok {
					*p = d
				}
			},
			Outage: func(e ratelimiter.OutageEvent) {
				oc.mu.Lock()
				oc.events, oc.at = append(oc.events, e), append(oc.at, time.Now())
				oc.mu.Unlock()
			},
		}))
	t.Cleanup(func() { require.NoError(t, oc.c.Close(context.Background())) })
	oc.l = oc.c.Limiter(name)
	return oc
}

// run makes calls of kind op (0: Allow, 1: TryAcquireTimeout, 2: Acquire
// under a context deadline) until stop is closed.
func (oc *outageClient) run(op int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	const allowDeadline, timeout, acquireDeadline = 200 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond
	for {
		select {
		case <-stop:
			return
		default:
		}
		var call outageCall
		ctx := context.WithValue(context.Background(), decisionKey{}, &call.d)
		call.start = time.Now()
		switch op {
		case 0:
			ctx, cancel := context.WithTimeout(ctx, allowDeadline)
			call.due = call.start.Add(allowDeadline)
			var res ratelimiter.Result
			res, call.err = oc.l.Allow(ctx, 1)
			cancel()
			if call.err == nil && res.Degraded != call.d.Degraded {
				call.err = errors.New("Result.Degraded is not Decision.Degraded")
			}
		case 1:
			call.due = call.start.Add(timeout)
			_, call.err = oc.l.TryAcquireTimeout(ctx, 1, timeout)
		default:
			ctx, cancel := context.WithTimeout(ctx, acquireDeadline)
			call.due = call.start.Add(acquireDeadline)
			call.err = oc.l.Acquire(ctx, 1)
			cancel()
		}
		call.end = time.Now()
		oc.mu.Lock()
		oc.calls = append(oc.calls, call)
		oc.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

// TestOutageFallbackUnderLoad: two Clients (a fleet of two, each with
// Replicas 2: 20 of the 40 permits per second) call one limiter from
// three goroutines each (Allow under a 200 ms deadline, TryAcquireTimeout
// of 30 ms, Acquire under a 60 ms deadline) while the redis-server is
// stopped for 2.5 s and started again. It checks:
//   - during the outage every call is decided locally, Degraded, without
//     an error other than a blocked call's deadline;
//   - each Client's degraded grants certainly within any window of one
//     interval (redistest.WorstCertain, a granted blocked call counted
//     from the end of its wait) are at most 20, the fleet's at most 40;
//   - no call returns later than its timeout or deadline plus stallBound
//     (50 ms, stall_test.go);
//   - each Client had one outage, which began within outageFound (500 ms)
//     of the stop and ended within outageBack (300 ms) of the server
//     answering PING; no call started after it ended (and before a
//     later outage, which a stall past a call's deadline on a loaded
//     machine may begin) was Degraded, and Redis decided calls again.
func TestOutageFallbackUnderLoad(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time outage run")
	redistest.Need(t)
	quietRedisLog(t) // go-redis logs every failed dial
	ctx := context.Background()
	// The AOF keeps the limiter's config over the stop.
	srv, err := redistest.StartWrapped(ctx, nil, "--appendonly", "yes")
	require.NoError(t, err)
	defer srv.Close()
	name := uniqueName(t)
	fleet := []*outageClient{newOutageClient(t, srv.Addr(), name), newOutageClient(t, srv.Addr(), name)}
	require.NoError(t, fleet[0].l.SetRate(ctx, ratelimiter.Config{Rate: outageRate, Interval: outageInterval}))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, oc := range fleet {
		for op := 0; op < 3; op++ {
			wg.Add(1)
			go oc.run(op, stop, &wg)
		}
	}
	time.Sleep(500 * time.Millisecond)
	stopped := time.Now()
	require.NoError(t, srv.Stop())
	time.Sleep(2500 * time.Millisecond)
	resuming := time.Now()
	require.NoError(t, srv.Resume(ctx)) // returns once the server answers PING (polled every 20 ms)
	resumed := time.Now()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("stopped %v after the load began, down %v", 500*time.Millisecond, resumed.Sub(stopped))

	var fleetGrants []redistest.Grant
	for i, oc := range fleet {
		oc.mu.Lock() // Close's end of an outage may still come
		defer oc.mu.Unlock()
		for j, e := range oc.events {
			t.Logf("client %d: outage event %+v at %v after the server answered", i, e, oc.at[j].Sub(resumed))
		}
		require.GreaterOrEqual(t, len(oc.events), 2, "client %d: an outage, begun and ended: %+v", i, oc.events)
		require.True(t, oc.events[0].Down)
		require.False(t, oc.events[1].Down)
		began, ended := oc.at[0], oc.at[1]
		require.True(t, began.After(stopped), "client %d: the outage began before the stop", i)
		require.LessOrEqual(t, began.Sub(stopped), outageFound, "client %d: the outage was found late", i)
		require.True(t, ended.After(resuming), "client %d: the outage ended while the server was down", i)
		require.LessOrEqual(t, ended.Sub(resumed), outageBack, "client %d: back to Redis", i)
		// A script call that a loaded machine stalls past its deadline
		// (55 ms for TryAcquireTimeout's) after the restart begins
		// another outage, which ends at the next probe.
		var next time.Time
		if len(oc.events) > 2 {
			next = oc.at[2]
		}
		t.Logf("client %d: outage began %v after the stop (%v), ended %v after the server answered",
			i, began.Sub(stopped), oc.events[0].Err, ended.Sub(resumed))

		var grants []redistest.Grant
		var degraded, refused, redisAfter int
		for _, c := range oc.calls {
			after := c.start.After(ended) && (next.IsZero() || c.end.Before(next))
			if after && !c.d.Degraded && c.err == nil {
				redisAfter++
			}
			if c.end.After(c.due.Add(stallBound)) {
				t.Errorf("client %d: a call made %v after the stop returned %v after its deadline: %+v", i, c.start.Sub(stopped), c.end.Sub(c.due), c.d)
			}
			if c.err != nil && !errors.Is(c.err, context.DeadlineExceeded) {
				t.Errorf("client %d: %v at %v after the stop (degraded %v)", i, c.err, c.start.Sub(stopped), c.d.Degraded)
			}
			if after && c.d.Degraded {
				t.Errorf("client %d: a call made %v after the outage ended was degraded", i, c.start.Sub(ended))
			}
			if c.start.After(began) && c.end.Before(ended) {
				require.True(t, c.d.Degraded, "client %d: a call during the outage went to Redis: %+v", i, c.d)
			}
			if !c.d.Degraded {
				continue
			}
			degraded++
			if !c.d.Granted {
				refused++
				continue
			}
			// Granted after its wait: the grant happened in
			// [start + Waited, end].
			grants = append(grants, redistest.Grant{Start: c.start.Add(c.d.Waited), Reply: c.end, Permits: 1})
		}
		most, at := redistest.WorstCertain(grants, outageInterval)
		t.Logf("client %d: %d calls, %d degraded (%d granted, %d refused); most degraded grants in an interval %d at %v after the stop",
			i, len(oc.calls), degraded, len(grants), refused, most, at.Sub(stopped))
		require.NotEmpty(t, grants, "client %d: nothing granted in the outage", i)
		require.NotZero(t, redisAfter, "client %d: no call decided by Redis after the outage", i)
		require.NotZero(t, refused, "client %d: nothing refused: the load did not reach the local limit", i)
		require.LessOrEqual(t, most, int64(outageRate/outageReplicas), "client %d: degraded grants in one interval", i)
		fleetGrants = append(fleetGrants, grants...)
	}
	most, _ := redistest.WorstCertain(fleetGrants, outageInterval)
	t.Logf("fleet: most degraded grants in an interval %d", most)
	require.LessOrEqual(t, most, int64(outageRate), "the fleet's degraded grants in one interval")
}
