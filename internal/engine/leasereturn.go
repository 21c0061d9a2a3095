package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The ends of leases (lease.go) and the return of their unused permits
// (lua/lease_end.lua, idempotent), and Client.Close.

// leaseReturnTimeout bounds a return sent in the background.
const leaseReturnTimeout = 5 * time.Second

// leaseReturnPause is the pause before a return whose outcome is unknown is
// sent again: a broken connection is then likely replaced.
const leaseReturnPause = 50 * time.Millisecond

// leaseWork counts a Client's lease calls and returns in flight, so that
// Close can wait for them. A lease call begins only before Close; a return
// is counted by whoever ends the lease, under the lane's lock, before the
// lock is released, so that Close, which ends every live lease under the
// same locks after closing, never misses one.
type leaseWork struct {
	mu     sync.Mutex
	closed bool
	n      int
	zero   chan struct{} // closed when n drops to 0; nil while n == 0
}

// begin counts a lease call, unless Close was called (false).
func (w *leaseWork) begin() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.addLocked()
	return true
}

// add counts a return.
func (w *leaseWork) add() {
	w.mu.Lock()
	w.addLocked()
	w.mu.Unlock()
}

func (w *leaseWork) addLocked() {
	if w.n == 0 {
		w.zero = make(chan struct{})
	}
	w.n++
}

// done ends what begin or add counted.
func (w *leaseWork) done() {
	w.mu.Lock()
	if w.n--; w.n == 0 {
		close(w.zero)
		w.zero = nil
	}
	w.mu.Unlock()
}

// wait returns nil once nothing is in flight, or ctx's error.
func (w *leaseWork) wait(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.n == 0 {
			w.mu.Unlock()
			return nil
		}
		ch := w.zero
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// end ends l, if it has not ended, and returns its unused permits (none
// for nil). The lease's end (its return and its event) is counted as work
// in flight: the caller completes it with finish after unlocking, or with
// replaced after the lease call that gave the rest back. Call with ll.mu
// held.
func (ls *leasing) end(ll *leaseLane, l *lease, now time.Time) int64 {
	if l == nil || l.ended {
		return 0
	}
	l.ended = true
	l.endedAt = now
	if l.timer != nil {
		l.timer.Stop()
	}
	if ll.cur == l {
		ll.cur = nil
	}
	if !l.refused {
		ll.sized(l, ls.opts, now)
	}
	u := l.left
	l.left = 0
	ls.work.add()
	return u
}

// expire ends l at its deadline and gives back what it did not hand out.
func (e *Engine) expire(l *lease) {
	ll := l.ll
	ll.mu.Lock()
	if l.ended {
		ll.mu.Unlock()
		return
	}
	why := LeaseExpired
	if l.left == 0 {
		why = LeaseExhausted
	}
	u := e.leases.end(ll, l, e.time.Now())
	ll.mu.Unlock()
	e.finish(l, u, why)
}

// finish completes the end of l, which end counted: it gives back the u
// unused permits in the background, when there are some, and reports l's
// end to Hooks.Lease.
func (e *Engine) finish(l *lease, u int64, why LeaseEnd) {
	if u <= 0 {
		e.leaseEnded(l, why, 0, 0, nil)
		e.leases.work.done()
		return
	}
	go func() {
		defer e.leases.work.done()
		ctx, cancel := context.WithTimeout(context.Background(), leaseReturnTimeout)
		defer cancel()
		given, err := e.giveBackLease(ctx, l, u)
		e.leaseEnded(l, why, given, u-given, err)
	}()
}

// giveBackLease gives back u permits of l's record (idempotent). A
// return whose outcome is unknown (no reply: a network error) is sent
// once more, after leaseReturnPause.
func (e *Engine) giveBackLease(ctx context.Context, l *lease, u int64) (int64, error) {
	var r ReturnReply
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			t := e.time.NewTimer(leaseReturnPause)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return 0, r.Err
			}
		}
		r = l.ll.lim.ReturnLease(ctx, l.member, u)
		if r.Err == nil || ctx.Err() != nil || !r.Unknown {
			break
		}
	}
	if r.Given < 0 || r.Given > u {
		r.Given = 0 // a reply the script cannot give: nothing counted as returned
	}
	return r.Given, r.Err
}

// leaseEnded reports l's end to Hooks.Lease.
func (e *Engine) leaseEnded(l *lease, why LeaseEnd, returned, kept int64, err error) {
	h := e.onLease
	if h == nil {
		return
	}
	h(LeaseEvent{
		Limiter: l.ll.lim.Name(), Permits: l.total, HandedOut: l.handed, Returned: returned, Kept: kept,
		Stamp: time.UnixMilli(l.stamp), Held: l.endedAt.Sub(l.sentAt), End: why, Err: err,
	})
}

// DropLease ends lim's live lease before this Client's SetRate,
// UpdateRate, Delete or Expire* of it (no permit of it is handed out
// after the call), and returns a function, to run after the call, that
// gives back its unused permits (a no-op in Redis when the call deleted the
// record). From now until that function runs the lane takes no lease
// (dropping): a lease call planned before is refused at install (its gen
// is old), and none is planned meanwhile, so that no lease whose record the
// call may delete is handed out. The rate is forgotten: the next plan
// learns it again. The lane is made if there is none, so that the calls in
// between see dropping.
func (e *Engine) DropLease(lim Limiter) func() {
	ls := e.leases
	if ls == nil {
		return func() {}
	}
	ll := ls.lane(lim)
	ll.dropping++
	ll.gen++
	ll.known = false
	l := ll.cur
	u := ls.end(ll, l, e.time.Now())
	ll.mu.Unlock()
	return func() {
		ll.mu.Lock()
		ll.dropping--
		ll.gen++
		ll.known = false
		l2 := ll.cur // none: nothing installs while dropping
		u2 := ls.end(ll, l2, e.time.Now())
		ll.mu.Unlock()
		if l != nil {
			e.finish(l, u, LeaseDropped)
		}
		if l2 != nil {
			e.finish(l2, u2, LeaseDropped)
		}
	}
}

// Close ends every live lease of the Engine and gives back
// their unused permits, one script call per limiter holding a lease, and
// waits until those and every other lease call or return in flight have
// ended, or until ctx is done. From then on the Client takes no lease:
// every acquisition goes to Redis, as without WithLeases. It does not
// close the Redis client, which the caller owns; the Client stays usable,
// and Close may be called again. Without leases it does nothing and
// returns nil. It returns the returns' errors (each naming its limiter)
// and ctx's error when ctx ended the wait, joined; permits whose return
// failed come back when their record expires.
func (e *Engine) Close(ctx context.Context) error {
	ls := e.leases
	if ls == nil {
		return nil
	}
	ls.work.mu.Lock()
	ls.work.closed = true
	ls.closed.Store(true)
	ls.work.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	ls.m.Range(func(_, v any) bool {
		ll := v.(*leaseLane)
		ll.mu.Lock()
		l := ll.cur
		u := ls.end(ll, l, e.time.Now())
		ll.mu.Unlock()
		switch {
		case l == nil:
		case u == 0:
			e.finish(l, 0, LeaseClosed)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ls.work.done()
				given, err := e.giveBackLease(ctx, l, u)
				e.leaseEnded(l, LeaseClosed, given, u-given, err)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		return true
	})
	wg.Wait()
	if err := ls.work.wait(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
