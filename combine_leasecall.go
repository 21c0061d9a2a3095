package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The lease call (lease.go): a lane's batch and a lease in one script call,
// lua/lease.lua.
//
//	serve (combine_lane.go) ── not strict, leases on ──► serveLease:
//	  1. requests a live lease holds (they queued while the last call flew)
//	     are answered from it;
//	  2. plan: steady demand, not quiet, room by the last figures seen?
//	     yes ─► lease.lua: need = the batch's permits, want = need + size;
//	            the replaced lease's rest is given back in the same call
//	            granted >= need: install the lease, answer the batch
//	            granted == 0: quiet for Duration; the batch goes on to
//	            acquire.lua
//	     no  ─► acquire.lua as without leases

// leaseReply is what one lease call gave.
type leaseReply struct {
	granted, value, rate, returned, stamp int64
	interval, reset                       time.Duration
	member                                []byte
	sentAt, repliedAt                     time.Time
	roundTrip                             time.Duration
	err                                   error
	abandoned                             bool // callLease returned before the reply
}

// ackErr returns r's error when it is a short replica acknowledgement of a
// lease that Redis granted.
func (r leaseReply) ackErr() bool { return r.err != nil && errors.Is(r.err, ErrReplicaAck) }

// serveLease serves a lane's batch of lim with a lease call when leasing
// fits (steady demand, headroom): the batch's permits and a lease in one
// record. It returns the requests left to decide and false when it made
// no call or the script declined the lease (no headroom, no value key):
// the caller decides them as without leases. Requests of the batch that a
// live lease holds are answered from it first, without a call.
func (c *Client) serveLease(lim *Limiter, batch []*request, leave context.Context) ([]*request, bool) {
	ls := c.leases
	rest := make([]*request, 0, len(batch))
	var need, left int64
	for _, q := range batch {
		if q.state.Load() == reqGone {
			continue // answered already (combine_lane.go, await)
		}
		if res, ok := ls.take(lim, q.n, true); ok {
			if !q.answer(answer{v: verdict{res: res}, leased: true}) {
				left += q.n
			}
			continue
		}
		rest = append(rest, q)
		need += q.n
	}
	if left > 0 {
		// Handed out to callers that had gone: back into the lease, or, if
		// it ended meanwhile, released (Limiter.Release tries the lease
		// first), as below.
		c.giveBack(lim, left)
	}
	if len(rest) == 0 {
		return nil, true
	}
	if !ls.work.begin() {
		return rest, false // closed
	}
	defer ls.work.done()
	ll := ls.lane(lim)
	now := time.Now()
	want, ok := ll.plan(now, need, ls.opts, ls.share)
	if !ok {
		ll.mu.Unlock()
		return rest, false
	}
	prev := ll.cur
	unused := ls.end(ll, prev, now) // given back by this call
	gen := ll.gen
	ll.calling = true
	ll.mu.Unlock()

	ctx, cancel := batchContext(rest)
	defer cancel()
	r := c.callLease(ctx, leave, ll, need, want, prev, unused)
	if prev != nil && !r.abandoned {
		c.replaced(prev, unused, r)
	}
	switch {
	case r.abandoned:
		// calling stays set until the reply comes (callLease): no other
		// lease call of the lane meanwhile.
		for _, q := range rest {
			q.answer(answer{err: r.err, roundTrip: r.roundTrip, batch: len(rest)})
		}
		return nil, true
	case errors.Is(r.err, ErrPermissionDenied) && r.granted == 0:
		// The user may run acquire.lua but not lease.lua's extra commands
		// (ZSCORE, ZREM): nothing was sent or written. Quiet for a
		// Duration, and the batch goes on to acquire.lua.
		ls.idle(ll, r, true)
		return rest, false
	case r.err != nil && !r.ackErr():
		ls.idle(ll, r, false)
		for _, q := range rest {
			q.answer(answer{err: r.err, roundTrip: r.roundTrip, batch: len(rest)})
		}
		return nil, true
	case r.granted == 0:
		ls.idle(ll, r, true)
		return rest, false
	case r.err != nil: // a replica ack fell short: fail closed, as acquire does
		ls.idle(ll, r, false)
		for _, q := range rest {
			q.answer(answer{v: verdict{err: r.err}, roundTrip: r.roundTrip, batch: len(rest)})
		}
		l := c.newLease(ll, r, need)
		c.refuse(l)
		return nil, true
	}
	l := c.newLease(ll, r, need)
	res := l.result(r.repliedAt) // before install: then other callers take from l
	c.install(l, gen)
	var gone int64
	for _, q := range rest {
		if !q.answer(answer{v: verdict{res: res}, roundTrip: r.roundTrip, batch: len(rest)}) {
			gone += q.n
		}
	}
	if gone > 0 {
		// Granted to callers that had gone: into the lease, or released
		// (Limiter.Release tries the lease first), as serve does.
		c.giveBack(lim, gone)
	}
	return nil, true
}

