package engine

import (
	"sync"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// simWindow is a simulated limiter's window on a fake clock, kept as the
// acquire script keeps it: rate permits an interval; the grants of one
// call are one record of their sum, scored at the call's time, freeing
// its permits an interval later. This library's records are marked
// (wire.New); another writer's (Redisson's, foreign) are not. Decide
// honours the forms: Strict grants nothing after a refusal, Hold leaves
// permits free and marks a request refused for that alone Held, Single
// carries the grant and the hint only. The probe record (Form.Probe) is
// kept as the scripts keep it: one permit of a grant, at most one in the
// window, freed to this library's calls wire.ProbeHold after it expires
// and to another writer's when it expires, and waited for by no hint of
// this library's.
type simWindow struct {
	c        *fakeClock
	rate     int64
	interval time.Duration
	mu       sync.Mutex
	recs     []simRecord // in time order
	// noProbe: records in FI, which has no probe record: Form.Probe
	// writes none and reads nothing (the tests of probe windows alone).
	noProbe bool
}

// simRecord is one record of a simWindow.
type simRecord struct {
	at    time.Time
	n     int64
	ours  bool
	probe bool
}

func newSimWindow(c *fakeClock, rate int64, interval time.Duration) *simWindow {
	return &simWindow{c: c, rate: rate, interval: interval}
}

// free drops the records that have expired by now, as this library's
// scripts see them (the probe record held wire.ProbeHold longer) or, for
// redisson, as Redisson's do, and returns the permits left. Call with mu
// held.
func (w *simWindow) free(now time.Time, redisson bool) int64 {
	live := w.recs[:0]
	used := int64(0)
	for _, r := range w.recs {
		end := r.at.Add(w.interval)
		if r.probe && !redisson {
			end = end.Add(wire.ProbeHold)
		}
		if now.Before(end) {
			live = append(live, r)
			used += r.n
		}
	}
	w.recs = live
	return w.rate - used
}

// hint is the wait until need more permits free, as the scripts give it
// (hintPad on top): this library's skip the probe record, Redisson's
// (redisson) read every record. Call with mu held.
func (w *simWindow) hint(now time.Time, need int64, redisson bool) time.Duration {
	var freed int64
	for _, r := range w.recs {
		if r.probe && !redisson {
			continue
		}
		if freed += r.n; freed >= need {
			return r.at.Add(w.interval).Sub(now) + hintPad
		}
	}
	return w.interval + hintPad
}

// probeRecord returns the window's probe record, if it has one. Call
// with mu held.
func (w *simWindow) probeRecord() (simRecord, bool) {
	for _, r := range w.recs {
		if r.probe {
			return r, true
		}
	}
	return simRecord{}, false
}

// decide is the fake's Decide: one script call on the window.
func (w *simWindow) decide(form Form, ns []int64) Reply {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.c.Now()
	free := w.free(now, false)
	hold := min(form.Hold, w.rate)
	vs := make([]Verdict, len(ns))
	var sum int64
	refused := false
	for i, n := range ns {
		if (!refused || form.Kind != Strict) && n+hold <= free {
			vs[i].Res.Granted = true
			free -= n
			sum += n
			continue
		}
		vs[i].Held = !refused && hold > 0 && n <= free
		refused = true
	}
	var note ProbeNote
	if form.Probe && form.Kind != Single && !w.noProbe {
		p, there := w.probeRecord()
		note = ProbeNote{Read: true, Found: there, There: there, Until: p.at.Add(w.interval).Sub(now)}
		if !there && sum > 0 {
			w.recs = append(w.recs, simRecord{at: now, n: 1, ours: true, probe: true})
			sum--
			note = ProbeNote{Read: true, There: true, Wrote: true, Until: w.interval}
		}
	}
	if sum > 0 {
		w.recs = append(w.recs, simRecord{at: now, n: sum, ours: true})
	}
	for i, n := range ns {
		v := &vs[i]
		if !v.Res.Granted {
			v.Res.RetryAfter = w.hint(now, max(n-free, 1), false)
		}
		if form.Kind != Single {
			v.Res.Limit, v.Res.Interval, v.Res.Remaining = w.rate, w.interval, free
		}
	}
	return Reply{Verdicts: vs, SentAt: now, Probe: note}
}

// foreign writes another writer's record of n permits now, as a
// Redisson waiter that got them; it reports whether they were free.
func (w *simWindow) foreign(n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.c.Now()
	if w.free(now, true) < n {
		return false
	}
	w.recs = append(w.recs, simRecord{at: now, n: n})
	return true
}

// census is the fake's Census: the interval and the window's records.
func (w *simWindow) census() (time.Duration, []Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.free(w.c.Now(), false)
	zs := make([]Record, len(w.recs))
	for i, r := range w.recs {
		zs[i] = record(r.at, r.n, r.ours)
		if r.probe {
			zs[i].Member = string(wire.ProbeRecord(wire.Bc0I))
		}
	}
	return w.interval, zs
}

// record is a permit record of n permits scored at at: this library's
// (marked) when ours, else Redisson's.
func record(at time.Time, n int64, ours bool) Record {
	m := wire.New(wire.Bc0I, wire.Tag{1, 2, 3, 4}, uint32(n))
	if !ours {
		m, _ = wire.Encode(wire.Bc0I, make([]byte, 16), uint32(n))
	}
	return Record{Score: float64(at.UnixMilli()), Member: string(m)}
}

// simLimiter is a fakeLimiter whose Decide and Census are w's.
func simLimiter(key string, w *simWindow) *fakeLimiter {
	return &fakeLimiter{fakeTarget: fakeTarget{key: key, decide: w.decide}, census: w.census}
}
