package engine

import (
	"context"
	"math"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// Fairness between clients (docs/fairness.md). A permit freed in a full
// window goes to whichever waiter calls first after it frees. Redisson
// 3.25.1 and later retry at the first tick of a timer after the hint: a
// 100 ms tick up to 3.48, from 3.49 on (4.x too) one of 10-49 ms (100 ms
// now and then) drawn when the client starts. 3.25.0 and earlier retry
// at the hint on Netty's event loop. Every version calls again at once
// after a grant. A Go waiter that woke on its hint would take nearly
// every freed permit.
//
// So while other writers' records are in a limiter's window (every
// record this library writes is marked, wire.Member.GoMarked), a Client's
// blocked callers each wake on their own at their hint plus a uniform
// delay below a bound, the spread. A controller moves the spread after a
// census, at most once an interval, toward an even split of the window's
// permits between this library's records and the others': up when the
// others hold under half, down when over (with WithForeignWaiters, per
// waiter of each side).
// The delay that gives an even split depends on how the others retry,
// on how many Go waiters there are and on the machine; the controller
// finds it instead of a constant.
//
// On a limiter whose window holds only marked records, the lane's waiters
// wake together (one script call for all) at the head's hint, and in a
// probe window their calls leave a permit free for a Redisson waiter
// starved so far (probe.go).

// A census is one ZRANGE of the newest censusRecords records; a Client
// makes one per limiter at most every censusEvery (half an interval, at
// least 250 ms), only after one of its blocked callers was refused, and
// reads censusAfter (150 ms, at most a quarter interval) after that
// refusal.

const (
	// The spread's start and bounds.
	spreadStart = 30 * time.Millisecond
	// spreadAtHint is the start beside Redisson 3.20 and earlier, which
	// retry 3 ms after the expiry (headcount.atHint).
	spreadAtHint = 3 * time.Millisecond
	spreadMin    = time.Millisecond
	spreadMax    = 400 * time.Millisecond
	// spreadGain: a census where the others hold share s of the window
	// multiplies the spread by exp(spreadGain*(0.5-s)).
	spreadGain = 2.0
	// evenBand: no step while the others hold this close to half.
	evenBand = 0.05

	// foreignFor is how many intervals, and at least sharedAtLeast, a
	// limiter counts as shared with other writers after a census last saw
	// one of their records (foreignHold).
	foreignFor    = 3
	sharedAtLeast = 12 * time.Second
	// censusRecords bounds a census: the newest records of the window.
	censusRecords = 256
	// censusTimeout bounds a census's Redis call; it runs beside the
	// waiters, never in their way.
	censusTimeout = time.Second
)

// MaxForeignWaiters is the most WithForeignWaiters takes.
const MaxForeignWaiters = 1 << 16

// fleet is what a Client knows of the other writers of a limiter's
// window. Guarded by lanes.mu.
type fleet struct {
	interval     time.Duration
	rate         int64         // permits per interval, 0 until a reply says
	censusAt     time.Time     // last census started
	foreignUntil time.Time     // foreignHold after the last foreign record seen
	spread       time.Duration // bound of own wakes' delays while shared
	refusedAt    time.Time     // a blocked caller was last refused
	// With WithForeignWaiters only: this Client's blocking calls on the
	// limiter now, and the permits granted to them lately.
	blocked   int
	granted   tally
	perWaiter bool      // a census weighed per waiter (weigh)
	censuses  int       // censuses ended, failed ones too (tests wait for them)
	censusing int       // censuses started and not yet ended
	steppedAt time.Time // the spread last moved (step)
	// The probe slot (probe.go): when this Client's calls were first held
	// in the latest window they were (its window is probeIndex of it), and
	// whether that hold kept every permit.
	slotAt   time.Time
	slotFull bool
	// retakeFor: the slot (its slotAt) whose first held caller was sent
	// back for the permit at its end.
	retakeFor time.Time
	// The probe record (proberecord.go): when the one last seen expires
	// (zero: none seen), whether this Client's call wrote it, and whether
	// a refused caller was sent back for it; probeRead: a reply told of
	// it (the limiter's format has one).
	probeAt     time.Time
	probeMine   bool
	retakeProbe bool
	probeRead   bool
	// goCalls: the Go fleet's granting script calls in an interval, as
	// the last census counted their records (probeSparse).
	goCalls int
}

// tally counts permits over the last tallySlots slots of interval/
// tallyPerInterval each.
type tally struct {
	slot  [tallySlots]int64
	epoch [tallySlots]int64 // the slot number each count belongs to
}

const (
	tallyPerInterval = 4
	tallySlots       = 2 * tallyPerInterval // two intervals
)

// slotOf returns the number of the slot that holds now.
func slotOf(now time.Time, interval time.Duration) int64 {
	w := max(interval/tallyPerInterval, time.Millisecond)
	return now.UnixNano() / int64(w)
}

// add counts n permits granted at now.
func (t *tally) add(now time.Time, interval time.Duration, n int64) {
	e := slotOf(now, interval)
	i := e % tallySlots
	if t.epoch[i] != e {
		t.epoch[i], t.slot[i] = e, 0
	}
	t.slot[i] += n
}

// perInterval returns the permits counted over the last two intervals,
// halved: a rate per interval.
func (t *tally) perInterval(now time.Time, interval time.Duration) float64 {
	e := slotOf(now, interval)
	var sum int64
	for i := range t.slot {
		if d := e - t.epoch[i]; d >= 0 && d < tallySlots {
			sum += t.slot[i]
		}
	}
	return float64(sum) / 2
}

// blocking counts a blocking call of limiter key in (+1) or out (-1), and
// a grant of n permits to it; only with WithForeignWaiters.
func (e *Engine) blocking(key string, delta int, granted int64) {
	if e.foreign == 0 || e.unfair {
		return
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	now := e.time.Now()
	f := e.lanes.fleetOf(key, 0, 0, now)
	f.blocked = max(f.blocked+delta, 0)
	if granted > 0 && f.interval > 0 {
		f.granted.add(now, f.interval, granted)
	}
}

// fleetOf returns the fleet of l's limiter, making it if needed (and
// sweeping stale ones at now); interval and rate (from a reply; 0 when it
// did not say) update what the fleet knows. Call with lanes.mu held.
func (ls *lanes) fleetOf(key string, interval time.Duration, rate int64, now time.Time) *fleet {
	f := ls.fleets[key]
	if f == nil {
		if ls.fleets == nil {
			ls.fleets = make(map[string]*fleet)
		}
		ls.sweepFleets(now)
		f = &fleet{spread: spreadStart}
		ls.fleets[key] = f
	}
	if interval > 0 {
		f.interval = interval
	}
	if rate > 0 {
		f.rate = rate
	}
	return f
}

// foreignHold is how long a limiter counts as shared after a census last
// saw another writer's record: foreignFor intervals, and at least
// sharedAtLeast (12 s), so that others a slow moment starved (a loaded
// JVM misses a few intervals) keep the fair wakes while the probe windows
// show them again: while shared and starved, each census raises the
// spread.
func foreignHold(interval time.Duration) time.Duration {
	return max(foreignFor*interval, sharedAtLeast)
}

// sweepFleets forgets fleets that have shown nothing for foreignFor
// intervals, when the map has doubled since the last sweep. Call with
// lanes.mu held.
func (ls *lanes) sweepFleets(now time.Time) {
	if len(ls.fleets) < 2*ls.swept+16 {
		return
	}
	for k, f := range ls.fleets {
		if f.blocked == 0 && now.After(f.foreignUntil) && now.Sub(f.censusAt) > foreignFor*f.interval {
			delete(ls.fleets, k)
		}
	}
	ls.swept = len(ls.fleets)
}

// shared reports whether other writers' records were seen in the window
// lately. Call with lanes.mu held.
func (f *fleet) shared(now time.Time) bool { return f != nil && now.Before(f.foreignUntil) }

// refusedWake returns when a blocked caller q of lane l, refused with a
// hint passing at wake, calls again, and whether it waits on its own
// (true) or with the lane's waiters. It may start a census. Never past
// q's limit or context deadline, never before wake less hintPad. Call
// with lanes.mu held.
func (e *Engine) refusedWake(l *lane, q *request, wake time.Time, interval time.Duration, rate int64) (time.Time, bool) {
	lim, ok := q.p.(Limiter)
	if e.unfair || e.maxBatch == 1 || !ok {
		return wake, false
	}
	now := e.time.Now()
	f := e.lanes.fleetOf(l.key, interval, rate, now)
	f.refusedAt = now
	if now.Sub(f.censusAt) >= censusEvery(f.interval) {
		f.censusAt = now
		e.startCensus(lim, l.key, f)
	}
	at, own := wake, false
	if f.shared(now) {
		at, own = wake.Add(e.draw(f.spread)-hintPad), true
	}
	at = q.capped(at)
	if own {
		wake = wake.Add(-hintPad)
	}
	if at.Before(wake) {
		return wake, own
	}
	return at, own
}

// deferred returns when q, a new blocking call of lane l, first calls,
// and whether that is later than now: while other writers share the
// limiter and a blocked caller was refused within the last deferFor
// intervals, a new call waits as a refused one does, so that a caller
// granted a permit cannot take the next ones at once, one after another,
// before the others' waiters wake. A draw under spreadMin defers nothing:
// Redisson calls again at once after a grant, and beside 3.16 to 3.20,
// whose waiters wake 3 ms after the expiry, a Go caller's timer and
// hand-offs for a wait under a millisecond lost each clump of permits
// to it. With the spread at its floor no call is deferred; above it, all
// but spreadMin/spread of them. Call with lanes.mu held.
func (e *Engine) deferred(l *lane, q *request) (time.Time, bool) {
	if e.unfair || e.maxBatch == 1 {
		return time.Time{}, false
	}
	now := e.time.Now()
	f := e.lanes.fleets[l.key]
	if !f.shared(now) || now.Sub(f.refusedAt) > deferFor*f.interval {
		return time.Time{}, false
	}
	d := e.draw(f.spread)
	if d < spreadMin {
		return time.Time{}, false
	}
	at := q.capped(now.Add(d))
	return at, at.After(now)
}

// deferFor is how many intervals after a blocked caller's refusal a new
// blocking call of a shared limiter is deferred. Two, not one: where
// the window's records expire in one clump an interval, the refusals
// come when a clump is drained, and each clump comes a little over an
// interval after the last (the scripts' 3 ms and the wakes' draws). With
// one interval, the callers granted at a clump were no longer deferred
// there: four Go callers took a clump of 50 at once, one call after
// another, before Redisson's next tick, and Redisson got none of it,
// clump after clump, while the spread climbed to its ceiling
// (docs/fairness.md, "The independent fleet check").
const deferFor = 2

// capped returns at, or q's limit or context deadline if earlier.
func (q *request) capped(at time.Time) time.Time {
	if !q.limit.IsZero() && at.After(q.limit) {
		at = q.limit
	}
	if dl, ok := q.ctx.Deadline(); ok && at.After(dl) {
		at = dl
	}
	return at
}

// hintPad is what the scripts add to a wait hint, as Redisson's do: a
// waiter that waits on its own starts its delay from the expiry itself,
// so that its spread can also go below Redisson 3.16's retry at the hint.
const hintPad = 3 * time.Millisecond

// censusEvery is the least time between two censuses of one limiter.
func censusEvery(interval time.Duration) time.Duration {
	return max(interval/2, 250*time.Millisecond)
}

// startCensus starts a census of lim's window, censusAfter(f.interval)
// from now. Call with lanes.mu held.
func (e *Engine) startCensus(lim Limiter, key string, f *fleet) {
	lag := e.censusAfter(f.interval)
	if lag <= 0 {
		f.censusing++
		go e.census(lim, key)
		return
	}
	e.time.AfterFunc(lag, func() {
		e.lanes.mu.Lock()
		f := e.lanes.fleets[key]
		if f != nil {
			f.censusing++
		}
		e.lanes.mu.Unlock()
		if f != nil {
			e.census(lim, key)
		}
	})
}

// censusAfter is how long after the refusal that starts it a census reads
// the window: the Client's lag (censusLag), at most a quarter interval.
// A census read at the refusal misses a Redisson permit taken just after
// it. On a Go-only limiter the fleet's records expire in one clump an
// interval, and its callers are refused once the clump is taken: a
// Redisson thread that retries on its timer's tick (at most 100 ms) takes
// a permit up to a tick after that, so a census at the refusal read the window before
// Redisson's permit, and the next one, an interval later, after that
// permit had expired with the clump, so a Redisson service could go
// unseen for seconds (docs/fairness.md, "Joining", has the trace).
func (e *Engine) censusAfter(interval time.Duration) time.Duration {
	if e.lag <= 0 {
		return 0
	}
	return min(e.lag, interval/4)
}

// censusLag is the Client's census lag: Redisson's longest retry tick
// (100 ms, 3.25.1 to 3.48) and 50 ms for its round trip and a loaded JVM.
const censusLag = 150 * time.Millisecond

// census reads the newest records of lim's window, notes whether other
// writers hold some and steps the spread toward an even split. A failed
// read changes nothing.
func (e *Engine) census(lim Limiter, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), censusTimeout)
	defer cancel()
	iv, zs, err := lim.Census(ctx, censusRecords)
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[key]
	if f == nil {
		return
	}
	f.censuses++
	f.censusing--
	if err != nil || iv <= 0 || len(zs) == 0 {
		return
	}
	f.interval = iv
	c := sides(zs, f.interval)
	f.goCalls = c.goRecords
	now := e.time.Now()
	was := f.shared(now)
	a, b := e.weigh(f, now, c.ours, c.others)
	f.step(now, a, b)
	if !was && f.shared(now) {
		if c.atHint {
			// Redisson 3.20 and earlier retry 3 ms after the expiry, so the
			// waiters' first wakes after the join meet their retries at
			// once, and the split this census read (the window filled while
			// both sides called together) would replay until the first
			// step, an interval on: many Go callers beside few
			// slow-starting threads kept Java under 30% of its first 5 s
			// that way (docs/fairness.md, "Redisson's retry"). So the
			// spread starts at spreadAtHint, stepped once by this census.
			f.spread, _ = stepped(spreadAtHint, b/(a+b), f.ceiling()) // b > 0: a join
		}
		e.joined(key, f, now)
	}
}