// idle notes that ll's lease call ended without a lease: no call is in
// flight, and after a declined lease (declined) the lane stays quiet for
// Duration and keeps the reply's figures.
func (ls *leasing) idle(ll *leaseLane, r leaseReply, declined bool) {
	ll.mu.Lock()
	ll.calling = false
	if declined {
		if r.stamp != 0 { // 0: no value key, and the reply has no value
			ll.observe(r.rate, r.value, r.interval)
		}
		ll.quiet = time.Now().Add(ls.opts.Duration)
	}
	ll.mu.Unlock()
}

// replaced completes the end of prev (counted by ls.end), whose unused
// permits the lease call r gave back: it reports it, or sends the return
// again (it is idempotent) when the call failed before the script ran or
// without saying.
func (c *Client) replaced(prev *lease, unused int64, r leaseReply) {
	why := LeaseReplaced
	if unused == 0 {
		why = LeaseExhausted
	}
	if unused > 0 && r.err != nil && !r.ackErr() && r.returned == 0 {
		// r.returned > 0: a run that collided applied the return (takeLease).
		c.finish(prev, unused, why)
		return
	}
	c.leaseEnded(prev, why, r.returned, unused-r.returned, nil)
	c.leases.work.done()
}

// newLease makes the lease of reply r, whose first need permits went to
// the batch's callers.
func (c *Client) newLease(ll *leaseLane, r leaseReply, need int64) *lease {
	d := min(c.leases.opts.Duration, r.interval/4) // under 1 ms: returned at once (install)
	return &lease{
		ll: ll, member: r.member, total: r.granted, left: r.granted - need, handed: need,
		sentAt: r.sentAt, until: r.sentAt.Add(d), stamp: r.stamp,
		limit: r.rate, interval: r.interval, redisLeft: r.value, reset: r.reset, repliedAt: r.repliedAt,
	}
}

// install makes l the live lease of its lane and arms its deadline. A
// lease that is past its deadline already, or whose call this Client's
// SetRate, UpdateRate, Delete (a new gen) or Close overtook, is not
// handed out: its rest is given back at once.
func (c *Client) install(l *lease, gen uint64) {
	ls, ll := c.leases, l.ll
	ll.mu.Lock()
	ll.calling = false
	ll.observe(l.limit, l.redisLeft, l.interval)
	now := time.Now()
	var why LeaseEnd
	switch {
	case l.left == 0:
		why = LeaseExhausted
		l.emptied = now
	case gen != ll.gen || ll.dropping > 0 || ls.closed.Load():
		why = LeaseRefused
		l.refused = true
	case !now.Before(l.until):
		why = LeaseExpired
	}
	if why != 0 {
		u := ls.end(ll, l, now)
		ll.mu.Unlock()
		c.finish(l, u, why)
		return
	}
	old := ll.cur // none: the lane's lease calls are serial and end it first
	ou := ls.end(ll, old, now)
	ll.cur = l
	l.timer = time.AfterFunc(l.until.Sub(now), func() { c.expire(l) })
	ll.mu.Unlock()
	if old != nil {
		c.finish(old, ou, LeaseReplaced)
	}
}

// refuse gives back every permit of l beyond its call's callers, none of
// which was handed out (a short replica acknowledgement, an abandoned
// call).
func (c *Client) refuse(l *lease) {
	ll := l.ll
	ll.mu.Lock()
	l.refused = true
	u := c.leases.end(ll, l, time.Now())
	ll.mu.Unlock()
	c.finish(l, u, LeaseRefused)
}

// observe notes a reply's figures. Call with ll.mu held.
func (ll *leaseLane) observe(rate, value int64, interval time.Duration) {
	if rate > 0 {
		ll.rate, ll.value, ll.interval, ll.known = rate, value, interval, true
	}
}

