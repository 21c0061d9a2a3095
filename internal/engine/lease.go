package engine

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The lease state of a Client (lease.go) and its fast path: a caller
// takes permits from a live lease under one mutex per limiter, with no
// Redis call.

const (
	// maxLeaseLanes is the lane count above which making a lane sweeps
	// (at most once a second): lanes with no live lease, no lease call, no
	// SetRate or Delete in progress and no demand for a second are dropped.
	// It is not a hard bound: lanes in use are kept.
	maxLeaseLanes = 4096
	// ShareScale is Share's unit in lease.lua: millionths.
	ShareScale = 1_000_000
	// minLeaseInterval is the shortest interval a limiter is leased at: a
	// lease is handed out for at most a quarter of it.
	minLeaseInterval = 4 * time.Millisecond
)

// leasing is a Client's lease state (nil when leases are off).
type leasing struct {
	time   Clock // the Engine's
	opts   LeaseOptions
	share  int64       // opts.Share in millionths, as lease.lua takes it
	closed atomic.Bool // Close was called: no new lease
	m      sync.Map    // lane key -> *leaseLane
	n      atomic.Int64
	swept  atomic.Int64 // when the lanes were last swept, unix ns
	work   leaseWork    // lease calls and returns in flight (leasereturn.go)
}

// leaseLane is one limiter's lease state in one Client. Lease calls of a
// lane are serial: they run from its combining lane, which has one call
// in flight.
type leaseLane struct {
	mu   sync.Mutex
	lim  Limiter
	cur  *lease // the live lease; nil when none
	dead bool   // swept: make a new lane
	// gen counts this Client's SetRate, UpdateRate and Delete of the
	// limiter: a lease whose call began before one is not handed out.
	gen uint64
	// calling: a lease call is in flight, abandoned ones included, until
	// its reply is handled: no other is planned, and the lane is not swept.
	calling bool
	// dropping counts this Client's SetRate, UpdateRate, Delete and
	// Expire* of the limiter in progress (dropLease): no lease is planned
	// or installed while it is above 0, and the lane is not swept.
	dropping int
	// Demand: permits asked in three slots of Duration/2 each.
	slot  [3]int64
	epoch [3]int64
	used  time.Time // the last ask, for the sweep
	// next is the next lease's size; 0 until a lease ended.
	next int64
	// quiet: no lease call before this (after the script declined one).
	quiet time.Time
	// The limiter's rate, interval and the permits Redis had left, from
	// the last reply that said; known is false until one did.
	rate, value int64
	interval    time.Duration
	known       bool
}

// lease is one block of permits that Redis granted to this Client.
type lease struct {
	ll      *leaseLane
	member  []byte // the record as written: prefix and count
	total   int64  // the record's count
	left    int64  // not handed out
	handed  int64  // handed out, less what Release put back
	sentAt  time.Time
	until   time.Time // no hand-out at or after this
	stamp   int64     // the record's score, ms
	emptied time.Time // when left reached 0
	ended   bool
	refused bool // none of it handed out beyond its call's callers: not sized from
	endedAt time.Time
	timer   Timer // its deadline, on the Engine's Clock
	// For the Results of local grants: the reply's figures.
	limit     int64
	interval  time.Duration
	redisLeft int64
	reset     time.Duration
	repliedAt time.Time
}

func newLeasing(o LeaseOptions, c Clock) *leasing {
	return &leasing{time: c, opts: o, share: int64(math.Round(o.Share * ShareScale))}
}

// lane returns the lease state of lim, making it if needed, locked.
func (ls *leasing) lane(lim Limiter) *leaseLane {
	key := lim.LaneKey()
	for {
		v, ok := ls.m.Load(key)
		if !ok {
			if ls.n.Load() >= maxLeaseLanes {
				ls.sweep(ls.time.Now())
			}
			var loaded bool
			if v, loaded = ls.m.LoadOrStore(key, &leaseLane{lim: lim}); !loaded {
				ls.n.Add(1)
			}
		}
		ll := v.(*leaseLane)
		ll.mu.Lock()
		if !ll.dead {
			return ll
		}
		ll.mu.Unlock()
	}
}

// sweep drops the lanes with no live lease, no lease call in flight and no
// demand for a second; at most once a second.
func (ls *leasing) sweep(now time.Time) {
	last := ls.swept.Load()
	if now.UnixNano()-last < int64(time.Second) || !ls.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	ls.m.Range(func(k, v any) bool {
		ll := v.(*leaseLane)
		ll.mu.Lock()
		if ll.cur == nil && !ll.calling && ll.dropping == 0 && now.Sub(ll.used) > time.Second {
			ll.dead = true
			ls.m.Delete(k)
			ls.n.Add(-1)
		}
		ll.mu.Unlock()
		return true
	})
}

// count notes n permits asked at now. Call with ll.mu held.
func (ll *leaseLane) count(now time.Time, n int64, d time.Duration) {
	e := now.UnixNano() / int64(max(d/2, time.Millisecond))
	i := e % int64(len(ll.slot))
	if ll.epoch[i] != e {
		ll.epoch[i], ll.slot[i] = e, 0
	}
	ll.slot[i] += n
	ll.used = now
}

