package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// Reply forms of the acquire script (lua/acquire.lua).
const (
	formSingle = "0" // one request, one integer back
	formTable  = "1" // a table: rate, interval, reset, then per request granted, left, hint
	formStrict = "2" // formTable, and no grant after the first refusal (queued waiters)
)

// render returns the reply form the acquire scripts take for f: formSingle,
// formTable or formStrict, then "p" when the call may write the probe
// record (acquire.lua only: Table and Strict forms), and for a hold ":K"
// after it (grant only while K
// permits stay free; a request refused for that alone is held).
func render(f engine.Form) string {
	form := formTable
	switch f.Kind {
	case engine.Single:
		form = formSingle
	case engine.Strict:
		form = formStrict
	}
	if f.Probe && f.Kind != engine.Single {
		form += "p"
	}
	if f.Hold > 0 {
		form += ":" + strconv.FormatInt(f.Hold, 10)
	}
	return form
}

// formArg returns form as an argument: the plain forms are constants,
// which become interface values without an allocation.
func formArg(form string) any {
	switch form {
	case formSingle:
		return formSingle
	case formTable:
		return formTable
	case formStrict:
		return formStrict
	}
	return form
}

// memberRetries bounds the retries after a permit record collided with an
// existing one. Collisions need equal random parts: with 128 random bits
// they do not happen, with the old 32-bit formats they are rare.
const memberRetries = 8

// Acquire runs lua/acquire.lua once for the permits ns of the limiter of
// keys k, in order, and returns one verdict for each (engine.Target's
// Decide). Errors are Result's, not yet naming the limiter.
func (c *Conn) Acquire(ctx context.Context, k Keys, f engine.Form, ns []int64) engine.Reply {
	return c.decideWith(ctx, f, ns, func(ctx context.Context, args ...any) (any, error) {
		return c.evalAcquire(ctx, k, args...)
	}, parseVerdicts)
}

// decideWith runs an acquire script through eval (ARGV: clock, permit
// record, form, permits) and reads its reply with parse. A record
// collision is retried with a fresh record; nothing was granted by the
// colliding call.
func (c *Conn) decideWith(ctx context.Context, f engine.Form, ns []int64,
	eval func(context.Context, ...any) (any, error), parse func(any, string, []int64) ([]engine.Verdict, error)) engine.Reply {
	form := render(f)
	args := make([]any, 0, 3+len(ns))
	args = append(args, 0, nil, formArg(form))
	for _, n := range ns {
		args = append(args, n)
	}
	bounded := true // the clock argument bounds the server's clock (clockstep.go)
	for i := 0; i < memberRetries; i++ {
		args[0] = c.Stamp()
		if bounded {
			args[0] = c.acquireStamp(ctx)
		}
		if form == formSingle {
			args[1] = wire.New(c.format, c.tag, uint32(ns[0]))
		} else {
			args[1] = newPrefix(c.format, c.tag)
		}
		start, sentAt := time.Now(), c.clock()
		reply, err := eval(ctx, args...)
		b := engine.Reply{RoundTrip: time.Since(start), SentAt: sentAt}
		c.watch.noteTrip(b.RoundTrip)
		if errors.Is(err, errClockStepped) {
			// Nothing was written: look at the clock (a step is an
			// event, and the window is filled), then ask again unbounded.
			c.scriptStepped(ctx)
			bounded = false
			continue
		}
		var ackErr error
		if err != nil {
			// Declared here, errors.As's target (which escapes) is made
			// only for an error, not for every call.
			var ae *ackError
			if reply == nil || !errors.As(err, &ae) {
				b.Err = err
				return b
			}
			ackErr = ae
		}
		if v, ok := reply.(int64); ok && v == -1 {
			continue
		}
		if f.Probe {
			reply, b.Probe = probeNote(reply, ns)
		}
		b.Verdicts, b.Err = parse(reply, form, ns)
		for i := range b.Verdicts {
			if ackErr != nil && b.Verdicts[i].Res.Granted {
				// Granted by the master, not acknowledged: see ErrReplicaAck.
				b.Verdicts[i].Res.Granted, b.Verdicts[i].Err = false, ackErr
			}
		}
		return b
	}
	return engine.Reply{Err: fmt.Errorf("%w: %d permit record collisions in a row", ErrCorruptState, memberRetries)}
}

// probeNote splits off the two fields that a table reply of a form that may
// write the probe record ends with (lua/acquire.lua): its state and the ms
// until it expires. A reply of another shape is returned as it is, for
// parse to refuse.
func probeNote(reply any, ns []int64) (any, engine.ProbeNote) {
	t, ok := reply.([]any)
	if !ok || len(t) != 5+3*len(ns) {
		return reply, engine.ProbeNote{}
	}
	st, ok1 := t[len(t)-2].(int64)
	ms, ok2 := t[len(t)-1].(int64)
	if !ok1 || !ok2 || st < 0 || st > 3 {
		return reply, engine.ProbeNote{}
	}
	n := engine.ProbeNote{Read: true, There: st > 0, Wrote: st >= 2, Found: st == 1 || st == 2,
		Until: wire.Millis(max(ms, 0)) - wire.Millis(max(-ms, 0))}
	return t[:len(t)-2], n
}

// parseVerdicts reads the acquire script's reply (see lua/acquire.lua).
func parseVerdicts(reply any, form string, ns []int64) ([]engine.Verdict, error) {
	if form == formSingle {
		v, ok := reply.(int64)
		switch {
		case !ok || v == -1:
			return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
		case v >= 0:
			return []engine.Verdict{{Res: engine.Result{Granted: true, Remaining: v}}}, nil
		}
		// A refusal: minus the hint, at most the interval and 3 ms.
		return []engine.Verdict{{Res: engine.Result{RetryAfter: hintDuration(-v)}}}, nil
	}
	t, ok := reply.([]any)
	if !ok || len(t) != 3+3*len(ns) {
		return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
	}
	nums := make([]int64, len(t))
	for i, x := range t {
		if nums[i], ok = x.(int64); !ok {
			return nil, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
		}
	}
	// Remaining is never below 0, as AvailablePermits: a value below 0
	// (a rate lowered under permits in use) means none are left.
	rate, interval, reset := nums[0], millis(nums[1]), millis(nums[2])
	out := make([]engine.Verdict, len(ns))
	for i, n := range ns {
		g, left, hint := nums[3+3*i], max(nums[4+3*i], 0), nums[5+3*i]
		res := engine.Result{Granted: g == 1, Limit: rate, Interval: interval, Remaining: left, ResetAfter: reset}
		held := g == 2
		switch {
		case n > rate:
			out[i] = engine.Verdict{Res: engine.Result{Limit: rate, Interval: interval, Remaining: left, ResetAfter: reset}, Err: ErrPermitsExceedRate}
			continue
		case !res.Granted:
			res.RetryAfter = hintDuration(hint)
		}
		out[i] = engine.Verdict{Res: res, Held: held}
	}
	return out, nil
}

// hintDuration turns a hint in ms into a Duration that is positive (a
// refusal never says "retry now") and saturates instead of overflowing
// (wire.Millis).
func hintDuration(ms int64) time.Duration { return wire.Millis(max(ms, 1)) }

// millis is wire.Millis for lengths that may be 0 and are never negative.
func millis(ms int64) time.Duration { return wire.Millis(max(ms, 0)) }

// newPrefix returns a fresh permit record in format f without its last
// four bytes, which the acquire script fills with the permits granted.
func newPrefix(f wire.Format, tag wire.Tag) []byte {
	m := wire.New(f, tag, 0)
	return m[:len(m)-4]
}
