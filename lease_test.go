package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// Every bad lease option, and WithLeases beside WithMaxBatch(1) or
// WithServerClock(false), makes Err and every call fail with
// ErrInvalidArgument before anything is sent (the Redis client here points
// where nothing listens, and Close does nothing).
func TestLeaseOptionsInvalid(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	lease := func(o ratelimiter.LeaseOptions) ratelimiter.Option { return ratelimiter.WithLeases(o) }
	for _, tc := range []struct {
		name string
		opts []ratelimiter.Option
	}{
		{"negative duration", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Duration: -time.Millisecond})}},
		{"sub-ms duration", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Duration: 1500 * time.Microsecond})}},
		{"long duration", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Duration: time.Minute})}},
		{"negative size", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{MaxPermits: -1})}},
		{"huge size", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{MaxPermits: 1 << 33})}},
		{"negative share", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Share: -0.1})}},
		{"share under a millionth", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Share: 4e-7})}},
		{"share above 1", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Share: 1.5})}},
		{"NaN share", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{Share: nan()})}},
		{"negative demand", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{MinDemand: -1})}},
		{"huge demand", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{MinDemand: 1 << 33})}},
		{"no combining", []ratelimiter.Option{lease(ratelimiter.LeaseOptions{}), ratelimiter.WithMaxBatch(1)}},
		{"client clock", []ratelimiter.Option{ratelimiter.WithServerClock(false), lease(ratelimiter.LeaseOptions{})}},
	} {
		c := ratelimiter.NewClient(rdb, tc.opts...)
		require.ErrorIs(t, c.Err(), ratelimiter.ErrInvalidArgument, tc.name)
		_, err := c.Limiter("x").TryAcquire(context.Background(), 1)
		require.ErrorIs(t, err, ratelimiter.ErrInvalidArgument, tc.name)
		require.NoError(t, c.Close(context.Background()), tc.name)
	}
	for _, o := range []ratelimiter.LeaseOptions{{}, {Duration: 10 * time.Second, MaxPermits: ratelimiter.MaxPermits, Share: 1, MinDemand: 1}} {
		require.NoError(t, ratelimiter.NewClient(rdb, ratelimiter.WithLeases(o)).Err(), "%+v", o)
	}
	require.Equal(t, "expired", ratelimiter.LeaseExpired.String())
	require.Equal(t, "LeaseEnd(9)", ratelimiter.LeaseEnd(9).String())
}

func nan() float64 { return math.NaN() }

// leaseEvents collects Hooks.Lease events.
type leaseEvents struct {
	mu   sync.Mutex
	list []ratelimiter.LeaseEvent
}

func (e *leaseEvents) add(ev ratelimiter.LeaseEvent) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

func (e *leaseEvents) all() []ratelimiter.LeaseEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]ratelimiter.LeaseEvent(nil), e.list...)
}

// leaseSum is what a set of lease events add up to.
type leaseSum struct {
	leases                          int
	permits, handed, returned, kept int64
	unusedBy                        map[ratelimiter.LeaseEnd]int64
	errs                            []error
}

func (e *leaseEvents) sum() leaseSum {
	s := leaseSum{unusedBy: map[ratelimiter.LeaseEnd]int64{}}
	for _, ev := range e.all() {
		s.leases++
		s.permits, s.handed, s.returned, s.kept = s.permits+ev.Permits, s.handed+ev.HandedOut, s.returned+ev.Returned, s.kept+ev.Kept
		s.unusedBy[ev.End] += ev.Permits - ev.HandedOut
		if ev.Err != nil {
			s.errs = append(s.errs, ev.Err)
		}
	}
	return s
}

// leaseRig is one Client with leases on a redis-server of the test's own
// (script calls are counted server-wide), and a limiter configured on it.
type leaseRig struct {
	srv    *redistest.Server
	rdb    *redis.Client
	c      *ratelimiter.Client
	l      *ratelimiter.Limiter
	other  *ratelimiter.Limiter // the same limiter through a Client without leases
	ev     *leaseEvents
	leased atomic.Int64 // Decisions granted from a lease
}

func newLeaseRig(t *testing.T, o ratelimiter.LeaseOptions, cfg ratelimiter.Config, srv *redistest.Server) *leaseRig {
	t.Helper()
	if srv == nil {
		srv = ownServer(t)
	}
	g := &leaseRig{srv: srv, rdb: redistest.Client(t, srv.Addr()), ev: &leaseEvents{}}
	g.c = ratelimiter.NewClient(g.rdb, ratelimiter.WithLeases(o), ratelimiter.WithHooks(ratelimiter.Hooks{
		Lease: g.ev.add,
		Decision: func(d ratelimiter.Decision) {
			if d.Leased {
				g.leased.Add(1)
			}
		},
	}))
	name := uniqueName(t)
	g.l = g.c.Limiter(name)
	g.other = ratelimiter.NewClient(g.rdb).Limiter(name)
	_, err := g.other.TrySetRate(context.Background(), cfg)
	require.NoError(t, err)
	return g
}

