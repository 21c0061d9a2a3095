package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// decide runs the composite's acquire script (lua/acquire_all.lua) once
// for the permits ns, in order, and returns one verdict for each.
func (a *Composite) decide(ctx context.Context, form string, ns []int64) batchReply {
	return a.c.decideWith(ctx, form, ns, a.eval, a.parse)
}

// eval runs the script on every part's keys: one EVALSHA, with WAIT in
// the same round trip on a client made with WithReplicaAck.
func (a *Composite) eval(ctx context.Context, args ...any) (any, error) {
	if err := a.c.permitted(ctx, a.parts[0].keyList, "acquire", needAcquireAll); err != nil {
		return nil, a.c.result(err)
	}
	var v any
	var err error
	if ack, ok := a.c.replicaAck(); ok {
		v, err = a.parts[0].evalAck(ctx, a.c.acquireScript(ctx, scriptAcquireAll, scriptAcquireAllEvicts), ack, a.keys, args...)
	} else {
		v, err = a.c.acquireScript(ctx, scriptAcquireAll, scriptAcquireAllEvicts).Run(ctx, a.c.rdb, a.keys, args...).Result()
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
	if perr != nil || p < 1 || p > len(a.parts) {
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
	return a.partError(p-1, sentinel)
}

// partError names part i in err.
func (a *Composite) partError(i int, err error) error { return a.parts[i].wrap(err) }

// parse reads the script's reply (see lua/acquire_all.lua). Form '0' is
// the single limiter's.
func (a *Composite) parse(reply any, form string, ns []int64) ([]verdict, error) {
	if form == formSingle {
		return parseVerdicts(reply, form, ns)
	}
	bad := fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, reply)
	t, ok := reply.([]any)
	if !ok || len(t) != 3+3*len(ns) {
		return nil, bad
	}
	k := len(a.parts)
	head, ok1 := ints(t[:1], 1)
	parts, ok2 := ints(t[1], 3*k)
	binds, ok3 := ints(t[2], len(ns))
	rest, ok4 := ints(t[3:], 3*len(ns))
	if !ok1 || !ok2 || !ok3 || !ok4 || head[0] != int64(k) {
		return nil, bad
	}
	out := make([]verdict, len(ns))
	for i, n := range ns {
		b := binds[i] - 1
		if b < 0 || b >= int64(k) {
			return nil, bad
		}
		g, left, hint := rest[3*i], max(rest[3*i+1], 0), rest[3*i+2] // never below 0, as AvailablePermits
		rate := parts[3*b]
		res := Result{Granted: g == 1, Limit: rate, Interval: millis(parts[3*b+1]), Remaining: left, ResetAfter: millis(parts[3*b+2]), Part: int(b)}
		switch {
		case n > rate:
			res.Granted = false
			out[i] = verdict{res: res, err: a.partError(int(b), ErrPermitsExceedRate)}
			continue
		case !res.Granted:
			res.RetryAfter = hintDuration(hint)
		}
		out[i] = verdict{res: res}
	}
	return out, nil
}

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
