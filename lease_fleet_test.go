package ratelimiter_test

import (
	"context"
	"strconv"
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

// redisCPU reads used_cpu_sys + used_cpu_user of the server, in µs.
func redisCPU(t *testing.T, rdb *redis.Client) float64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(t, err)
	var us float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			us += f * 1e6
		}
	}
	return us
}

// fleetRun is one configuration of TestLeasesFleet.
type fleetRun struct {
	decisions, grants, calls int64
	cpuUs                    float64
	took                     time.Duration
	leases                   leaseSum
}

func (r fleetRun) callsPerGrant() float64 { return float64(r.calls) / float64(max(r.grants, 1)) }
func (r fleetRun) cpuPerGrant() float64   { return r.cpuUs / float64(max(r.grants, 1)) }

// unused is the share of lease permits not handed out.
func (r fleetRun) unused() float64 {
	if r.leases.permits == 0 {
		return 0
	}
	return float64(r.leases.permits-r.leases.handed) / float64(r.leases.permits)
}

// runFleet runs clients Clients of one caller each, each on its own
// go-redis client, every caller making each decisions TryAcquire(1) on one
// limiter of rate per second, on a redis-server of its own. Script calls
// and Redis CPU are read from before the first decision to after Close,
// so that the returns' work is counted.
func runFleet(t *testing.T, clients int, rate int64, each int, opts ...ratelimiter.Option) fleetRun {
	ctx := context.Background()
	srv := ownServer(t)
	admin := redistest.Client(t, srv.Addr())
	name := uniqueName(t)
	_, err := ratelimiter.NewClient(admin).Limiter(name).TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: time.Second})
	require.NoError(t, err)
	ev := &leaseEvents{}
	opts = append(opts, ratelimiter.WithHooks(ratelimiter.Hooks{Lease: ev.add}))
	lims := make([]*ratelimiter.Limiter, clients)
	cs := make([]*ratelimiter.Client, clients)
	for i := range cs {
		cs[i] = ratelimiter.NewClient(redistest.Client(t, srv.Addr()), opts...)
		lims[i] = cs[i].Limiter(name)
		// The Client's first call checks its permissions: not part of the run.
		_, err := lims[i].AvailablePermits(ctx)
		require.NoError(t, err)
	}
	var decisions, grants atomic.Int64
	calls0, cpu0 := redistest.ScriptCalls(t, admin), redisCPU(t, admin)
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range lims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				decisions.Add(1)
				if ok {
					grants.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range cs {
		require.NoError(t, c.Close(ctx))
	}
	r := fleetRun{decisions: decisions.Load(), grants: grants.Load(), took: time.Since(start)}
	r.calls = redistest.ScriptCalls(t, admin) - calls0
	r.cpuUs = redisCPU(t, admin) - cpu0
	r.leases = ev.sum()
	return r
}

// TestLeasesFleet: 64 Clients of one caller each on one hot limiter far
// from its rate (issue 24's fleet), a fixed number of decisions per
// caller. With leases (the defaults) a lease call serves many decisions:
// at most 0.05 script calls per granted decision, where Redisson makes
// one (lease.lua costs Redis about what one Redisson tryAcquire does, so
// this holds the Redis CPU per granted decision well under issue 24's
// 0.25x; the bench's fleet section measures it against Redisson). Every
// lease's permits are handed out or given back. Logged beside it, each on
// a server of its own: WithMaxBatch(1) (one script call per decision, as
// Redisson), script calls and Redis CPU per granted decision, and the
// lease permits left unused by how the lease ended.
func TestLeasesFleet(t *testing.T) {
	redistest.SkipIfShort(t, "a fleet run")
	const clients, rate = 64, 1_000_000_000
	lease := runFleet(t, clients, rate, 3000, ratelimiter.WithLeases(ratelimiter.LeaseOptions{}))
	one := runFleet(t, clients, rate, 100, ratelimiter.WithMaxBatch(1))
	for _, x := range []struct {
		name string
		r    fleetRun
	}{{"WithLeases", lease}, {"WithMaxBatch(1)", one}} {
		t.Logf("%-16s %d x 1: %7d decisions in %v, %.4f script calls and %6.2f µs Redis CPU per granted decision; "+
			"%d leases, %d permits, %.1f%% unused (expired %d, replaced %d, closed %d), %d kept",
			x.name, clients, x.r.decisions, x.r.took.Round(time.Millisecond), x.r.callsPerGrant(), x.r.cpuPerGrant(),
			x.r.leases.leases, x.r.leases.permits, 100*x.r.unused(), x.r.leases.unusedBy[ratelimiter.LeaseExpired],
			x.r.leases.unusedBy[ratelimiter.LeaseReplaced], x.r.leases.unusedBy[ratelimiter.LeaseClosed], x.r.leases.kept)
	}
	t.Logf("Redis CPU per granted decision, leases / one call per decision: %.3fx", lease.cpuPerGrant()/one.cpuPerGrant())
	require.Equal(t, lease.decisions, lease.grants)
	require.LessOrEqual(t, lease.callsPerGrant(), 0.05, "script calls per granted decision")
	// Every lease's permits are handed out, given back or kept. Kept is
	// logged, not held to zero: a return that reaches Redis after its
	// record left the 1 s window (a stalled machine; one run of eight did
	// it) finds nothing to shrink, and those permits came back when the
	// record expired. TestLeasesExactRecords, on an interval longer than
	// its run, holds kept to zero.
	require.Equal(t, lease.leases.permits, lease.leases.handed+lease.leases.returned+lease.leases.kept)
}