// grant makes n TryAcquire(1) calls one after another; each must be granted.
func (g *leaseRig) grant(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		ok, err := g.l.TryAcquire(context.Background(), 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
}

// held sums the counts of the limiter's records (each record's last four
// bytes, as Redisson reads them) and returns the largest.
func (g *leaseRig) held(t *testing.T) (sum, largest int64, records int) {
	t.Helper()
	ms, err := g.rdb.ZRange(context.Background(), g.l.Keys().Permits, 0, -1).Result()
	require.NoError(t, err)
	for _, m := range ms {
		n := int64(binary.LittleEndian.Uint32([]byte(m[len(m)-4:])))
		sum, largest = sum+n, max(largest, n)
	}
	return sum, largest, len(ms)
}

// available is what another Client (and Redisson) sees.
func (g *leaseRig) available(t *testing.T) int64 {
	t.Helper()
	n, err := g.other.AvailablePermits(context.Background())
	require.NoError(t, err)
	return n
}

// A lease is one record of k permits in the Client's member format and
// tag; callers are granted from it without script calls; at its deadline
// the record shrinks to the permits handed out and the value gets the
// rest back; another Client sees the same budget as Redisson would, and
// every lease's permits are handed out or given back.
func TestLeaseOneRecordAndReturn(t *testing.T) {
	const rate = 10000
	g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 200 * time.Millisecond, MinDemand: 4, MaxPermits: 64},
		ratelimiter.Config{Rate: rate, Interval: time.Minute}, nil)
	before := redistest.ScriptCalls(t, g.rdb)
	g.grant(t, 5) // three through acquire.lua, the fourth takes a lease, the fifth is handed out
	held, largest, records := g.held(t)
	t.Logf("5 grants: %d records hold %d (largest %d); %d from the lease", records, held, largest, g.leased.Load())
	require.Greater(t, held, int64(5), "the lease's record holds the permits not yet handed out")
	require.Greater(t, largest, int64(1), "one record holds the lease")
	require.Positive(t, g.leased.Load())
	require.Equal(t, rate-held, g.available(t), "Redis counts the whole lease")
	ms, err := g.rdb.ZRangeByScore(context.Background(), g.l.Keys().Permits, &redis.ZRangeBy{Min: "-inf", Max: "+inf"}).Result()
	require.NoError(t, err)
	for _, m := range ms {
		rec, err := wire.Decode([]byte(m))
		require.NoError(t, err)
		tag, ok := rec.GoTag()
		require.True(t, ok && tag == g.c.RecordTag(), "record %x: tag %q", m, tag)
	}

	const asks = 20
	warm := redistest.ScriptCalls(t, g.rdb)
	t.Logf("the first 5 grants: %d script calls (the permission probe, NOSCRIPT retries, 3 acquire.lua, 1 lease.lua)", warm-before)
	g.grant(t, asks-5)
	calls := redistest.ScriptCalls(t, g.rdb) - warm
	held, _, records = g.held(t)
	t.Logf("%d more grants: %d script calls; %d from leases in all; %d records hold %d", asks-5, calls, g.leased.Load(), records, held)
	require.LessOrEqual(t, calls, int64(2), "one lease call, perhaps two")
	require.GreaterOrEqual(t, held, int64(asks))

	eventually(t, "the leases' rest given back at their deadline", func() bool { h, _, _ := g.held(t); return h == asks })
	require.Equal(t, int64(rate-asks), g.available(t))
	require.NoError(t, g.c.Close(context.Background())) // waits for the events of returns in flight
	s := g.ev.sum()
	t.Logf("%d leases: %d permits, %d handed out, %d returned, %d kept", s.leases, s.permits, s.handed, s.returned, s.kept)
	require.Equal(t, s.permits, s.handed+s.returned+s.kept)
	require.Zero(t, s.kept)
	require.Empty(t, s.errs)
	// The first three asks went to Redis one by one; every later permit came
	// from a lease record (its call's own ask, or handed out).
	require.Equal(t, int64(asks-3), s.handed)
}