// joined re-arms the lane of a limiter that a census has just found
// shared. Its queued waiters were armed to wake together on the head's
// hint, as on a Go-only limiter: at the next expiry they would take
// every permit that frees before Redisson's next retry tick, and only
// their refusals after it would wait on their own. They wake a draw
// below the spread later, as a waiter on its own does (never past a
// waiter's limit or deadline). Call with lanes.mu held.
func (e *Engine) joined(key string, f *fleet, now time.Time) {
	l := e.lanes.m[key]
	if l == nil || l.timer == nil || len(l.waiting) == 0 || !l.wakeAt.After(now) {
		return // nothing queued, or the timer is due (fire may be waiting on the lock)
	}
	at := l.wakeAt.Add(e.draw(f.spread) - hintPad)
	for _, q := range l.waiting {
		at = q.capped(at)
	}
	if at.After(l.wakeAt) {
		l.wakeAt = at
		l.timer.Reset(at.Sub(now))
	}
}

// weigh returns what a census's step compares: the window's permits of
// each side, or with WithForeignWaiters, this Client's permits granted
// per blocked caller against the others' permits per stated waiter.
func (e *Engine) weigh(f *fleet, now time.Time, ours, others int64) (float64, float64) {
	if e.foreign == 0 || others == 0 {
		return float64(ours), float64(others)
	}
	f.perWaiter = true
	own := f.granted.perInterval(now, f.interval) / float64(max(f.blocked, 1))
	return own, float64(others) / float64(e.foreign)
}

