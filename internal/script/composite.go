package script

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// Parts describes a composite for its scripts (the root's Composite).
type Parts struct {
	// Keys are K1..K5 of every part with a weight, part after part.
	Keys []string
	// Weights are those parts' weights (int64), as the script takes them.
	Weights []any
	// On is, for each part with a weight, its index among all parts.
	On []int
	// N is the number of parts, those of weight 0 included.
	N int
	// Weighted: a weight is not 1 (Remaining is then the binding part's).
	Weighted bool
}

// PartError is an error of one part of a composite: the root names that
// part's limiter in it.
type PartError struct {
	Part int   // the part's index among all parts
	Err  error // a sentinel error, wrapped
}

// Error returns Err's text.
func (e *PartError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *PartError) Unwrap() error { return e.Err }

// AcquireAll runs lua/acquire_all.lua once for the permits ns of the
// composite p, in order, and returns one verdict for each.
func (c *Conn) AcquireAll(ctx context.Context, p *Parts, f engine.Form, ns []int64) engine.Reply {
	return c.decideWith(ctx, f, ns, func(ctx context.Context, args ...any) (any, error) {
		return c.evalAll(ctx, p, args...)
	}, p.parse)
}

// ReleaseAll runs lua/release_all.lua: n permits times each weight back
// to the parts of p with a weight, in one script call.
func (c *Conn) ReleaseAll(ctx context.Context, p *Parts, n int64) error {
	mark, at := c.OwnMark()
	args := make([]any, 0, 3+len(p.On))
	args = append(args, c.Stamp(), mark, at)
	for _, w := range p.Weights {
		args = append(args, n*w.(int64))
	}
	_, err := Bounded(ctx, func() (any, error) {
		if err := c.permitted(ctx, p.Keys[:5], "Release", needRelease); err != nil {
			return nil, err
		}
		return scriptReleaseAll.Run(ctx, c.rdb, p.Keys, args...).Result()
	})
	if err != nil {
		err = c.partsError(p, err)
	}
	return err
}

// evalAll runs the script on every part's keys: one EVALSHA, with WAIT in
// the same round trip on a Conn with replica acknowledgements. The parts'
// weights go after the reply form (ARGV[4] on).
func (c *Conn) evalAll(ctx context.Context, p *Parts, args ...any) (any, error) {
	keys := c.modeKeys(p)
	if err := c.permitted(ctx, keys[:5], "acquire", needAcquireAll); err != nil {
		return nil, c.Result(err)
	}
	full := make([]any, 0, len(args)+len(p.Weights))
	full = append(append(append(full, args[:3]...), p.Weights...), args[3:]...)
	s := c.acquireScript(ctx, scriptAcquireAll, scriptAcquireAllEvicts)
	run := func(keys []string) (any, error) {
		if c.ack.replicas > 0 {
			return c.evalAck(ctx, s, keys, parts(p.Keys), full...)
		}
		return c.runGranting(ctx, s, keys, full, parts(p.Keys))
	}
	v, err := run(keys)
	if n := modeMismatch(err, len(p.On)); n > 0 {
		// Part n is of the other mode: nothing was written. Remember its
		// mode for the next call, and send every part's five keys now.
		config := p.Keys[(n-1)*5]
		if keys[(n-1)*5+2] == config {
			c.perClient.add(config)
		} else {
			c.perClient.remove(config)
		}
		v, err = run(p.Keys)
	}
	return v, c.partsError(p, err)
}

// modeKeys returns p.Keys with each part's keys of the mode the Conn takes
// it for, the other mode's given as its K1: K1, K2, K1, K4, K1 for
// OVERALL and K1, K1, K3, K1, K5 for PER_CLIENT (Keys). The acquire
// script then declares only keys that exist.
func (c *Conn) modeKeys(p *Parts) []string {
	out := make([]string, len(p.Keys))
	for i := 0; i+5 <= len(p.Keys); i += 5 {
		k, o := p.Keys[i:i+5], out[i:i+5]
		if c.perClient.has(k[0]) {
			o[0], o[1], o[2], o[3], o[4] = k[0], k[0], k[2], k[0], k[4]
		} else {
			o[0], o[1], o[2], o[3], o[4] = k[0], k[1], k[0], k[3], k[0]
		}
	}
	return out
}

