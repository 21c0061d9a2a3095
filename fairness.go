package ratelimiter

import (
	"errors"
	"time"
)

// Fairness between clients (README, "Fairness in a mixed fleet").
// Redisson 4.x's acquire retries on its timer, which ticks every 100 ms by
// default (3.16 schedules the retry at the hint on Netty's event loop); a
// Go waiter wakes on its hint, a few ms after a permit frees, and would
// take nearly every freed permit before a Java waiter looks.
// So a Client notes the permits its own grants hold in the window (one
// mark per granting call: its clock reading and permits) and, from each
// reply that says how many are left, what the other clients hold. While
// the limiter is shared (others held permits in its window within the
// last sharedFor intervals), demand is above the rate (the last reply
// refused a request) and this Client's grants hold more of the window than
// the others' (by over 1/yieldMargin of the rate), its blocking calls yield: a waiter wakes the yield delay
// after its hint, a new blocking call waits the yield delay before it
// tries, which leaves the permits freed meanwhile to the others' retries.
// A Client alone on a limiter yields once every probeEvery yield delays
// while refused, so that a Redisson waiter that has had nothing yet gets
// a permit and is seen.

// defaultYieldDelay is WithYieldDelay's default: one tick of Redisson's
// timer and a little more, so that a Redisson retry due at the same
// expiry comes first.
const defaultYieldDelay = 110 * time.Millisecond

// maxYieldDelay bounds WithYieldDelay.
const maxYieldDelay = time.Second

// maxMarks bounds a lane's marks: when full, the two oldest merge into
// one with the later clock reading, which can only count this Client's
// permits longer than they hold.
const maxMarks = 1024

// yieldMargin: a Client yields when its grants hold more than the others'
// by over 1/yieldMargin of the rate, not at the first permit more. Chosen
// from the compatibility suite's share runs: at equality Redisson 3.16.3
// (whose retries are not on a timer tick) got 48-62% of the grants, with
// a margin of 1/8 Redisson 4.7.0 got 29-49%, with 1/16 both 39-58%.
const yieldMargin = 16

// probeEvery is how many yield delays apart a Client alone on a limiter
// yields one wake, to find waiters that its fast wakes starve.
const probeEvery = 10

// sharedFor is how many intervals a limiter counts as shared after other
// clients' permits were last seen in its window. Competing waiters tend to
// take freed permits in clumps, so the window can hold only this Client's
// permits for a while although others wait.
const sharedFor = 3

// WithYieldDelay sets how long after its wait hint a blocked caller
// (Acquire, TryAcquireTimeout) of a limiter calls Redis again while its
// Client yields on that limiter: after a refusal, while other clients
// held permits in the limiter's window within the last three intervals
// and this Client's grants hold more of the window than theirs by over
// 1/16 of the rate. A new blocking call then waits as long before it
// tries. Never past the caller's timeout, and at most half-way to its
// context deadline. The default, 110 ms (a tick of Redisson's retry timer
// and 10 ms), gives a Java service and one Go Client a fair share of a
// limiter they both wait on (README, "Fairness in a mixed fleet"). A
// Client alone on a limiter yields one wake in every 10 yield delays
// while refused, so that a starved Redisson waiter is seen. 0 turns
// yielding off: waiters always wake on the hint.
// d out of [0, 1s] makes every call fail with ErrInvalidArgument.
// Yielding needs the waiter queue: with WithMaxBatch(1) waiters never
// yield.
func WithYieldDelay(d time.Duration) Option {
	return func(c *Client) {
		if d < 0 || d > maxYieldDelay {
			c.err = errors.Join(c.err, invalid("yield delay %v out of range [0, %v]", d, maxYieldDelay))
		}
		c.yieldDelay = d
	}
}

// mark is one granting script call of a lane: its clock reading (ms) and
// the permits its record holds.
type mark struct {
	at, n int64
}

// share is what a Client knows of who holds a limiter's window; it
// outlives the limiter's lane while this Client's grants are in the
// window or the limiter counts as shared. Guarded by lanes.mu.
type share struct {
	marks    []mark
	interval int64 // ms, from the last table reply
	rate     int64
	others   int64 // permits other clients held at the last table reply
	// sharedUntil is sharedFor intervals after the last reply that showed
	// other clients' permits in the window (ms, this Client's clock).
	sharedUntil int64
	refused     bool  // the last reply refused a request
	probed      int64 // when a wake last yielded while not shared (ms)
	inWindow    int64 // this Client's permits in the window at the last note
}

// noteShare notes what one script call of a limiter (not a composite)
// granted and, from its reply, whether the lane yields. Only limiters
// that have had waiters are followed (from their first strict reply, which
// gives the interval), until this Client holds nothing in their window and
// no other client has for sharedFor intervals.
func (c *Client) noteShare(l *lane, p target, ns []int64, b batchReply, form string) {
	if _, ok := p.(*Limiter); !ok || c.yieldDelay == 0 || b.err != nil {
		return
	}
	if form != formStrict && c.lanes.followed.Load() == 0 {
		return // no share to note into, and only a strict reply starts one
	}
	granted, left, refused := replyCounts(ns, b)
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	s := c.lanes.shares[l.key]
	if s == nil {
		if form != formStrict || len(b.verdicts) == 0 || b.verdicts[0].res.Interval <= 0 {
			return
		}
		s = c.lanes.newShare(l.key, b.now)
	}
	if r := b.verdicts; len(r) > 0 && r[0].res.Interval > 0 {
		s.interval, s.rate = r[0].res.Interval.Milliseconds(), r[0].res.Limit
	}
	s.inWindow = s.note(b.now, granted)
	if s.stale(b.now) {
		c.lanes.forget(l.key)
		return
	}
	s.refused = refused
	if left >= 0 {
		s.others = max(0, s.rate-left-s.inWindow)
		if s.others > 0 {
			s.sharedUntil = b.now + sharedFor*s.interval
		}
	}
}