// demand returns the permits asked within the current slot and the two
// before it: the last Duration at least, 1.5 × Duration at most. Call
// with ll.mu held.
func (ll *leaseLane) demand(now time.Time, d time.Duration) int64 {
	e := now.UnixNano() / int64(max(d/2, time.Millisecond))
	var sum int64
	for i := range ll.slot {
		if e-ll.epoch[i] < int64(len(ll.slot)) {
			sum += ll.slot[i]
		}
	}
	return sum
}

// take hands out n permits of lim's live lease, if it holds them, and
// counts the demand (unless counted: a queued request that try counted
// already). The hand-out's moment is the clock reading under the lock,
// which lies within the caller's call: no permit is handed out at or after
// the lease's deadline.
func (ls *leasing) take(lim Limiter, n int64, counted bool) (Result, bool) {
	if ls.closed.Load() {
		return Result{}, false
	}
	ll := ls.lane(lim)
	now := ls.time.Now()
	if !counted {
		ll.count(now, n, ls.opts.Duration)
	}
	l := ll.cur
	if l == nil || !now.Before(l.until) || l.left < n {
		ll.mu.Unlock()
		return Result{}, false
	}
	l.left -= n
	l.handed += n
	if l.left == 0 {
		l.emptied = now
	}
	res := l.result(now)
	ll.mu.Unlock()
	return res, true
}

// result is the Result of a local grant from l at now. Remaining is what
// l still holds plus what Redis had left when it granted l: a figure as of
// the lease's reply (at most Duration old), not a fresh count. ResetAfter
// is the reply's, counted down. Call with the lane's mu held.
func (l *lease) result(now time.Time) Result {
	return Result{
		Granted:    true,
		Limit:      l.limit,
		Interval:   l.interval,
		Remaining:  l.left + max(l.redisLeft, 0),
		ResetAfter: max(l.reset-now.Sub(l.repliedAt), 0),
	}
}

// refill puts up to n released permits back into lim's live lease, at
// most what it handed out, and returns how many it took: Release gives
// those back without a Redis call (the lease's record still counts them;
// they are handed out again before the deadline or given back at its end).
// It also returns the record of a lease that has not ended (nil when
// none): the rest of the release must leave it alone, or the lease would
// hand out, or give back by name, permits its record no longer holds.
func (ls *leasing) refill(lim Limiter, n int64) (int64, []byte) {
	if _, ok := ls.m.Load(lim.LaneKey()); !ok {
		return 0, nil
	}
	ll := ls.lane(lim)
	defer ll.mu.Unlock()
	l := ll.cur
	if l == nil || l.ended {
		return 0, nil
	}
	if !ls.time.Now().Before(l.until) {
		return 0, l.member
	}
	x := min(n, l.handed)
	l.left += x
	l.handed -= x
	return x, l.member
}

// plan says whether the lane's next call, for need permits, takes a lease,
// and how many permits it asks in all (need plus the lease): only under
// steady demand (MinDemand within about a Duration), not while another
// lease call of the lane awaits its reply (an abandoned one), not while
// this Client's SetRate, UpdateRate, Delete or Expire* of the limiter is
// in progress, not while quiet after a declined lease, and not when the
// last figures seen leave no room for more than need. Call with ll.mu
// held.
func (ll *leaseLane) plan(now time.Time, need int64, o LeaseOptions, share int64) (int64, bool) {
	if ll.calling || ll.dropping > 0 || now.Before(ll.quiet) || need > MaxPermits-2 {
		return 0, false
	}
	d := ll.demand(now, o.Duration)
	if d < o.MinDemand {
		return 0, false
	}
	if ll.known && (ll.value-leaseFloor(ll.rate, share) < need+2 || ll.interval < minLeaseInterval) {
		// lease.lua's rule on the last figures seen: a lease that would get
		// nothing beyond the batch is not asked for. Nor one whose Duration
		// (at most a quarter of the interval) would be under 1 ms.
		return 0, false
	}
	size := ll.next
	if size == 0 {
		size = d + d/4
	}
	size = min(max(size, 2), o.MaxPermits)
	return min(need+size, MaxPermits), true
}

// leaseFloor is lease.lua's floor: the value below which no lease is
// granted, rate − ⌊rate × share / 10^6⌋, in the same float64 arithmetic
// as Lua's.
func leaseFloor(rate, share int64) int64 {
	return rate - int64(math.Floor(float64(rate)*float64(share)/ShareScale))
}

// sized sets the next lease's size from how l was used: about 1.25 × the
// permits handed out per Duration, between half and twice l's size and
// within [2, MaxPermits]. Call with ll.mu held.
func (ll *leaseLane) sized(l *lease, o LeaseOptions, now time.Time) {
	held := l.until.Sub(l.sentAt)
	switch {
	case !l.emptied.IsZero():
		held = l.emptied.Sub(l.sentAt)
	case now.Before(l.until):
		held = now.Sub(l.sentAt)
	}
	held = max(held, time.Millisecond)
	perD := float64(max(l.handed, 0)) * float64(o.Duration) / float64(held)
	next := int64(math.Ceil(1.25 * perD))
	ll.next = min(max(next, l.total/2, 2), max(2*l.total, 2), o.MaxPermits)
}
