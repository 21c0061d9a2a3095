package ratelimiter

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// eval runs one of the library's scripts whose reply is one integer on
// the limiter's keys: EVALSHA, falling back to EVAL when Redis has lost
// its script cache.
func (r *Limiter) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	v, err := bounded(ctx, func() (int64, error) {
		if need, ok := scriptNeeds[s]; ok {
			if err := r.c.permitted(ctx, r.keyList, need.op, need.cmds); err != nil {
				return 0, err
			}
		}
		return s.Run(ctx, r.c.rdb, keys, args...).Int64()
	})
	return v, r.result(err)
}

// evalAcquire runs the acquire script and returns its raw reply (see
// lua/acquire.lua). On a client made with WithReplicaAck a grant also
// waits for the replicas (redis_replicas.go); a short acknowledgement comes back
// as a *ReplicaAckError with the reply. It waits on Redis until ctx is
// done: callers that must return earlier wait on it from another
// goroutine (internal/engine).
func (r *Limiter) evalAcquire(ctx context.Context, args ...any) (any, error) {
	if err := r.c.permitted(ctx, r.keyList, "acquire", needAcquire); err != nil {
		return nil, r.c.result(err)
	}
	keys := r.overall
	if r.c.perClient.has(r.keyList[0]) {
		keys = r.keyList
	}
	v, err := r.runAcquire(ctx, keys, args)
	if n, ok := v.(int64); ok && n == -2 && len(keys) == 3 {
		// PER_CLIENT: nothing was written; send all five keys from now on.
		r.c.perClient.add(r.keyList[0])
		v, err = r.runAcquire(ctx, r.keyList, args)
	}
	return v, r.c.result(err) // each caller's Decision names its own limiter
}

// runAcquire runs the acquire script once with keys.
func (r *Limiter) runAcquire(ctx context.Context, keys []string, args []any) (any, error) {
	s := r.c.acquireScript(ctx, scriptAcquire, scriptAcquireEvicts)
	if ack, ok := r.c.replicaAck(); ok {
		return r.evalAck(ctx, s, ack, keys, args...)
	}
	return s.Run(ctx, r.c.rdb, keys, args...).Result()
}

// result is where the error of every Redis call the library makes ends:
// a cluster client learns of a topology change (redis_topology.go), script
// errors become sentinel errors, and an ACL refusal makes the next call
// probe the user's permissions again (redis_permissions.go).
func (c *Client) result(err error) error {
	err = innerScriptError(err)
	c.observe(err)
	if aclRefusal(err) {
		c.forgetPermissions()
		return fmt.Errorf("%w: %w", ErrPermissionDenied, err)
	}
	return scriptError(err)
}

// bounded returns call's result, or ctx's error as soon as ctx is done
// while call still waits on Redis. go-redis does not bound every wait by
// the context (dials, a Sentinel's master lookup, and socket reads unless
// ContextTimeoutEnabled is set): measured in a Sentinel failover, a call
// with a 300 ms deadline came back after 4.2 s. The abandoned call ends in
// the background within go-redis's own timeouts and its result is
// dropped; as with any call that timed out, an acquisition may have been
// applied. A context that can never be done costs no goroutine.
func bounded[T any](ctx context.Context, call func() (T, error)) (T, error) {
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