// following reports whether this Client follows the window of l's
// limiter (fairness), so that its calls ask for the table reply, which
// tells what is left.
func (c *Client) following(l *lane) bool {
	if c.yieldDelay == 0 || c.lanes.followed.Load() == 0 {
		return false
	}
	c.lanes.mu.Lock()
	defer c.lanes.mu.Unlock()
	return c.lanes.shares[l.key] != nil
}

// replyCounts returns the permits a reply granted, the permits left in
// the window after it (-1 if no verdict tells) and whether it refused a
// request.
func replyCounts(ns []int64, b batchReply) (granted, left int64, refused bool) {
	left = -1
	for i, v := range b.verdicts {
		if v.err != nil {
			continue
		}
		if v.res.Granted {
			granted += ns[i]
		} else {
			refused = true
		}
		if v.res.Interval > 0 {
			left = v.res.Remaining
		}
	}
	return granted, left, refused
}

// note adds a grant of n permits at now (ms), drops the marks whose
// records the script has expired by now (stamped at or before now less
// the interval) and returns the permits this Client holds in the window.
func (s *share) note(now, n int64) int64 {
	if n > 0 {
		s.marks = append(s.marks, mark{now, n})
		if len(s.marks) > maxMarks {
			s.marks[1].n += s.marks[0].n
			s.marks = s.marks[1:]
		}
	}
	i := 0
	for i < len(s.marks) && s.marks[i].at <= now-s.interval {
		i++
	}
	s.marks = s.marks[i:]
	return s.heldAt(now)
}

// heldAt returns the permits this Client's grants hold in the window at
// now (ms), from the marks.
func (s *share) heldAt(now int64) int64 {
	var n int64
	for _, m := range s.marks {
		if m.at > now-s.interval {
			n += m.n
		}
	}
	return n
}

// delayedFor returns when q, whose hint passes at wake, calls again: at
// wake, or the yield delay later when the lane yields then, never past
// q's limit nor beyond half-way from wake to q's context deadline. Call
// with lanes.mu held.
func (c *Client) delayedFor(l *lane, q *request, wake time.Time) time.Time {
	s := c.lanes.shares[l.key]
	if s == nil || !s.yields(c.clock().Add(time.Until(wake)).UnixMilli(), c.yieldDelay) {
		return wake
	}
	at := wake.Add(c.yieldDelay)
	if !q.limit.IsZero() && at.After(q.limit) {
		at = q.limit
	}
	if dl, ok := q.ctx.Deadline(); ok && at.After(dl) {
		at = wake.Add(dl.Sub(wake) / 2)
	}
	if at.Before(wake) {
		return wake
	}
	return at
}

// deferred queues the new blocking request q behind the yield delay when
// the lane yields now and has no waiters (else q joins them), and reports
// whether it did. Call with lanes.mu held.
func (c *Client) deferred(l *lane, q *request) bool {
	if len(l.waiting) > 0 || l.flying > 0 || c.lanes.shares[l.key] == nil {
		return false
	}
	now := time.Now()
	at := c.delayedFor(l, q, now)
	if !at.After(now) {
		return false
	}
	q.queued = now
	l.waiting = append(l.waiting, q)
	c.arm(l, at)
	return true
}

// yields reports whether a call at now (ms) yields: after a refusal, while
// this Client's grants hold more of the window than the others held at
// the last reply, by over 1/yieldMargin of the rate; or, while the limiter is not shared, once every
// probeEvery yield delays (as long as this Client holds permits in the
// window).
func (s *share) yields(now int64, delay time.Duration) bool {
	if !s.refused {
		return false
	}
	if now >= s.sharedUntil {
		if s.inWindow == 0 || now-s.probed < probeEvery*delay.Milliseconds() {
			return false
		}
		s.probed = now
		return true
	}
	return s.heldAt(now) > s.others+s.rate/yieldMargin
}

// newShare starts following the window of the limiter key. Making one
// first forgets the shares gone stale, when the map has doubled since the
// last sweep, so that a Client that waited on many limiters keeps shares
// only for those in use. Call with mu held.
func (ls *lanes) newShare(key string, now int64) *share {
	if ls.shares == nil {
		ls.shares = make(map[string]*share)
	}
	if len(ls.shares) >= 2*ls.swept+16 {
		for k, s := range ls.shares {
			s.inWindow = s.note(now, 0)
			if s.stale(now) {
				ls.forget(k)
			}
		}
		ls.swept = len(ls.shares)
	}
	s := &share{}
	ls.shares[key] = s
	ls.followed.Store(int64(len(ls.shares)))
	return s
}

// stale reports whether s no longer matters at now: this Client holds
// nothing in the window (as of the last note) and no other client has
// for sharedFor intervals.
func (s *share) stale(now int64) bool {
	return s.inWindow == 0 && now >= s.sharedUntil
}

// forget stops following the limiter key. Call with mu held.
func (ls *lanes) forget(key string) {
	delete(ls.shares, key)
	ls.followed.Store(int64(len(ls.shares)))
}
