package script

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Clock steps (docs/operations.md, "Restarts, failovers and clock steps").
// The scripts stamp and expire records by the server's clock: when it
// steps ahead by d (an NTP step, a VM restored from a snapshot), every
// record of the window expires d early and its permits are granted again.
// No restart goes with it, so no NOSCRIPT tells. A Conn on a single
// master therefore reads the server's TIME every clockStepCheck while it
// acquires, and sends each acquire script the most the server's clock
// may read by then: the last reading, plus how far this process's
// monotonic clock moved since, plus clockStepMin, the reading's round
// trip and twice the slowest recent acquire round trip (a call may wait
// that long before its script runs). A script whose clock is past it
// writes nothing and answers RLSTEP. The call may still only have waited
// on its way (a queue longer than any lately), so the Conn reads the
// clock again and compares the two readings, each tied to its monotonic
// clock: a step ahead of more than clockStepMin beyond their round trips
// is an event (restart.go), and the window is filled for one interval;
// otherwise the slowest round trip counted doubles, so that a loaded
// server does not turn every call into two. Either way the call is asked
// again without a bound. A step smaller than the slack goes unseen. A step back makes records look younger:
// nothing is granted early, the limiter refuses until they expire by the
// new clock (up to the interval and the step), and nothing is needed.

// clockStepCheck is how often an acquiring Conn reads the server's clock.
const clockStepCheck = 10 * time.Second

// clockStepStale is how old a reading may be to bound a script's clock;
// an older one is renewed before the call (one TIME round trip after a
// quiet spell). The two clocks drift apart by under clockStepMin over it:
// NTP slews each by at most 500 ppm, 15 ms in 30 s.
const clockStepStale = 30 * time.Second

// clockStepMin is the least forward step that is an event, beyond the
// reading's round trip.
const clockStepMin = 50 * time.Millisecond

// clockStepRTT is the longest round trip whose reading is used.
const clockStepRTT = 100 * time.Millisecond

// errClockStepped is MapError's for the acquire scripts' RLSTEP.
var errClockStepped = errors.New("ratelimiter: the server's clock stepped ahead")

type clockWatch struct {
	last    atomic.Pointer[clockRead]
	next    atomic.Int64 // unix ns before which no background reading is due
	running atomic.Bool
	slow    atomic.Int64             // ns: the slowest recent acquire round trip, decaying (noteTrip)
	arg     atomic.Pointer[stampArg] // the bound acquireStamp made last
}

// noteTrip counts an acquire call's round trip d: the slowest recent one
// takes d at once when d is longer, else comes an eighth of the way down
// to it, so that a spell of slow calls is forgotten over a few dozen fast
// ones.
func (w *clockWatch) noteTrip(d time.Duration) {
	cur := w.slow.Load()
	next := int64(d)
	if next < cur {
		next = cur - (cur-next)/8
	}
	w.slow.CompareAndSwap(cur, next) // a lost race loses one sample
}

// clockRead is one reading of the server's clock.
type clockRead struct {
	server time.Time     // the server's TIME
	local  time.Time     // this process's clock (monotonic) at the middle of the round trip
	rtt    time.Duration // the round trip
}

// watched reports whether the Conn bounds the scripts' clock: on a
// single master, with the server's clock. TIME on a Cluster or a Ring
// may reach any node.
func (c *Conn) watched() bool {
	_, ok := c.rdb.(*redis.Client)
	return ok && !c.clientClock
}

// acquireStamp is Stamp for the acquire scripts: on a watched Conn with a
// fresh reading, the most the server's clock may read now, in ms, and a
// '.'. A
// stale reading is renewed first, within ctx; a reading falling due is
// renewed in the background.
func (c *Conn) acquireStamp(ctx context.Context) any {
	if !c.watched() {
		return c.Stamp()
	}
	r := c.watch.last.Load()
	now := time.Now()
	if r == nil || now.Sub(r.local) > clockStepStale {
		r = c.readClock(ctx)
	} else if now.UnixNano() >= c.watch.next.Load() && c.watch.running.CompareAndSwap(false, true) {
		c.watch.next.Store(now.UnixNano() + int64(clockStepCheck))
		go func() {
			defer c.watch.running.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), clockStepCheck)
			defer cancel()
			c.readClock(ctx)
		}()
	}
	if r == nil {
		return ""
	}
	slack := clockStepMin + r.rtt + 2*time.Duration(c.watch.slow.Load())
	ms := r.server.Add(time.Since(r.local) + slack).UnixMilli()
	if a := c.watch.arg.Load(); a != nil && a.ms == ms {
		return a.arg // under load most calls of a ms: no string made each
	}
	var buf [14]byte
	most := strconv.AppendInt(buf[:0], ms, 10)
	if len(most) != 13 {
		return "" // before 2001 or after 2286: the scripts compare 13 digits
	}
	// The ms and a '.': the scripts tell it from a client's clock by its
	// length alone, and compare it with their own reading as a string
	// (lua/acquire.lua).
	a := &stampArg{ms: ms, arg: string(append(most, '.'))}
	c.watch.arg.Store(a)
	return a.arg
}

// stampArg is the bound acquireStamp sent last, as an argument.
type stampArg struct {
	ms  int64
	arg any
}

// readClock reads the server's clock and keeps the reading when its
// round trip is short enough to bound a step; it returns the reading
// kept, or nil.
func (c *Conn) readClock(ctx context.Context) *clockRead {
	start := time.Now()
	t, err := c.rdb.Time(ctx).Result()
	rtt := time.Since(start)
	if err != nil || rtt > clockStepRTT {
		return nil
	}
	r := &clockRead{server: t, local: start.Add(rtt / 2), rtt: rtt}
	c.watch.last.Store(r)
	return r
}

// scriptStepped is called when a script answered RLSTEP: it reads the
// server's clock again and records an event for the single master (each
// limiter's window is then filled once) when that reading and the one the
// bound came from show a step ahead. No two Clients see a step at the
// same moment: each one's fill has its own record.
func (c *Conn) scriptStepped(ctx context.Context) {
	before := c.watch.last.Load()
	start := time.Now()
	t, err := c.rdb.Time(ctx).Result()
	rtt := time.Since(start)
	if err != nil || before == nil {
		return
	}
	after := &clockRead{server: t, local: start.Add(rtt / 2), rtt: rtt}
	step := after.server.Sub(before.server) - after.local.Sub(before.local)
	if step > clockStepMin+(before.rtt+after.rtt)/2 {
		c.restart.stepped("", rand.Uint64())
	} else {
		// The call waited longer on its way than any lately.
		c.watch.slow.Store(max(2*c.watch.slow.Load(), int64(clockStepMin)))
	}
	if rtt <= clockStepRTT {
		c.watch.last.Store(after)
	} else {
		c.watch.last.Store(nil)
	}
}
