package engine

import (
	"slices"
	"sync"
	"time"
)

// Local refusals (docs/combining.md, "Local refusals"). Under overload most
// decisions are refusals, and each would be a full script call. So after
// Redis refuses n permits of a limiter with the hint d, the Client refuses
// the non-blocking calls (Allow, TryAcquire) that ask the same limiter for
// n permits until d, counted from when the refused call was sent, has
// passed, with the rest of the hint and no Redis call (other counts go to
// Redis: their hints differ). A local answer is only ever a refusal:
// every grant comes from Redis. What can make one stale, and its bound:
//   - this Client's own Release, SetRate, UpdateRate, TrySetRate or Delete
//     forgets every local refusal at once;
//   - other clients' releases and rate changes, and records that Redisson
//     stamped ahead of the clock the scripts read, are seen at the latest
//     when the hint ends, and never later than one interval (of the config
//     the refusing call read) after it was sent: a caller is refused for up
//     to min(d, interval) that Redis would have granted.
// Blocking calls never use them (their waiters already wait the hint),
// and WithLocalRefusals(false) turns them off.

// maxRefusals bounds the limiters a Client keeps a local refusal for;
// ended ones are dropped first when it is reached.
const maxRefusals = 4096

// refusal is the last refusal Redis gave a limiter's non-blocking call.
type refusal struct {
	until time.Time // when the refused records expire: the hint less hintPad
	n     int64     // the permits refused (other asks go to Redis)
	res   Result    // the reply, for Allow's other fields
	at    time.Time // when the reply came
}

// refusals holds a Client's local refusals by lane key.
type refusals struct {
	mu sync.Mutex
	m  map[string]refusal
	// When m is full, note looks for ended refusals to drop only from
	// sweepAt on (sweep): with more limiters refused at once than
	// maxRefusals (per-user limiters near their rate), a look at every
	// refusal cost the whole map.
	sweepAt time.Time
	ends    []time.Time // sweep's buffer
	sweeps  int         // looks over the whole map (tests)
}

// lookup returns the local refusal of n permits of the limiter key at
// now, if one holds: Redis refused the same n, with a reply that has
// every field of Result when detail asks for them.
func (rs *refusals) lookup(key string, n int64, detail bool, now time.Time) (Result, bool) {
	rs.mu.Lock()
	r, ok := rs.m[key]
	rs.mu.Unlock()
	if !ok || n != r.n || detail && r.res.Limit == 0 || !now.Before(r.until) {
		return Result{}, false
	}
	res := r.res
	res.RetryAfter = max(r.until.Sub(now)+hintPad, time.Millisecond)
	res.ResetAfter = max(res.ResetAfter-now.Sub(r.at), 0)
	if res.Parts != nil {
		// A copy per caller, counted down as the Result's own figures.
		res.Parts = slices.Clone(res.Parts)
		for i := range res.Parts {
			p := &res.Parts[i]
			if p.RetryAfter > 0 {
				p.RetryAfter = max(p.RetryAfter-now.Sub(r.at), time.Millisecond)
			}
			p.ResetAfter = max(p.ResetAfter-now.Sub(r.at), 0)
		}
	}
	return res, true
}

// note records what Redis answered at now a non-blocking call of n
// permits of the limiter key, sent at sent (zero: not known, now): a
// refusal with a hint starts a local refusal; a grant ends the one there
// was.
func (rs *refusals) note(key string, n int64, res Result, sent, now time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if res.Granted || res.RetryAfter <= 0 {
		delete(rs.m, key)
		return
	}
	if rs.m == nil {
		rs.m = make(map[string]refusal)
	}
	if len(rs.m) >= maxRefusals && !rs.sweep(now) {
		return
	}
	// The hint carries Redisson's 3 ms on top of when the records expire
	// (hintPad): a local refusal ends when they do, counted from when the
	// call was sent. The script reads its clock after that (to the
	// millisecond, on its own clock), so the refusal ends about when the
	// records expire; counted from the reply, it outlasted them by the
	// reply's way back, and callers that poll Redis without one (a
	// Redisson tryAcquire loop) took each freed permit first.
	if sent.IsZero() || sent.After(now) {
		sent = now
	}
	until := sent.Add(res.RetryAfter - hintPad)
	if res.Interval > 0 {
		// Never past one interval of the config the reply read: a hint
		// longer than that comes from records stamped ahead of the clock
		// the script reads, which a Delete and re-create, a SetRate or the
		// writer's own clock can end at any moment; Redis is asked again.
		if end := sent.Add(res.Interval); end.Before(until) {
			until = end
		}
	}
	rs.m[key] = refusal{until: until, n: n, res: res, at: now}
}

// sweep drops the ended refusals of a full map, and reports whether
// that made room. Its next look comes when enough of those it keeps
// have ended to free an eighth of the map (sweepFree): with refusals
// ending one by one, a look per end would cost the whole map each time.
func (rs *refusals) sweep(now time.Time) bool {
	if now.Before(rs.sweepAt) {
		return false
	}
	rs.sweeps++
	ends := rs.ends[:0]
	for k, r := range rs.m {
		if !now.Before(r.until) {
			delete(rs.m, k)
		} else {
			ends = append(ends, r.until)
		}
	}
	rs.ends = ends
	rs.sweepAt = time.Time{}
	if over := len(ends) - (maxRefusals - sweepFree); over > 0 {
		slices.SortFunc(ends, time.Time.Compare)
		rs.sweepAt = ends[over-1]
	}
	return len(rs.m) < maxRefusals
}

// sweepFree is the room a sweep waits for.
const sweepFree = maxRefusals / 8

// forget ends every local refusal: this Client changed what a limiter
// holds or allows.
func (rs *refusals) forget() {
	rs.mu.Lock()
	clear(rs.m)
	rs.sweepAt = time.Time{}
	rs.mu.Unlock()
}
