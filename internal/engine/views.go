package engine

import "time"

// Views of the combining state, for tests that must know a request is
// queued before they go on (the root's export_test.go), and for the
// deterministic tests here.

// Pending returns the acquisitions of lane key waiting for the next
// script call.
func (e *Engine) Pending(key string) int {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	if l := e.lanes.m[key]; l != nil {
		return len(l.pending)
	}
	return 0
}

// Waiters returns the blocked callers queued on lane key, those in a
// script call included.
func (e *Engine) Waiters(key string) int {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	if l := e.lanes.m[key]; l != nil {
		return len(l.waiting) + l.flying
	}
	return 0
}

// Lanes returns how many lanes the Engine keeps, after dropping the idle
// ones as a sweep does.
func (e *Engine) Lanes() int {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	for _, l := range e.lanes.m {
		e.lanes.dropIfIdle(l)
	}
	return len(e.lanes.m)
}

// MarkRefused makes the fleet state of lane key as if one of its blocked
// callers had been refused at at, on a limiter of the given interval that
// only this library writes.
func (e *Engine) MarkRefused(key string, at time.Time, interval time.Duration) {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	e.lanes.fleetOf(key, interval, 0, e.time.Now()).refusedAt = at
}

// Probe windows' constants, for tests of holds against Redis.
const (
	// HoldAll is the hold of a full probe window.
	HoldAll = holdAll
	// ProbeSlot is how long a held request waits; ProbeFullSlot in a full
	// window.
	ProbeSlot     = probeSlot
	ProbeFullSlot = probeFullSlot
)

// ProbePeriod returns how often a limiter of rate permits per interval
// has a probe window (the wall clock's, by default) with windows at most
// once per budget permits of the rate; 0: the default budget (150).
func ProbePeriod(interval time.Duration, rate, budget int64) time.Duration {
	if budget <= 0 {
		budget = probeBudget
	}
	return probePeriod(interval, rate, budget)
}