// headcount is what one census counted of a window.
type headcount struct {
	ours, others int64 // permits held by this library's records and the others'
	// atHint: every record of the others is in a layout of Redisson
	// 3.20 or earlier (FI, Lc0I, Bc0I with 8 random bytes), whose
	// writers retry 3 ms after the expiry on Netty's event loop.
	atHint bool
	// goRecords: this library's records but the probe record, each the
	// grant of one script call: the Go fleet's granting calls in the
	// interval.
	goRecords int
}

// sides counts the permits that this library's records (marked) and the
// others' hold among zs, a window's newest records in score order, within
// an interval of the newest. Permits, not records: beside a writer that
// asks more permits per call, an even split of records would give it
// that many times the other's permits. An undecodable record counts as
// one permit of the others', of no known layout.
func sides(zs []Record, interval time.Duration) headcount {
	var c headcount
	if len(zs) == 0 {
		return c
	}
	old, other := 0, 0
	from := zs[len(zs)-1].Score - float64(interval.Milliseconds())
	for _, z := range zs {
		if z.Score <= from {
			continue
		}
		m, err := wire.Decode([]byte(z.Member))
		switch {
		case err != nil:
			c.others++
			other++
		case m.GoMarked():
			c.ours += int64(max(m.Permits, 1))
			if !m.Probe() {
				c.goRecords++
			}
		default:
			c.others += int64(max(m.Permits, 1))
			if m.Format != wire.Bc0I || len(m.Random) < 16 {
				old++
			} else {
				other++
			}
		}
	}
	c.atHint = old > 0 && other == 0
	return c
}