// TestLeasesRealTime: 16 Clients of one caller each in a TryAcquire loop
// on a 200 per second limiter for 3 s, leases with Share 0.25 and a
// 100 ms Duration. The records' stamps hold at most the rate in any
// interval (exact, as without leases); the callers' grants in any real
// window of the interval less 1 ms (WorstCertain) at most the rate plus
// ⌊Share × rate⌋ (the bound of docs/combining.md, "Leases"); every
// lease's permits are handed out or given back. Logs the measured excess
// and the permits left unused.
func TestLeasesRealTime(t *testing.T) {
	redistest.SkipIfShort(t, "a real-time run with leases")
	ctx := context.Background()
	const rate, clients, share = 200, 16, 0.25
	interval := time.Second
	srv := ownServer(t)
	admin := redistest.Client(t, srv.Addr())
	name := uniqueName(t)
	setup := ratelimiter.NewClient(admin).Limiter(name)
	_, err := setup.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(t, err)
	ev := &leaseEvents{}
	var leased atomic.Int64
	opts := []ratelimiter.Option{
		ratelimiter.WithLeases(ratelimiter.LeaseOptions{Duration: 100 * time.Millisecond, Share: share, MinDemand: 2}),
		ratelimiter.WithHooks(ratelimiter.Hooks{Lease: ev.add, Decision: func(d ratelimiter.Decision) {
			if d.Leased {
				leased.Add(1)
			}
		}}),
	}
	stopRecords := make(chan struct{})
	records := sampleRecords(t, redistest.Client(t, srv.Addr()), setup.Keys().Permits, interval, stopRecords)
	var grants redistest.Grants
	cs := make([]*ratelimiter.Client, clients)
	begin := time.Now()
	end := begin.Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := range cs {
		cs[i] = ratelimiter.NewClient(redistest.Client(t, srv.Addr()), opts...)
		l := cs[i].Limiter(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				start := time.Now()
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					grants.Add(start, 1)
				}
				time.Sleep(200 * time.Microsecond) // a steady load, not a spin
			}
		}()
	}
	wg.Wait()
	for _, c := range cs {
		require.NoError(t, c.Close(ctx))
	}
	close(stopRecords)
	recs := <-records
	list := grants.List()
	certain, at := redistest.WorstCertain(list, interval)
	s := ev.sum()
	bound := int64(rate + share*rate)
	t.Logf("%d grants (%d from leases); WorstCertain %d at %v (rate %d, bound %d); %d leases: %d permits, %d handed out, %d returned, %d kept",
		len(list), leased.Load(), certain, at.Format("15:04:05.000"), rate, bound, s.leases, s.permits, s.handed, s.returned, s.kept)
	var later int // leases stamped after the first interval: the window was contested then
	for _, e := range ev.all() {
		if e.Stamp.After(begin.Add(interval)) {
			later++
		}
	}
	t.Logf("leases stamped after the first interval: %d of %d", later, s.leases)
	require.Positive(t, leased.Load(), "no lease was used")
	require.LessOrEqual(t, certain, bound, "real-time bound")
	checkWindows(t, recs, rate, interval)
	require.Equal(t, s.permits, s.handed+s.returned+s.kept) // kept: see TestLeasesFleet
}

// TestLeasesExactRecords: 8 Clients of one caller each, leasing from a
// limiter whose interval outlasts the run, then Close: the records hold
// exactly the permits granted (every unused permit given back, none
// lost), and another Client (Redisson's reading: the rate less the
// records' counts) sees that many taken.
func TestLeasesExactRecords(t *testing.T) {
	redistest.SkipIfShort(t, "a fleet run")
	ctx := context.Background()
	const rate, clients = 1_000_000, 8
	srv := ownServer(t)
	admin := redistest.Client(t, srv.Addr())
	name := uniqueName(t)
	setup := ratelimiter.NewClient(admin).Limiter(name)
	_, err := setup.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: time.Minute})
	require.NoError(t, err)
	var grants atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(time.Second)
	cs := make([]*ratelimiter.Client, clients)
	for i := range cs {
		cs[i] = ratelimiter.NewClient(redistest.Client(t, srv.Addr()), ratelimiter.WithLeases(ratelimiter.LeaseOptions{Duration: 20 * time.Millisecond}))
		l := cs[i].Limiter(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				ok, err := l.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					grants.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range cs {
		require.NoError(t, c.Close(ctx)) // waits for every return in flight
	}
	g := &leaseRig{rdb: admin, l: setup}
	held, _, recs := g.held(t)
	avail, err := setup.AvailablePermits(ctx)
	require.NoError(t, err)
	t.Logf("%d grants; %d records hold %d permits; available %d", grants.Load(), recs, held, avail)
	require.Positive(t, grants.Load())
	require.Equal(t, grants.Load(), held, "the records hold exactly the permits granted")
	require.Equal(t, rate-held, avail)
}
