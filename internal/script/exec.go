package script

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Eval runs s, one of the library's scripts whose reply is one integer,
// on keys: EVALSHA, falling back to EVAL when Redis has lost its script
// cache. It first checks the user's permissions for s on the limiter's
// keys limiter (K1..K5, permissions.go). The error is Result's.
func (c *Conn) Eval(ctx context.Context, s *redis.Script, limiter, keys []string, args ...any) (int64, error) {
	v, err := Bounded(ctx, func() (int64, error) {
		if need, ok := scriptNeeds[s]; ok {
			if err := c.permitted(ctx, limiter, need.op, need.cmds); err != nil {
				return 0, err
			}
		}
		return s.Run(ctx, c.rdb, keys, args...).Int64()
	})
	return v, c.Result(err)
}

// evalAcquire runs the acquire script and returns its raw reply (see
// lua/acquire.lua). On a Conn with replica acknowledgements a grant also
// waits for the replicas (replicas.go); a short acknowledgement comes back
// as an *ackError with the reply. It waits on Redis until ctx is done:
// callers that must return earlier wait on it from another goroutine
// (internal/engine).
func (c *Conn) evalAcquire(ctx context.Context, k Keys, args ...any) (any, error) {
	keys := k.Overall
	if c.perClient.has(k.All[0]) {
		keys = k.PerClient
	}
	if err := c.permitted(ctx, keys, "acquire", needAcquire); err != nil {
		return nil, c.Result(err)
	}
	v, err := c.runAcquire(ctx, k, keys, args)
	if n, ok := v.(int64); ok && n == -2 {
		// The limiter is of the other mode: nothing was written. Remember
		// its mode for the next call, and send all five keys now.
		if len(keys) == 3 {
			c.perClient.add(k.All[0])
		} else {
			c.perClient.remove(k.All[0])
		}
		v, err = c.runAcquire(ctx, k, k.All, args)
	}
	return v, c.Result(err) // each caller's Decision names its own limiter
}

// runAcquire runs the acquire script once with keys, those of k that
// the call needs.
func (c *Conn) runAcquire(ctx context.Context, k Keys, keys []string, args []any) (any, error) {
	s := c.acquireScript(ctx, scriptAcquire, scriptAcquireEvicts)
	if c.ack.replicas > 0 {
		return c.evalAck(ctx, s, keys, [][]string{k.All}, args...)
	}
	return c.runGranting(ctx, s, keys, args, [][]string{k.All})
}

// Result is where the error of every Redis call the library makes ends:
// a cluster client learns of a topology change (topology.go), script
// errors become sentinel errors, and an ACL refusal makes the next call
// probe the user's permissions again (permissions.go).
func (c *Conn) Result(err error) error {
	err = innerScriptError(err)
	c.Observe(err)
	if aclRefusal(err) {
		c.forgetPermissions()
		return fmt.Errorf("%w: %w", ErrPermissionDenied, err)
	}
	return MapError(err)
}

// Bounded returns call's result, or ctx's error as soon as ctx is done
// while call still waits on Redis. go-redis does not bound every wait by
// the context (dials, a Sentinel's master lookup, and socket reads unless
// ContextTimeoutEnabled is set): in a Sentinel failover, a call with a
// 300 ms deadline came back seconds later (docs/operations.md). The
// abandoned call ends in the background within go-redis's own timeouts
// and its result is dropped; as with any call that timed out, an
// acquisition may have been applied. A context that can never be done
// costs no goroutine.
func Bounded[T any](ctx context.Context, call func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return call()
	}
	type reply struct {
		v   T
		err error
	}
	done := make(chan reply, 1)
	go func() {
		v, err := call()
		done <- reply{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