// Close gives back every lease's unused permits at once and waits for it;
// the Client then works without leases.
func TestLeaseClose(t *testing.T) {
	ctx := context.Background()
	g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
		ratelimiter.Config{Rate: 1000, Interval: time.Minute}, nil)
	g.grant(t, 10)
	held, _, _ := g.held(t)
	require.Greater(t, held, int64(10))
	require.NoError(t, g.c.Close(ctx))
	held, _, _ = g.held(t)
	require.Equal(t, int64(10), held, "the records hold exactly what was handed out")
	require.Equal(t, int64(990), g.available(t))
	evs := g.ev.all()
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	require.Equal(t, ratelimiter.LeaseClosed, last.End)
	require.Positive(t, last.Returned)
	require.Zero(t, last.Kept)

	before, leased := redistest.ScriptCalls(t, g.rdb), g.leased.Load()
	g.grant(t, 5)
	require.Equal(t, int64(5), redistest.ScriptCalls(t, g.rdb)-before, "after Close every grant is a script call")
	require.Equal(t, leased, g.leased.Load())
	require.NoError(t, g.c.Close(ctx), "Close again")
}

// This Client's SetRate, UpdateRate, Delete and Expire* end its lease
// before the call: nothing is handed out from it after; with KeepState the record
// keeps only the permits handed out; without, the record is gone and the
// return gives nothing back.
func TestLeaseSetRateAndDelete(t *testing.T) {
	ctx := context.Background()
	srv := ownServer(t)
	for _, tc := range []struct {
		name   string
		change func(l *ratelimiter.Limiter) error
		held   int64 // the records after the change's return
	}{
		{"SetRate KeepState", func(l *ratelimiter.Limiter) error {
			return l.SetRate(ctx, ratelimiter.Config{Rate: 500, Interval: time.Minute}, ratelimiter.KeepState())
		}, 10},
		{"UpdateRate KeepState", func(l *ratelimiter.Limiter) error {
			_, err := l.UpdateRate(ctx, ratelimiter.Config{Rate: 500, Interval: time.Minute}, ratelimiter.KeepState())
			return err
		}, 10},
		{"SetRate", func(l *ratelimiter.Limiter) error {
			return l.SetRate(ctx, ratelimiter.Config{Rate: 500, Interval: time.Minute})
		}, 0},
		{"Delete", func(l *ratelimiter.Limiter) error { _, err := l.Delete(ctx); return err }, 0},
		{"Expire", func(l *ratelimiter.Limiter) error { _, err := l.Expire(ctx, time.Hour); return err }, 10},
		{"ExpireAt", func(l *ratelimiter.Limiter) error { _, err := l.ExpireAt(ctx, time.Now().Add(time.Hour)); return err }, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
				ratelimiter.Config{Rate: 1000, Interval: time.Minute}, srv)
			g.grant(t, 10)
			held, _, _ := g.held(t)
			require.Greater(t, held, int64(10))
			require.NoError(t, tc.change(g.l))
			leased := g.leased.Load()
			if tc.name == "Delete" {
				_, err := g.l.TryAcquire(ctx, 1)
				require.ErrorIs(t, err, ratelimiter.ErrNotInitialized, "no grant from the dropped lease")
			} else {
				g.grant(t, 1) // from Redis: a lease call or acquire.lua
				tc.held++
			}
			require.Equal(t, leased, g.leased.Load(), "no grant from the dropped lease")
			require.NoError(t, g.c.Close(ctx)) // waits for the dropped lease's return
			held, _, _ = g.held(t)
			require.Equal(t, tc.held, held)
			var dropped []ratelimiter.LeaseEvent
			for _, ev := range g.ev.all() {
				require.Equal(t, ev.Permits, ev.HandedOut+ev.Returned+ev.Kept)
				if ev.End == ratelimiter.LeaseDropped {
					dropped = append(dropped, ev)
				}
			}
			require.Len(t, dropped, 1)
			if tc.name == "Delete" {
				require.ErrorIs(t, dropped[0].Err, ratelimiter.ErrNotInitialized)
			} else {
				require.NoError(t, dropped[0].Err)
			}
		})
	}
}

// Release puts permits back into the live lease, up to what it handed
// out, without a script call; they are handed out again or given back at
// its end, and the records then hold exactly what the callers kept.
func TestLeaseRelease(t *testing.T) {
	ctx := context.Background()
	g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
		ratelimiter.Config{Rate: 1000, Interval: time.Minute}, nil)
	g.grant(t, 10)
	before := redistest.ScriptCalls(t, g.rdb)
	require.NoError(t, g.l.Release(ctx, 3))
	require.Zero(t, redistest.ScriptCalls(t, g.rdb)-before, "released into the lease")
	require.NoError(t, g.c.Close(ctx))
	held, _, _ := g.held(t)
	require.Equal(t, int64(7), held)
	require.Equal(t, int64(993), g.available(t))
	require.NoError(t, g.l.Release(ctx, 2), "no lease after Close: release.lua")
	require.Equal(t, int64(995), g.available(t))
}