// modeMismatch returns the part (1-based, at most parts) that
// lua/acquire_all.lua found of the other mode than the keys sent
// ('RLMODE p'), or 0.
func modeMismatch(err error, parts int) int {
	var rerr redis.Error
	if !errors.As(innerScriptError(err), &rerr) {
		return 0
	}
	rest, ok := strings.CutPrefix(rerr.Error(), "RLMODE ")
	if !ok {
		return 0
	}
	num, _, _ := strings.Cut(rest, " ")
	n, perr := strconv.Atoi(num)
	if perr != nil || n < 1 || n > parts {
		return 0
	}
	return n
}

// partsError maps the script's errors, which carry the part after their
// prefix ("RLNOTINIT 2 ..."), to a *PartError of the sentinel error;
// other errors go the way of every Redis error (Result).
func (c *Conn) partsError(p *Parts, err error) error {
	err = innerScriptError(err)
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return c.Result(err)
	}
	msg := rerr.Error()
	if i := strings.Index(msg, " script: "); i >= 0 {
		msg = msg[:i]
	}
	code, rest, _ := strings.Cut(msg, " ")
	num, text, _ := strings.Cut(rest, " ")
	n, perr := strconv.Atoi(num)
	if perr != nil || n < 1 || n > len(p.On) {
		return c.Result(err)
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
		return c.Result(err)
	}
	c.Observe(err)
	return &PartError{Part: p.On[n-1], Err: sentinel}
}

// parse reads the script's reply (see lua/acquire_all.lua). Form '0' is
// the single limiter's. Part indices in the reply count the parts with a
// weight (On); Result's count every part.
func (a *Parts) parse(reply any, form string, ns []int64) ([]engine.Verdict, error) {
	if form == formSingle {
		return parseVerdicts(reply, form, ns)
	}
	bad := fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
	t, ok := reply.([]any)
	if !ok || len(t) != 3+3*len(ns) {
		return nil, bad
	}
	k := len(a.On)
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
		res := engine.Result{Granted: rest[3*i] == 1, Part: a.On[b], Parts: make([]engine.PartResult, a.N)}
		over := -1 // the first part whose rate is below its permits
		for q, idx := range a.On {
			w := a.Weights[q].(int64)
			pr := engine.PartResult{
				Permits:    n * w,
				Limit:      parts[3*q],
				Interval:   millis(parts[3*q+1]),
				ResetAfter: millis(parts[3*q+2]),
				Remaining:  max(each[2*q], 0), // never below 0, as AvailablePermits
			}
			switch {
			case ExceedsRate(n, w, pr.Limit):
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
		if a.Weighted {
			res.Remaining = bp.Remaining // parts count different things
		}
		switch {
		case over >= 0:
			res.Granted, res.Part = false, over
			bp = res.Parts[over]
			res.Limit, res.Interval, res.ResetAfter = bp.Limit, bp.Interval, bp.ResetAfter
			if a.Weighted {
				res.Remaining = bp.Remaining
			}
			out[i] = engine.Verdict{Res: res, Err: &PartError{Part: over, Err: ErrPermitsExceedRate}}
			continue
		case !res.Granted:
			res.RetryAfter = hintDuration(rest[3*i+2])
		}
		out[i] = engine.Verdict{Res: res}
	}
	return out, nil
}

// ExceedsRate reports whether n permits of weight w can never be granted
// by a limiter of rate: n × w above the rate. It is the rule that
// acquire_all.lua applies before deciding (RLEXCEED, and a request
// refused with hint 0); TestWeightedExceedsRateAgrees checks that both
// agree.
func ExceedsRate(n, w, rate int64) bool { return n*w > rate }

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
