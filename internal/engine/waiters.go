package engine

import (
	"context"
	"fmt"
	"time"
)

// Blocked callers of one limiter wait in their lane's FIFO, not each on a
// timer of its own. One timer per lane fires when the head waiter's hint
// has passed; the next script call then takes as many waiters from the
// head as the batch holds, and the script grants them in order until the
// first one it must refuse: no waiter behind a refused one is granted, so
// a large request at the head is never starved by small ones behind it.
// The refused go back to the head, in order, and the timer is set to the
// new hint of the head. A new blocking call joins the tail without a Redis
// call while waiters are queued. Non-blocking calls (Allow, TryAcquire) do
// not queue: they are decided in arrival order with other fresh requests
// and may take permits that a waiter is waiting for.

// waitQueued acquires n permits for a blocking call through the lane: until
// granted, until the hint passes limit (false, nil) or ctx's deadline (an
// error), or until ctx is done. A zero limit means none.
func (e *Engine) waitQueued(ctx context.Context, p Target, n int64, limit time.Time, d *Outcome) (granted bool, err error) {
	if _, ok := p.(Limiter); ok && e.foreign > 0 {
		e.blocking(p.LaneKey(), 1, 0)
		defer func() { e.blocking(p.LaneKey(), -1, n*int64(b2i(granted))) }()
	}
	q := newWaiter(ctx, p, n, limit)
	e.lanes.mu.Lock()
	l := e.lanes.get(p.LaneKey())
	if at, ok := e.deferred(l, q); ok {
		e.lanes.mu.Unlock()
		if err := e.sleepUntil(ctx, at, d); err != nil {
			return false, err
		}
		l = e.rejoin(q)
	} else if done, err := e.enter(l, q); done {
		return false, err
	}
	for {
		a := e.await(l, q)
		d.Waited += a.waited
		if a.batch > 0 {
			d.RoundTrip, d.Batch = a.roundTrip, a.batch
		}
		d.Leased = a.leased
		if a.err != nil || a.v.Err != nil || a.v.Res.Granted {
			return a.v.Res.Granted, firstErr(a.err, a.v.Err)
		}
		d.RetryAfter = a.v.Res.RetryAfter
		now := e.time.Now()
		wake := now.Add(a.v.Res.RetryAfter)
		if !q.fits(wake) {
			return false, nil
		}
		if err := q.beyond(wake, now); err != nil {
			return false, err
		}
		q = newWaiter(ctx, p, n, limit)
		e.lanes.mu.Lock()
		l = e.lanes.get(p.LaneKey())
		at, own := e.refusedWake(l, q, wake, a.v.Res.Interval, a.v.Res.Limit)
		if own {
			e.lanes.mu.Unlock()
			if err := e.sleepUntil(ctx, at, d); err != nil {
				return false, err
			}
			l = e.rejoin(q)
			continue
		}
		q.queued = e.time.Now()
		l.waiting = append(l.waiting, q)
		if len(l.waiting) == 1 && l.flying == 0 {
			e.arm(l, at)
		}
		e.lanes.mu.Unlock()
	}
}

// newWaiter returns the request of a blocking call for n permits of p,
// with its limit (zero: none).
func newWaiter(ctx context.Context, p Target, n int64, limit time.Time) *request {
	q := newRequest(ctx, p, n, false)
	q.blocking, q.limit = true, limit
	return q
}