// observeBatch notes what a lane call without a lease said about lim (the
// table form carries the rate; the single form only the value after a
// grant), for the next plan.
func (ls *leasing) observeBatch(lim *Limiter, b batchReply) {
	if b.err != nil || len(b.verdicts) == 0 {
		return
	}
	last := b.verdicts[len(b.verdicts)-1].res
	if last.Limit <= 0 && !last.Granted {
		return
	}
	ll := ls.lane(lim)
	switch {
	case last.Limit > 0:
		ll.observe(last.Limit, last.Remaining, last.Interval)
	case ll.known:
		ll.value = last.Remaining
	}
	ll.mu.Unlock()
}

// callLease makes the lease call and returns by ctx's deadline, or when
// leave (if not nil) is done, as Client.call does. What an abandoned call
// granted is given back when its reply comes (the whole record: none of it
// was handed out), and the replaced lease's end is settled then.
func (c *Client) callLease(ctx, leave context.Context, ll *leaseLane, need, want int64, prev *lease, unused int64) leaseReply {
	r, late, err := runOrLeave(ctx, leave, func() leaseReply {
		return ll.lim.takeLease(ctx, need, want, c.leases.share, prev, unused)
	})
	if late == nil {
		return r
	}
	c.leases.work.add() // the reply's handling below
	go func() {
		defer c.leases.work.done()
		r := <-late
		ll.mu.Lock()
		ll.calling = false // now the next lease call may be planned
		ll.mu.Unlock()
		if prev != nil {
			c.replaced(prev, unused, r)
		}
		if r.granted > 0 {
			l := c.newLease(ll, r, 0)
			c.refuse(l)
		}
	}()
	return leaseReply{err: err, abandoned: true}
}

// takeLease runs lease.lua, again on a record collision with a fresh
// record (the return, applied by the colliding run, is not sent again).
func (r *Limiter) takeLease(ctx context.Context, need, want, share int64, prev *lease, unused int64) leaseReply {
	var prevMember []byte
	if prev != nil && unused > 0 {
		prevMember = prev.member
	} else {
		unused = 0
	}
	c := r.c
	var returned int64
	for i := 0; i < memberRetries; i++ {
		prefix := newPrefix(c.format, c.tag)
		out := leaseReply{sentAt: time.Now(), returned: returned}
		v, err := r.evalLease(ctx, c.stamp(), prefix, need, want, share, prevMember, unused)
		out.repliedAt = time.Now()
		out.roundTrip = out.repliedAt.Sub(out.sentAt)
		var ackErr *ReplicaAckError
		if err != nil && (v == nil || !errors.As(err, &ackErr)) {
			out.err = err
			return out
		}
		nums, ok := ints(v, 7)
		if !ok || nums[0] < -1 || nums[0] > 0 && (nums[0] < need || nums[0] > want || nums[0] > MaxPermits) ||
			nums[0] != 0 && (nums[2] <= 0 || nums[3] <= 0) || nums[6] < 0 || nums[6] > unused {
			out.err = r.wrap(fmt.Errorf("%w: lease script replied %v", ErrCorruptState, v))
			return out
		}
		returned += nums[6]
		if nums[0] == -1 {
			prevMember, unused = nil, 0 // applied
			continue
		}
		out.granted, out.value, out.rate = nums[0], nums[1], nums[2]
		out.interval, out.reset = millis(nums[3]), millis(nums[4])
		out.stamp, out.returned = nums[5], returned
		if out.granted > 0 {
			g := uint32(out.granted)
			out.member = append(prefix, byte(g), byte(g>>8), byte(g>>16), byte(g>>24))
		}
		if ackErr != nil {
			out.err = r.wrap(ackErr)
		}
		return out
	}
	return leaseReply{returned: returned,
		err: r.wrap(fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries))}
}

// evalLease runs lease.lua on the limiter's five keys; on a Client made
// with WithReplicaAck a lease also waits for the replicas.
func (r *Limiter) evalLease(ctx context.Context, args ...any) (any, error) {
	if err := r.c.permitted(ctx, r.keyList, "acquire", needLease); err != nil {
		return nil, r.result(err)
	}
	var v any
	var err error
	if ack, ok := r.c.replicaAck(); ok {
		v, err = r.evalAckIf(ctx, scriptLease, ack, leaseGranted, r.keyList, args...)
	} else {
		v, err = scriptLease.Run(ctx, r.c.rdb, r.keyList, args...).Result()
	}
	return v, r.result(err)
}

// leaseGranted reports whether a lease.lua reply granted anything: what a
// replica must acknowledge.
func leaseGranted(reply any) bool {
	t, ok := reply.([]any)
	if !ok || len(t) == 0 {
		return false
	}
	g, _ := t[0].(int64)
	return g > 0
}
