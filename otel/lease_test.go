package ratelimiterotel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// A Client with leases and the metrics' hooks, a second hook chained after
// them: the lease counters equal the sums of the LeaseEvents the Client
// reported, by outcome and by end, and grants served from a lease are the
// decisions with ratelimiter.leased=true.
func TestMetricsLeases(t *testing.T) {
	ctx := context.Background()
	s := newSDK(t)
	name := redistest.Name(t)

	var (
		mu     sync.Mutex
		events []ratelimiter.LeaseEvent
		leased atomic.Int64
	)
	h := s.m.Hooks()
	require.NotNil(t, h.Lease, "Hooks() records leases")
	lease, decision := h.Lease, h.Decision
	h.Lease = func(ev ratelimiter.LeaseEvent) {
		lease(ev)
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}
	h.Decision = func(d ratelimiter.Decision) {
		decision(d)
		if d.Leased {
			leased.Add(1)
		}
	}
	// Leases outlive the test (10 s): each ends when a caller asks more
	// than it holds, or at Close, not at a timer's whim.
	c := ratelimiter.NewClient(newRedis(t), ratelimiter.WithHooks(h),
		ratelimiter.WithLeases(ratelimiter.LeaseOptions{Duration: 10 * time.Second, MinDemand: 2}))
	l := c.Limiter(name)
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1000, Interval: time.Minute})
	require.NoError(t, err)
	const asks = 20
	for i := 0; i < asks; i++ {
		ok, err := l.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.Positive(t, leased.Load(), "some grants came from a lease")
	require.NoError(t, c.Close(ctx)) // ends every lease; returns once each was reported

	mu.Lock()
	evs := append([]ratelimiter.LeaseEvent(nil), events...)
	mu.Unlock()
	require.NotEmpty(t, evs)
	require.Equal(t, ratelimiter.LeaseClosed, evs[len(evs)-1].End)
	var permits, handed, returned, kept int64
	byEnd := map[string]int64{}
	for _, ev := range evs {
		require.Equal(t, name, ev.Limiter)
		require.NoError(t, ev.Err)
		permits, handed, returned, kept = permits+ev.Permits, handed+ev.HandedOut, returned+ev.Returned, kept+ev.Kept
		byEnd[ev.End.String()]++
	}
	t.Logf("%d leases %v: %d permits, %d handed out, %d returned, %d kept; %d leased grants",
		len(evs), byEnd, permits, handed, returned, kept, leased.Load())

	got := s.collect(t)
	lp := got["ratelimiter.lease.permits {permit}"]
	require.NotNil(t, lp, "metrics: %v", got)
	at := func(out string) map[string]string {
		return map[string]string{"ratelimiter.name": name, "ratelimiter.lease.outcome": out}
	}
	mHanded, mReturned, mKept := sumOf(t, lp, at("handed_out")), sumOf(t, lp, at("returned")), sumOf(t, lp, at("kept"))
	require.Equal(t, handed, mHanded)
	require.Equal(t, returned, mReturned)
	require.Equal(t, kept, mKept)
	require.Equal(t, permits, mHanded+mReturned+mKept, "a lease's permits are handed out, returned or kept")
	require.Positive(t, mReturned, "Close gave back the rest")

	ls := got["ratelimiter.leases {lease}"]
	require.NotNil(t, ls, "metrics: %v", got)
	for end, n := range byEnd {
		require.Equal(t, n, sumOf(t, ls, map[string]string{"ratelimiter.name": name, "ratelimiter.lease.end": end}), end)
	}

	dec := got["ratelimiter.decisions {decision}"]
	grants := map[string]string{"ratelimiter.name": name, "ratelimiter.operation": "allow", "ratelimiter.outcome": "granted"}
	fromLease := map[string]string{"ratelimiter.leased": "true"}
	for k, v := range grants {
		fromLease[k] = v
	}
	require.Equal(t, leased.Load(), sumOf(t, dec, fromLease))
	require.Equal(t, asks-leased.Load(), sumOf(t, dec, grants), "grants through Redis carry no ratelimiter.leased")
	require.Equal(t, int64(asks), sumOf(t, got["ratelimiter.permits.granted {permit}"],
		map[string]string{"ratelimiter.name": name, "ratelimiter.operation": "allow"}))
}

// A lease event whose return failed counts like any other, its permits
// that did not come back as kept; an end this module does not know is
// "other".
func TestMetricsLeaseErrAndUnknownEnd(t *testing.T) {
	s := newSDK(t)
	name := redistest.Name(t)
	s.m.Lease(ratelimiter.LeaseEvent{Limiter: name, Permits: 5, HandedOut: 2, Kept: 3,
		End: ratelimiter.LeaseExpired, Err: errors.New("return failed")})
	s.m.Lease(ratelimiter.LeaseEvent{Limiter: name, Permits: 4, HandedOut: 1, Returned: 3, End: ratelimiter.LeaseEnd(99)})
	got := s.collect(t)
	lp := got["ratelimiter.lease.permits {permit}"]
	for out, want := range map[string]int64{"handed_out": 3, "returned": 3, "kept": 3} {
		require.Equal(t, want, sumOf(t, lp, map[string]string{"ratelimiter.name": name, "ratelimiter.lease.outcome": out}), out)
	}
	ls := got["ratelimiter.leases {lease}"]
	require.Equal(t, int64(1), sumOf(t, ls, map[string]string{"ratelimiter.name": name, "ratelimiter.lease.end": "expired"}))
	require.Equal(t, int64(1), sumOf(t, ls, map[string]string{"ratelimiter.name": name, "ratelimiter.lease.end": "other"}))
}