// sleepUntil waits until at or until ctx is done (its error), and counts
// the wait in d.Waited.
func (e *Engine) sleepUntil(ctx context.Context, at time.Time, d *Outcome) error {
	start := e.time.Now()
	defer func() { d.Waited += e.time.Now().Sub(start) }()
	t := e.time.NewTimer(at.Sub(start))
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rejoin puts q, a waiter that waited on its own, at the tail of its
// lane's waiters and has them served now; it returns the lane.
func (e *Engine) rejoin(q *request) *lane {
	e.lanes.mu.Lock()
	l := e.lanes.get(q.p.LaneKey())
	q.queued = e.time.Now()
	l.waiting = append(l.waiting, q)
	l.due = true
	if l.busy {
		e.lanes.mu.Unlock()
		return l
	}
	batch, strict := e.next(l)
	if batch == nil { // nothing to send (take skips only callers that left)
		e.lanes.dropIfIdle(l)
		e.lanes.mu.Unlock()
		return l
	}
	l.busy = true
	e.lanes.mu.Unlock()
	e.start(l, batch, strict)
	return l
}

// enter queues q, a new blocking call, in lane l: behind its waiters, in
// its pending calls, or sent now. It reports done, with the call's error,
// when q's limit (nil error) or deadline comes before the waiters' next
// wake. Call with mu held; it unlocks.
func (e *Engine) enter(l *lane, q *request) (bool, error) {
	switch {
	case len(l.waiting) > 0 || l.flying > 0:
		// Behind the queued waiters, who are served first.
		now := e.time.Now()
		if at := l.wakeAt; !at.IsZero() && (!q.fits(at) || q.beyond(at, now) != nil) {
			e.lanes.mu.Unlock()
			if !q.fits(at) {
				return true, nil // TryAcquireTimeout's own limit comes first
			}
			return true, q.beyond(at, now)
		}
		q.queued = now
		l.waiting = append(l.waiting, q)
		e.lanes.mu.Unlock()
	case l.busy:
		l.pending = append(l.pending, q)
		e.lanes.mu.Unlock()
	default:
		l.busy = true
		e.lanes.mu.Unlock()
		e.start(l, []*request{q}, false)
	}
	return false, nil
}

// fits reports whether a grant at wake is within q's limit.
func (q *request) fits(wake time.Time) bool {
	return q.limit.IsZero() || !wake.After(q.limit)
}

// beyond returns an error wrapping context.DeadlineExceeded when wake is
// past q's context deadline; the error says how long from now that is.
func (q *request) beyond(wake, now time.Time) error {
	if dl, ok := q.ctx.Deadline(); ok && wake.After(dl) {
		return fmt.Errorf("ratelimiter: waiting %v for permits would pass the context deadline: %w",
			wake.Sub(now).Round(time.Millisecond), context.DeadlineExceeded)
	}
	return nil
}

// arm sets the lane's timer to fire at wake, unless it fires earlier.
// Call with mu held.
func (e *Engine) arm(l *lane, wake time.Time) {
	if !l.wakeAt.IsZero() && !wake.Before(l.wakeAt) {
		return
	}
	l.wakeAt = wake
	d := wake.Sub(e.time.Now())
	if l.timer == nil {
		l.timer = e.time.AfterFunc(d, func() { e.fire(l) })
		return
	}
	l.timer.Reset(d)
}

// fire runs when the head waiter's hint has passed: the lane's next script
// call serves the waiters.
func (e *Engine) fire(l *lane) {
	e.lanes.mu.Lock()
	l.wakeAt = time.Time{}
	if len(l.waiting) == 0 {
		e.lanes.dropIfIdle(l)
		e.lanes.mu.Unlock()
		return
	}
	l.due = true
	if l.busy {
		e.lanes.mu.Unlock() // run takes them next
		return
	}
	batch, strict := e.next(l)
	if batch == nil {
		e.lanes.dropIfIdle(l)
		e.lanes.mu.Unlock()
		return
	}
	l.busy = true
	e.lanes.mu.Unlock()
	e.run(l, batch, strict, false)
}

// requeue puts the waiters that a strict call refused back at the head, in
// order, and sets the timer to the head's new hint. A waiter whose own
// hint (never earlier than the head's) passes its limit or deadline is
// answered now, so that it returns at once.
func (e *Engine) requeue(l *lane, sent int, refused []*request, hints []time.Duration, b Reply) {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	l.flying -= sent
	if len(refused) == 0 {
		// Nobody ahead was refused: those who joined meanwhile go next.
		l.due = len(l.waiting) > 0
		return
	}
	now := e.time.Now()
	head := now.Add(hints[0])
	keep := make([]*request, 0, len(refused)+len(l.waiting))
	for i, q := range refused {
		wake := now.Add(max(hints[i], hints[0]))
		if q.state.Load() == reqGone {
			continue
		}
		if !q.fits(wake) || q.beyond(wake, now) != nil {
			q.answer(answer{v: Verdict{Res: Result{RetryAfter: wake.Sub(now)}}, roundTrip: b.RoundTrip, batch: sent}, e.time)
			continue
		}
		keep = append(keep, q)
	}
	l.waiting = append(keep, l.waiting...)
	l.due = len(keep) == 0 && len(l.waiting) > 0
	if len(keep) > 0 {
		l.wakeAt = time.Time{}
		interval, rate := b.window()
		at, _ := e.refusedWake(l, keep[0], head, interval, rate)
		e.arm(l, at)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
