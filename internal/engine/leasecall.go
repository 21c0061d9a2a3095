package engine

import (
	"context"
	"time"
)

// The lease call (lease.go): a lane's batch and a lease in one script call,
// lua/lease.lua.
//
//	serve (lane.go) ── not strict, leases on ──► serveLease:
//	  1. requests a live lease holds (they queued while the last call flew)
//	     are answered from it;
//	  2. plan: steady demand, not quiet, room by the last figures seen?
//	     yes ─► lease.lua: need = the batch's permits, want = need + size;
//	            the replaced lease's rest is given back in the same call
//	            granted >= need: install the lease, answer the batch
//	            granted == 0: quiet for Duration; the batch goes on to
//	            acquire.lua
//	     no  ─► acquire.lua as without leases

// serveLease serves a lane's batch of lim with a lease call when leasing
// fits (steady demand, headroom): the batch's permits and a lease in one
// record. It returns the requests left to decide and false when it made
// no call or the script declined the lease (no headroom, no value key):
// the caller decides them as without leases. Requests of the batch that a
// live lease holds are answered from it first, without a call.
func (e *Engine) serveLease(lim Limiter, batch []*request, leave context.Context) ([]*request, bool) {
	ls := e.leases
	rest := make([]*request, 0, len(batch))
	var need, left int64
	for _, q := range batch {
		if q.state.Load() == reqGone {
			continue // answered already (lane.go, await)
		}
		if res, ok := ls.take(lim, q.n, true); ok {
			if !q.answer(answer{v: Verdict{Res: res}, leased: true}, e.time) {
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
		e.giveBack(lim, left)
	}
	if len(rest) == 0 {
		return nil, true
	}
	if !ls.work.begin() {
		return rest, false // closed
	}
	defer ls.work.done()
	ll := ls.lane(lim)
	now := e.time.Now()
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
	r := e.callLease(ctx, leave, ll, need, want, prev, unused)
	if prev != nil && !r.abandoned {
		e.replaced(prev, unused, r)
	}
	switch {
	case r.abandoned:
		// calling stays set until the reply comes (callLease): no other
		// lease call of the lane meanwhile.
		for _, q := range rest {
			q.answer(answer{err: r.Err, roundTrip: r.RoundTrip, batch: len(rest)}, e.time)
		}
		return nil, true
	case r.Denied && r.Granted == 0:
		// The user may run acquire.lua but not lease.lua's extra commands
		// (ZSCORE, ZREM): nothing was sent or written. Quiet for a
		// Duration, and the batch goes on to acquire.lua.
		ls.idle(ll, r, true)
		return rest, false
	case r.Err != nil && !r.AckShort:
		ls.idle(ll, r, false)
		for _, q := range rest {
			q.answer(answer{err: r.Err, roundTrip: r.RoundTrip, batch: len(rest)}, e.time)
		}
		return nil, true
	case r.Granted == 0:
		ls.idle(ll, r, true)
		return rest, false
	case r.Err != nil: // a replica ack fell short: fail closed, as acquire does
		ls.idle(ll, r, false)
		for _, q := range rest {
			q.answer(answer{v: Verdict{Err: r.Err}, roundTrip: r.RoundTrip, batch: len(rest)}, e.time)
		}
		l := e.newLease(ll, r, need)
		e.refuse(l)
		return nil, true
	}
	l := e.newLease(ll, r, need)
	res := l.result(r.RepliedAt) // before install: then other callers take from l
	e.install(l, gen)
	var gone int64
	for _, q := range rest {
		if !q.answer(answer{v: Verdict{Res: res}, roundTrip: r.RoundTrip, batch: len(rest)}, e.time) {
			gone += q.n
		}
	}
	if gone > 0 {
		// Granted to callers that had gone: into the lease, or released
		// (Limiter.Release tries the lease first), as serve does.
		e.giveBack(lim, gone)
	}
	return nil, true
}

// idle notes that ll's lease call ended without a lease: no call is in
// flight, and after a declined lease (declined) the lane stays quiet for
// Duration and keeps the reply's figures.
func (ls *leasing) idle(ll *leaseLane, r LeaseReply, declined bool) {
	ll.mu.Lock()
	ll.calling = false
	if declined {
		if r.Stamp != 0 { // 0: no value key, and the reply has no value
			ll.observe(r.Rate, r.Value, r.Interval)
		}
		ll.quiet = ls.time.Now().Add(ls.opts.Duration)
	}
	ll.mu.Unlock()
}

// replaced completes the end of prev (counted by ls.end), whose unused
// permits the lease call r gave back: it reports it, or sends the return
// again (it is idempotent) when the call failed before the script ran or
// without saying.
func (e *Engine) replaced(prev *lease, unused int64, r LeaseReply) {
	why := LeaseReplaced
	if unused == 0 {
		why = LeaseExhausted
	}
	if unused > 0 && r.Err != nil && !r.AckShort && r.Returned == 0 {
		// r.Returned > 0: a run that collided applied the return (takeLease).
		e.finish(prev, unused, why)
		return
	}
	e.leaseEnded(prev, why, r.Returned, unused-r.Returned, nil)
	e.leases.work.done()
}

// newLease makes the lease of reply r, whose first need permits went to
// the batch's callers.
func (e *Engine) newLease(ll *leaseLane, r LeaseReply, need int64) *lease {
	d := min(e.leases.opts.Duration, r.Interval/4) // under 1 ms: returned at once (install)
	return &lease{
		ll: ll, member: r.Member, total: r.Granted, left: r.Granted - need, handed: need,
		sentAt: r.SentAt, until: r.SentAt.Add(d), stamp: r.Stamp,
		limit: r.Rate, interval: r.Interval, redisLeft: r.Value, reset: r.Reset, repliedAt: r.RepliedAt,
	}
}

// install makes l the live lease of its lane and arms its deadline. A
// lease that is past its deadline already, or whose call this Client's
// SetRate, UpdateRate, Delete (a new gen) or Close overtook, is not
// handed out: its rest is given back at once.
func (e *Engine) install(l *lease, gen uint64) {
	ls, ll := e.leases, l.ll
	ll.mu.Lock()
	ll.calling = false
	ll.observe(l.limit, l.redisLeft, l.interval)
	now := e.time.Now()
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
		e.finish(l, u, why)
		return
	}
	old := ll.cur // none: the lane's lease calls are serial and end it first
	ou := ls.end(ll, old, now)
	ll.cur = l
	l.timer = e.time.AfterFunc(l.until.Sub(now), func() { e.expire(l) })
	ll.mu.Unlock()
	if old != nil {
		e.finish(old, ou, LeaseReplaced)
	}
}

// refuse gives back every permit of l beyond its call's callers, none of
// which was handed out (a short replica acknowledgement, an abandoned
// call).
func (e *Engine) refuse(l *lease) {
	ll := l.ll
	ll.mu.Lock()
	l.refused = true
	u := e.leases.end(ll, l, e.time.Now())
	ll.mu.Unlock()
	e.finish(l, u, LeaseRefused)
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
func (ls *leasing) observeBatch(lim Limiter, b Reply) {
	if b.Err != nil || len(b.Verdicts) == 0 {
		return
	}
	last := b.Verdicts[len(b.Verdicts)-1].Res
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
func (e *Engine) callLease(ctx, leave context.Context, ll *leaseLane, need, want int64, prev *lease, unused int64) LeaseReply {
	r, late, err := runOrLeave(ctx, leave, func() LeaseReply {
		call := LeaseCall{Need: need, Want: want, Share: e.leases.share}
		if prev != nil && unused > 0 {
			call.Prev, call.Unused = prev.member, unused
		}
		return ll.lim.Lease(ctx, call)
	})
	if late == nil {
		return r
	}
	e.leases.work.add() // the reply's handling below
	go func() {
		defer e.leases.work.done()
		r := <-late
		ll.mu.Lock()
		ll.calling = false // now the next lease call may be planned
		ll.mu.Unlock()
		if prev != nil {
			e.replaced(prev, unused, r)
		}
		if r.Granted > 0 {
			l := e.newLease(ll, r, 0)
			e.refuse(l)
		}
	}()
	return LeaseReply{Err: err, abandoned: true}
}