// ceiling returns the spread's bound: spreadMax, or with
// WithForeignWaiters an interval if longer, so that one Go caller can
// leave most of the permits to many foreign waiters.
func (f *fleet) ceiling() time.Duration {
	if f.perWaiter {
		return max(spreadMax, f.interval)
	}
	return spreadMax
}

// step notes a census that found ours and others' permits in the window
// (with WithForeignWaiters, per waiter of each side): others' permits
// keep the limiter shared, and while it is shared the spread moves toward
// an even split, at most once an interval, the first time an interval
// after the census that found it shared. A census reads the window's
// last interval, so a step taken half an interval after the last one
// counts the same grants twice and overshoots: by the rule's arithmetic,
// a Go fleet starting beside Java that had the window took the spread to
// its floor within two seconds. A shared limiter whose census sees none
// of the others' permits steps as for a share of 0: they are starved,
// not gone, until foreignHold passes (the 1.25x step it took before needs
// about 20 censuses, 10 s, from the floor to where 4.x gets half). With
// both, the fleet check's 5 s buckets under 30% went from 4 of 18
// scenario runs to 4 of 120 (docs/fairness.md).
func (f *fleet) step(now time.Time, ours, others float64) {
	if others > 0 && !f.shared(now) {
		// A join: this census read a window written while the Clients
		// woke together, or before this one called at all; its share says
		// nothing of the spread. The first step comes an interval on.
		f.foreignUntil = now.Add(foreignHold(f.interval))
		f.steppedAt = now
		return
	}
	if others > 0 {
		f.foreignUntil = now.Add(foreignHold(f.interval))
	}
	if !f.shared(now) || now.Sub(f.steppedAt) < f.interval || ours+others <= 0 {
		return // Go only; a step within the interval the census reads; nothing counted
	}
	share := others / (ours + others) // 0 when the others hold none
	if next, ok := stepped(f.spread, share, f.ceiling()); ok {
		f.spread, f.steppedAt = next, now
	}
}

// stepped returns spread d moved toward an even split after a census
// that read the others holding share s of the window: d multiplied by
// exp(spreadGain*(0.5-s)), within spreadMin and ceiling; within evenBand
// of an even split, d unchanged and false.
func stepped(d time.Duration, s float64, ceiling time.Duration) (time.Duration, bool) {
	if math.Abs(s-0.5) <= evenBand {
		return d, false
	}
	next := time.Duration(float64(d) * math.Exp(spreadGain*(0.5-s)))
	return min(max(next, spreadMin), ceiling), true
}

// The delay after its hint of one waiter's own wake is e.draw(f.spread)
// (Options.Draw): each waiter draws its own, so that the Go waiters
// spread their calls as independent retries do.

// ownWakes reports whether l's refused waiters wait each on its own
// (other writers share the limiter), rather than in the lane's queue.
func (e *Engine) ownWakes(l *lane) bool {
	if e.unfair || e.maxBatch == 1 {
		return false
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	return e.lanes.fleets[l.key].shared(e.time.Now())
}
