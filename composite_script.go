package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// Decide runs the composite's acquire script (lua/acquire_all.lua) once
// for the permits ns, in order, and returns one verdict for each.
func (t *compositeTarget) Decide(ctx context.Context, f engine.Form, ns []int64) engine.Reply {
	a := (*Composite)(t)
	return a.c.decideWith(ctx, f, ns, a.eval, a.parse)
}

// eval runs the script on every part's keys: one EVALSHA, with WAIT in
// the same round trip on a client made with WithReplicaAck.
// The parts' weights go after the reply form (ARGV[4] on).
func (a *Composite) eval(ctx context.Context, args ...any) (any, error) {
	if err := a.c.permitted(ctx, a.onKeys[:5], "acquire", needAcquireAll); err != nil {
		return nil, a.c.result(err)
	}
	full := make([]any, 0, len(args)+len(a.onArgs))
	full = append(append(append(full, args[:3]...), a.onArgs...), args[3:]...)
	var v any
	var err error
	if ack, ok := a.c.replicaAck(); ok {
		v, err = a.parts[a.on[0]].evalAck(ctx, a.c.acquireScript(ctx, scriptAcquireAll, scriptAcquireAllEvicts), ack, a.onKeys, full...)
	} else {
		v, err = a.c.acquireScript(ctx, scriptAcquireAll, scriptAcquireAllEvicts).Run(ctx, a.c.rdb, a.onKeys, full...).Result()
	}
	return v, a.scriptError(err)
}

// scriptError maps the script's errors, which carry the part after their
// prefix ("RLNOTINIT 2 ..."), to the sentinel errors wrapped with the
// part's name; other errors go the way of every Redis error (Client.result).
func (a *Composite) scriptError(err error) error {
	err = innerScriptError(err)
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return a.c.result(err)
	}
	msg := rerr.Error()
	if i := strings.Index(msg, " script: "); i >= 0 {
		msg = msg[:i]
	}
	code, rest, _ := strings.Cut(msg, " ")
	num, text, _ := strings.Cut(rest, " ")
	p, perr := strconv.Atoi(num)
	if perr != nil || p < 1 || p > len(a.on) {
		return a.c.result(err)
	}
	var sentinel error
	switch code {
	case "RLNOTINIT":
		sentinel = ErrNotInitialized
	case "RLEXCEED":
		sentinel = ErrPermitsExceedRate
	case "RLSTATE":
		sentinel = fmt.Errorf("%w: %s", ErrCorruptState, text)
	default:
		return a.c.result(err)
	}
	a.c.observe(err)
	return a.partError(a.on[p-1], sentinel)
}

// partError names part i in err.
func (a *Composite) partError(i int, err error) error { return a.parts[i].wrap(err) }

// parse reads the script's reply (see lua/acquire_all.lua). Form '0' is
// the single limiter's. Part indices in the reply count the parts with a
// weight (a.on); Result's count every part.
func (a *Composite) parse(reply any, form string, ns []int64) ([]engine.Verdict, error) {
	if form == formSingle {
		return parseVerdicts(reply, form, ns)
	}
	bad := fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
	t, ok := reply.([]any)
	if !ok || len(t) != 3+3*len(ns) {
		return nil, bad
	}
	k := len(a.on)
	head, ok1 := ints(t[:1], 1)
	parts, ok2 := ints(t[1], 3*k+2*k*len(ns))
	binds, ok3 := ints(t[2], len(ns))
	rest, ok4 := ints(t[3:], 3*len(ns))
	if !ok1 || !ok2 || !ok3 || !ok4 || head[0] != int64(k) {
		return nil, bad
	}
	out := make([]engine.Verdict, len(ns))
	for i, n := range ns {
		b := binds[i] - 1
		if b < 0 || b >= int64(k) {
			return nil, bad
		}
		each := parts[3*k+2*k*i : 3*k+2*k*(i+1)]
		res := engine.Result{Granted: rest[3*i] == 1, Part: a.on[b], Parts: make([]engine.PartResult, len(a.parts))}
		over := -1 // the first part whose rate is below its permits
		for q, idx := range a.on {
			w := a.onArgs[q].(int64)
			pr := engine.PartResult{
				Permits:    n * w,
				Limit:      parts[3*q],
				Interval:   millis(parts[3*q+1]),
				ResetAfter: millis(parts[3*q+2]),
				Remaining:  max(each[2*q], 0), // never below 0, as AvailablePermits
			}
			switch {
			case exceedsRate(n, w, pr.Limit):
				pr.Short = true
				if over < 0 {
					over = idx
				}
			case each[2*q+1] > 0:
				pr.Short, pr.RetryAfter = true, hintDuration(each[2*q+1])
			}
			res.Parts[idx] = pr
		}
		bp := res.Parts[res.Part]
		res.Limit, res.Interval, res.ResetAfter = bp.Limit, bp.Interval, bp.ResetAfter
		res.Remaining = max(rest[3*i+1], 0) // the fewest left among the parts
		if a.weighted {
			res.Remaining = bp.Remaining // parts count different things
		}
		switch {
		case over >= 0:
			res.Granted, res.Part = false, over
			bp = res.Parts[over]
			res.Limit, res.Interval, res.ResetAfter = bp.Limit, bp.Interval, bp.ResetAfter
			if a.weighted {
				res.Remaining = bp.Remaining
			}
			out[i] = engine.Verdict{Res: res, Err: a.partError(over, ErrPermitsExceedRate)}
			continue
		case !res.Granted:
			res.RetryAfter = hintDuration(rest[3*i+2])
		}
		out[i] = engine.Verdict{Res: res}
	}
	return out, nil
}

// exceedsRate reports whether n permits of weight w can never be granted
// by a limiter of rate: n × w above the rate. It is the rule that
// acquire_all.lua applies before deciding (RLEXCEED, and a request
// refused with hint 0); TestWeightedExceedsRateAgrees checks that both
// agree.
func exceedsRate(n, w, rate int64) bool { return n*w > rate }

// ints reads x, a []any of want integers.
func ints(x any, want int) ([]int64, bool) {
	t, ok := x.([]any)
	if !ok || len(t) != want {
		return nil, false
	}
	out := make([]int64, want)
	for i, v := range t {
		if out[i], ok = v.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}
