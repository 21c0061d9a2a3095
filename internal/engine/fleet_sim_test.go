package engine

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fleetSim is a fleet on one simulated window and one fake clock: Go
// Clients (Engines with the defaults, each with its own lane) whose
// callers each loop on Wait(1), and Redisson threads that retry on a
// timer's ticks as Redisson 4.x does. The clock moves one timer at a time,
// and only when every caller is parked (queued in a lane or asleep on a
// timer) and no script call or census runs, so a run is the same every
// time: what it counts (script calls, grants, when Redisson first got
// a permit) has no noise, unlike a run against Redis on a loaded machine.
// A script call decides when sent and answers a round trip (rtt) later.
// What it is good for: joins (TestSimJoin) and the shape of a Go-only
// fleet's script calls over many windows, which it showed growing as on
// Redis. It does not reproduce the shares of a shared limiter: its
// Redisson threads took 90% and more where Redis runs read about half.
type fleetSim struct {
	c       *fakeClock
	w       *simWindow
	es      []*Engine
	lims    []*fakeLimiter
	callers int
	calls   atomic.Int64 // the Go Clients' script calls
	rtt     time.Duration
	inCall  atomic.Int64 // script calls decided and not yet answered
	asleep  atomic.Int64 // of those, the ones waiting out their round trip
	inFly   atomic.Int64 // the requests of those
	// Timer functions run on goroutines of their own (a lane's timer
	// makes a script call, which waits on the clock): how many run, and
	// which goroutines they are.
	timerRuns atomic.Int64
	timerGs   sync.Map     // goroutine id -> struct{}
	timerIn   atomic.Int64 // timer goroutines asleep in a script call
	goGrant   atomic.Int64 // permits granted to Go callers
	java      []*simThread
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// newFleetSim returns a fleet of clients Clients of per callers each on
// a window of rate permits per interval; seed makes the spread's draws.
func newFleetSim(clients, per int, rate int64, interval time.Duration, seed uint64, opts ...func(*Options)) *fleetSim {
	s := &fleetSim{c: newFakeClock(), callers: clients * per, rtt: 500 * time.Microsecond}
	s.w = newSimWindow(s.c, rate, interval)
	s.c.onTimer = func(f func()) {
		s.timerRuns.Add(1)
		go func() {
			id := goid()
			s.timerGs.Store(id, struct{}{})
			defer func() { s.timerGs.Delete(id); s.timerRuns.Add(-1) }()
			f()
		}()
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	var mu sync.Mutex
	draw := func(bound time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(bound)))
	}
	for range clients {
		o := Options{MaxBatch: 128, Time: s.c, Draw: draw}
		for _, f := range opts {
			f(&o)
		}
		s.es = append(s.es, New(o))
		lim := simLimiter("sim", s.w)
		decide := lim.decide
		lim.decide = func(form Form, ns []int64) Reply {
			s.calls.Add(1)
			s.inCall.Add(1)
			defer s.inCall.Add(-1)
			r := decide(form, ns)
			if s.rtt > 0 {
				t := s.c.NewTimer(s.rtt)
				_, onTimer := s.timerGs.Load(goid())
				s.inFly.Add(int64(len(ns)))
				if onTimer {
					s.timerIn.Add(1)
				}
				s.asleep.Add(1)
				<-t.C()
				s.asleep.Add(-1)
				if onTimer {
					s.timerIn.Add(-1)
				}
				s.inFly.Add(-int64(len(ns)))
			}
			return r
		}
		lim.records = nil
		s.lims = append(s.lims, lim)
	}
	return s
}

// startGo starts the Go callers.
func (s *fleetSim) startGo() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i := range s.callers {
		e, lim := s.es[i%len(s.es)], s.lims[i%len(s.es)]
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for ctx.Err() == nil {
				if o := e.Wait(ctx, lim, 1, time.Time{}, nil); o.Res.Granted {
					s.goGrant.Add(1)
				}
			}
		}()
	}
}

// simThread is a Redisson 4.x thread in acquire(1), in a loop: refused, it
// calls again at the first tick of its JVM's timer (every tick, from
// phase) after the hint; granted, it calls again a millisecond later.
type simThread struct {
	s           *fleetSim
	tick, phase time.Duration
	first       time.Time // its first call
	firstGrant  time.Time // zero: none yet
	grants      int64
}

// startJava starts threads Redisson threads now, on a timer whose ticks
// come every tick from phase (of the fake clock's start).
func (s *fleetSim) startJava(threads int, tick, phase time.Duration) {
	for range threads {
		j := &simThread{s: s, tick: tick, phase: phase, first: s.c.Now()}
		s.java = append(s.java, j)
		j.call()
	}
}

// call is one tryAcquire of the thread, on the clock's goroutine.
func (j *simThread) call() {
	now := j.s.c.Now()
	if j.s.w.foreign(1) {
		j.grants++
		if j.firstGrant.IsZero() {
			j.firstGrant = now
		}
		j.s.c.AfterFunc(time.Millisecond, j.call)
		return
	}
	j.s.w.mu.Lock()
	j.s.w.free(now, true)
	at := now.Add(j.s.w.hint(now, 1, true))
	j.s.w.mu.Unlock()
	if j.tick > 0 {
		k := (at.Sub(fakeStart) - j.phase + j.tick - 1) / j.tick
		at = fakeStart.Add(j.phase + k*j.tick)
	}
	j.s.c.AfterFunc(at.Sub(now), j.call)
}

// quiet reports whether nothing moves until the clock does: every Go
// caller is queued in its lane, in a script call waiting out its round
// trip, or asleep on a timer, and no census runs.
func (s *fleetSim) quiet() bool {
	if s.timerRuns.Load() != s.timerIn.Load() {
		return false
	}
	calls := s.asleep.Load()
	if calls != s.inCall.Load() {
		return false
	}
	parked := int64(s.c.sleepers()) - calls + s.inFly.Load()
	busy := int64(0)
	for _, e := range s.es {
		e.lanes.mu.Lock()
		for _, l := range e.lanes.m {
			if l.busy {
				busy++
			} else if len(l.pending) > 0 {
				e.lanes.mu.Unlock()
				return false
			}
			parked += int64(len(l.waiting) + len(l.pending))
		}
		for _, f := range e.lanes.fleets {
			if f.censusing > 0 {
				e.lanes.mu.Unlock()
				return false
			}
		}
		e.lanes.mu.Unlock()
	}
	return busy == calls && parked == int64(s.callers)
}

// runFor moves the clock on by d, timer by timer, each when all is quiet.
func (s *fleetSim) runFor(t *testing.T, d time.Duration) {
	t.Helper()
	end := s.c.Now().Add(d)
	for {
		waitFor(t, "the fleet parked", s.quiet, func() string { return "at " + since(s.c.Now()).String() })
		if !s.c.fireNext(end) {
			return
		}
	}
}

// stop ends the Go callers.
func (s *fleetSim) stop() {
	s.cancel()
	s.wg.Wait()
}

// javaGrants returns the permits the Redisson threads got, and the
// earliest first grant less the first call (-1: none granted).
func (s *fleetSim) javaGrants() (n int64, join time.Duration) {
	join = -1
	for _, j := range s.java {
		n += j.grants
		if d := j.firstGrant.Sub(j.first); !j.firstGrant.IsZero() && (join < 0 || d < join) {
			join = d
		}
	}
	return n, join
}

// goid returns the calling goroutine's id, from its stack's first line.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}
