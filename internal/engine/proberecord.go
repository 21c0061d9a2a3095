package engine

import (
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// The probe record (docs/fairness.md, "The probe record"). The probe
// windows (probe.go) come once a probe period, so a Redisson service
// that starts calling beside a busy Go-only fleet may wait that long for
// its first permit. The probe record lets it in within an interval and
// its retry tick, at about a script call an interval:
//
//   - It is one permit of a grant, written as a record whose bytes every
//     Client knows (wire.ProbeRecord), so a limiter has at most one. A
//     call may write it (Form.Probe) while the limiter is contended and
//     not shared with other writers, and none is in place.
//   - Go's scripts leave it in place, its permit out, for wire.ProbeHold
//     after it expires; Redisson's settle it as soon as it expires. And no
//     Go hint waits for it, so no Go waiter wakes when it frees.
//   - A Redisson waiter refused at any moment follows the window's oldest
//     records one expiry at a time, and within an interval comes to the
//     probe record's: it calls a tick after it, while Go holds it, and
//     takes it. Its record is then in the window, and the census sees it.
//   - The Client whose call wrote it (the owner) sends its first waiter
//     refused meanwhile back for it at the hold's end (probeRetakeAt): that
//     call takes its permit and writes the probe record anew, stamped then.
//     So its expiry moves a hold further each interval, an instant of its
//     own that only the owner wakes for: a script call an interval, and
//     the permit idle for the hold. A Client that learns of no retake
//     (the owner gone) takes the record over with its next call after.
//
// Calls with Form.Probe cost the script a ZSCORE; the other Clients make
// them only until they learn the record's expiry, about once an interval.
//
// Two costs grow past issue 40's bounds (grants within 1%, script calls
// within 10%) on some limiters: the owner's call an interval is more than
// a tenth of the fleet's calls where the fleet makes fewer than
// probeCallFloor granting calls an interval (one Client whose lane
// combines many callers), and the permit held idle for wire.ProbeHold an
// interval is more than probeIdleShare of the grants where the rate is
// under wire.ProbeHold/probeIdleShare permit-seconds an interval (25 per
// 500 ms, 10 per second). There the probe record is sparse (probeSparse):
// nobody retakes it, its permit idles after the hold until the fleet's
// next call takes it, and a new one is written only a probe period
// (probePeriod) after the last one expired, as the probe windows come: a
// grant a period, and a join within a period.

// probeRetakeAt returns when the owner calls again for the probe record
// that expires at expiry: the hold's end and a margin for the clocks (the
// script settles it only when its own clock is past the hold).
func probeRetakeAt(expiry time.Time) time.Time {
	return expiry.Add(wire.ProbeHold + probeRetakeMargin)
}

const probeRetakeMargin = 10 * time.Millisecond

// fairBatch reports whether batch is one the probe record concerns: fair
// wakes on, one limiter, every request a blocking caller's, and the probe
// windows' hold one permit (a Client with WithProbeHold(n > 1) leaves the
// joins to its windows, which hold n: the probe record holds one).
func (e *Engine) fairBatch(batch []*request) bool {
	if e.unfair || e.maxBatch == 1 || e.hold > 1 {
		return false
	}
	if _, ok := batch[0].p.(Limiter); !ok {
		return false
	}
	for _, q := range batch {
		if !q.blocking {
			return false
		}
	}
	return true
}

// batchProbe reports whether a script call of lane l (a fairBatch) at now
// may write the probe record (Form.Probe): this Client's first calls of
// the limiter (it knows nothing of it yet: a fleet that starts together
// fills the window in its first instants, and a Redisson service that
// starts beside it meets that record's expiry an interval on, not the
// next one's), or the limiter contended (a blocked caller of this Client
// refused within the last two intervals) and not shared, and no probe
// record known to be in place: none seen, or the one seen is past its
// retake. A fleet whose window no reply has told (made by
// WithForeignWaiters' count of blocking calls before the first call)
// knows nothing of the limiter either.
func (e *Engine) batchProbe(l *lane, now time.Time) bool {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[l.key]
	if f == nil || f.interval == 0 {
		return true
	}
	if f.shared(now) || now.Sub(f.refusedAt) > 2*f.interval {
		return false
	}
	if f.probeAt.IsZero() {
		return true
	}
	if f.probeSparse() {
		return !now.Before(f.probeAt.Add(f.period(e.budget)))
	}
	return !now.Before(probeRetakeAt(f.probeAt))
}

// probeCallFloor is the fewest granting script calls an interval of a Go
// fleet for which the probe record's owner retakes it every interval: its
// call is then at most a tenth of theirs. probeIdleShare is the largest
// share of the grants that the permit held idle an interval may cost.
const (
	probeCallFloor = 10
	probeIdleShare = 0.005
)

// probeSparse reports whether the probe record is sparse on f's limiter:
// its rate (once a reply told it) holds fewer than wire.ProbeHold /
// probeIdleShare permit-seconds an interval, or the last census counted
// fewer than probeCallFloor records of the Go fleet's calls in an interval.
func (f *fleet) probeSparse() bool {
	if f.rate > 0 && float64(f.rate)*f.interval.Seconds() < wire.ProbeHold.Seconds()/probeIdleShare {
		return true
	}
	return f.censuses > 0 && f.goCalls < probeCallFloor
}

// noteProbe reads what a call of lane l on lim sent at sent found of the
// probe record (b.Probe, when it asked), and, while this Client owns it,
// sends the first request the call refused back for it at its retake
// unless that request calls again before then anyway. A probe record
// gone before it or its successor could have been settled by Go was most
// likely taken by a Redisson waiter, whose record stays in the window for
// an interval: a census reads the window at once, so that no Client
// misses it. now is the reply's time.
func (e *Engine) noteProbe(l *lane, lim Limiter, b *Reply, sent, now time.Time) {
	if b.Err != nil {
		return
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	f := e.lanes.fleets[l.key]
	if b.Probe.Read {
		// Made, or told the window (WithForeignWaiters' fleet may not know it yet: batchProbe).
		interval, rate := b.window()
		f = e.lanes.fleetOf(l.key, interval, rate, now)
	}
	if f == nil {
		return
	}
	if p := b.Probe; p.Read {
		f.probeRead = true
		at := time.Time{}
		if p.There {
			at = sent.Add(p.Until)
		}
		if f.probeChainBroke(p, at, sent) && f.censusing == 0 {
			f.censusAt = now
			f.censusing++
			go e.census(lim, l.key)
		}
		// Two probe records' expiries lie at least an interval apart: a
		// nearer one is the same record, read at another time.
		same := !at.IsZero() && !f.probeAt.IsZero() && absDuration(at.Sub(f.probeAt)) < f.interval/2
		f.probeMine = p.Wrote || (f.probeMine && same)
		if !same || p.Wrote {
			f.retakeProbe = false
		}
		f.probeAt = at // the latest reading: the script's clock decides the hold
	}
	if !f.probeMine || f.retakeProbe || f.shared(now) || f.probeSparse() {
		return
	}
	d := max(probeRetakeAt(f.probeAt).Sub(now), probeRetakeMargin)
	for i := range b.Verdicts {
		v := &b.Verdicts[i]
		if v.Err != nil || v.Res.Granted {
			continue
		}
		if v.Res.RetryAfter > d {
			v.Res.RetryAfter, f.retakeProbe = d, true
		}
		return // the first refused decides
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// probeChainSlack is how much later than its owner's retake (and the
// round trip) a probe record written anew may expire and still be the
// retake's.
const probeChainSlack = 50 * time.Millisecond

// probeChainBroke reports whether what a call sent at sent found of the
// probe record (p; at: when the one in place expires) says that the one
// f last saw was taken before Go could settle it: no record in place
// where it, or the one its owner's retake writes, would still be; or one
// written later than that retake.
func (f *fleet) probeChainBroke(p ProbeNote, at, sent time.Time) bool {
	if f.probeAt.IsZero() {
		return false
	}
	next := probeRetakeAt(f.probeAt).Add(f.interval) // the retake's record expires then
	if !sent.Before(next) {
		return false
	}
	if !p.Found {
		return true
	}
	return p.There && at.After(next.Add(probeChainSlack))
}