// A done context takes nothing from a live lease; a blocking call is
// granted from it at once; a caller whose context ends while its lease
// call waits on Redis gets the context's error, and the record that call
// wrote is given back whole when its reply comes.
func TestLeaseContext(t *testing.T) {
	ctx := context.Background()
	g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
		ratelimiter.Config{Rate: 1000, Interval: time.Minute}, nil)
	g.grant(t, 5) // a lease of 3 (handed out), then a lease of 7
	held, _, _ := g.held(t)
	require.Greater(t, held, int64(5))

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := g.l.TryAcquire(done, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, g.l.Acquire(done, 1), context.Canceled)
	leased := g.leased.Load()
	require.NoError(t, g.l.Acquire(ctx, 1))
	require.Equal(t, leased+1, g.leased.Load(), "Acquire granted from the lease")
	require.NoError(t, g.c.Close(ctx))
	held, _, _ = g.held(t)
	require.Equal(t, int64(6), held, "the canceled calls took nothing")

	// A fresh Client (Close ended leases on the first): one grant, then a
	// lease call held by CLIENT PAUSE past its caller's deadline.
	h := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
		ratelimiter.Config{Rate: 1000, Interval: time.Minute}, g.srv)
	h.grant(t, 1)
	pauseScripts(t, h.rdb, 300*time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	ok, err := h.l.TryAcquire(short, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ok)
	require.NoError(t, h.c.Close(ctx)) // waits for the abandoned call's reply and its return
	held, _, _ = h.held(t)
	require.Equal(t, int64(1), held, "the abandoned lease was given back whole")
	evs := h.ev.all()
	require.Len(t, evs, 1)
	require.Equal(t, ratelimiter.LeaseRefused, evs[0].End)
	require.Zero(t, evs[0].HandedOut)
	require.Equal(t, evs[0].Permits, evs[0].Returned)
}

// While this Client's SetRate, UpdateRate, Delete or Expire* of a limiter
// is in progress (between the two halves of dropLease) no lease is taken
// or handed out, whether or not the Client had lease state for the limiter
// before: a lease taken then could be handed out after the call deleted
// its record. Here another Client's SetRate resets the limiter in the
// middle, as the call's script would; the grants after it are all in
// records.
func TestLeaseDuringSetRate(t *testing.T) {
	ctx := context.Background()
	cfg := ratelimiter.Config{Rate: 1000, Interval: time.Minute}
	srv := ownServer(t)
	for _, before := range []int{0, 5} { // no lane yet; a live lease
		g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2}, cfg, srv)
		g.grant(t, before)
		after := ratelimiter.DropLease(g.l)
		leased := g.leased.Load()
		g.grant(t, 5)
		require.NoError(t, g.other.SetRate(ctx, cfg)) // the records are reset
		g.grant(t, 5)
		require.Equal(t, leased, g.leased.Load(), "before %d: no grant from a lease while dropping", before)
		after()
		require.NoError(t, g.c.Close(ctx))
		held, _, _ := g.held(t)
		require.Equal(t, int64(5), held, "before %d: the grants after the reset", before)
	}
}

// An abandoned lease call holds its lane's lease calls until its reply
// comes: a second caller whose lease call would overlap it goes to
// acquire.lua instead, so only one lease is taken (and given back whole).
func TestLeaseAbandonedCallsDoNotOverlap(t *testing.T) {
	ctx := context.Background()
	g := newLeaseRig(t, ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2},
		ratelimiter.Config{Rate: 1000, Interval: time.Minute}, nil)
	g.grant(t, 5) // a lease of 3 (handed out), then a lease of 7: lease.lua is loaded
	pauseScripts(t, g.rdb, time.Second)
	for i := 0; i < 2; i++ { // more than the lease holds: to the lane
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := g.l.TryAcquire(short, 20)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.NoError(t, g.c.Close(ctx)) // waits for the abandoned lease call's reply
	var refused []ratelimiter.LeaseEvent
	for _, ev := range g.ev.all() {
		if ev.End == ratelimiter.LeaseRefused {
			refused = append(refused, ev)
		}
	}
	require.Len(t, refused, 1, "one lease call")
	// Returned, or Kept when the release of the acquire.lua call's grant
	// (release.lua, from this Client's oldest records) shrank the lease's
	// record first: the return by exact member then misses it.
	require.Equal(t, refused[0].Permits, refused[0].Returned+refused[0].Kept)
}
