package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrReplicaAck is matched (errors.Is) by the error of an acquisition that
// Redis granted but that fewer replicas than WithReplicaAck asks for
// acknowledged in time. See ReplicaAckError.
var ErrReplicaAck = errors.New("ratelimiter: acquisition not acknowledged by enough replicas")

// ReplicaAckError is returned, with a false grant, by an acquisition
// (TryAcquire, TryAcquireTimeout, Acquire, Allow) on a client made with
// WithReplicaAck when Redis granted the permits but fewer than Wanted
// replicas acknowledged the write within the timeout.
//
// The permits HAVE been taken on the master: they count against the limit
// until their interval ends, and they are not given back. The call reports
// them as not granted because the grant may not survive a failover: if the
// master crashes now, a replica without the write can take over, forget
// it, and grant the same permits again. Failing closed keeps the limit
// (callers act only on grants that are on Acked+1 servers) at the cost of
// availability: while a master has fewer replicas than Wanted (a replica
// is down, or a cluster shard lost its only replica in a failover), every
// acquisition waits the timeout and fails. A caller that prefers
// availability may treat the error as a grant:
//
//	ok, err := lim.TryAcquire(ctx, 1)
//	var ack *ratelimiter.ReplicaAckError
//	if errors.As(err, &ack) {
//		ok, err = true, nil // granted by the master, not yet durable
//	}
//
// A blocking Acquire returns the error at once and does not wait again.
type ReplicaAckError struct {
	Wanted int   // replicas asked for (WithReplicaAck)
	Acked  int   // replicas that acknowledged the write in time
	Err    error // why WAIT itself failed, if it did (then Acked is 0)
}

// Error says how many replicas acknowledged of how many asked for, and
// that the permits were taken.
func (e *ReplicaAckError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: %d of %d (WAIT failed: %v); the permits were taken", ErrReplicaAck, e.Acked, e.Wanted, e.Err)
	}
	return fmt.Sprintf("%v: %d of %d; the permits were taken", ErrReplicaAck, e.Acked, e.Wanted)
}

// Is makes errors.Is(err, ErrReplicaAck) true.
func (e *ReplicaAckError) Is(target error) bool { return target == ErrReplicaAck }

// Unwrap returns the WAIT error, if any.
func (e *ReplicaAckError) Unwrap() error { return e.Err }

type replicaAck struct {
	replicas int
	timeout  time.Duration
}

func (c *Client) replicaAck() (replicaAck, bool) { return c.ack, c.ack.replicas > 0 }

// ackMargin is kept free before the context's deadline when the WAIT
// timeout is fitted into it, for the reply to come back.
const ackMargin = 5 * time.Millisecond

// evalAck runs an acquisition script and WAIT in one pipeline on the
// master's connection, and turns a short acknowledgement of a grant into a
// *ReplicaAckError, returned with the script's reply. Otherwise it returns
// the script's raw reply and error.
func (r *Limiter) evalAck(ctx context.Context, s *redis.Script, ack replicaAck, keys []string, args ...any) (any, error) {
	return r.evalAckIf(ctx, s, ack, grantedAny, keys, args...)
}

// evalAckIf is evalAck for a script whose reply granted says whether it
// granted anything (lease.lua's differs from the acquire scripts').
func (r *Limiter) evalAckIf(ctx context.Context, s *redis.Script, ack replicaAck, granted func(any) bool, keys []string, args ...any) (any, error) {
	timeout := ack.timeout
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl) - ackMargin; rem < timeout {
			timeout = rem
		}
	}
	if timeout < time.Millisecond {
		timeout = time.Millisecond // WAIT 0 would block forever
	}

	var (
		script *redis.Cmd
		wait   func() (int64, error)
		err    error
	)
	for attempt := 0; attempt < 3; attempt++ {
		var p redis.Pipeliner
		p, err = r.ackPipeline(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		script, wait = s.EvalSha(ctx, p, keys, args...), pipeWait(ctx, p, ack.replicas, timeout)
		_, _ = p.Exec(ctx)
		if redis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
			// The master's script cache is empty (a promoted replica, a
			// restart, SCRIPT FLUSH): send the source.
			script, wait = s.Eval(ctx, p, keys, args...), pipeWait(ctx, p, ack.replicas, timeout)
			_, _ = p.Exec(ctx)
		}
		err = script.Err()
		if !movedError(err) {
			break
		}
		// The slot moved: have the cluster client learn where, then retry
		// on the new master (nothing ran on the old one).
		r.c.observe(err)
		if werr := r.waitNewOwner(ctx, keys[0]); werr != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	v, err := script.Result()
	if err != nil || !granted(v) { // nothing to acknowledge
		return v, err
	}
	acked, werr := wait()
	if werr != nil {
		return v, &ReplicaAckError{Wanted: ack.replicas, Err: werr}
	}
	if int(acked) < ack.replicas {
		return v, &ReplicaAckError{Wanted: ack.replicas, Acked: int(acked)}
	}
	return v, nil
}

// grantedAny reports whether an acquire script reply grants anything.
func grantedAny(reply any) bool {
	switch v := reply.(type) {
	case int64:
		return v >= 0
	case []any:
		for i := 3; i < len(v); i += 3 {
			if g, _ := v[i].(int64); g == 1 {
				return true
			}
		}
	}
	return false
}

// ackPipeline returns a pipeline whose commands all go over one connection
// to the master of key: WAIT counts the acknowledgements of the writes made
// on its own connection.
func (r *Limiter) ackPipeline(ctx context.Context, key string) (redis.Pipeliner, error) {
	if cc, ok := r.c.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Pipeline(), nil
	}
	if _, ok := r.c.rdb.(*redis.Ring); ok {
		return nil, invalid("WithReplicaAck does not work with redis.Ring")
	}
	return r.c.rdb.Pipeline(), nil
}

// pipeWait queues WAIT and returns a function that reads its reply after
// Exec. It uses go-redis's Wait where the pipeline has it (*redis.Pipeline
// does, the Pipeliner interface does not), because that one also stretches
// the command's read timeout by the WAIT timeout.
func pipeWait(ctx context.Context, p redis.Pipeliner, replicas int, timeout time.Duration) func() (int64, error) {
	if w, ok := p.(interface {
		Wait(context.Context, int, time.Duration) *redis.IntCmd
	}); ok {
		return w.Wait(ctx, replicas, timeout).Result
	}
	cmd := redis.NewCmd(ctx, "wait", replicas, timeout.Milliseconds())
	_ = p.Process(ctx, cmd)
	return cmd.Int64
}

func movedError(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN")
}

// waitNewOwner polls the cluster client's slot map (every 10 ms, at most
// 500 ms or until ctx is done) until the master of key changes.
func (r *Limiter) waitNewOwner(ctx context.Context, key string) error {
	cc, ok := r.c.rdb.(*redis.ClusterClient)
	if !ok {
		return errors.New("not a cluster client")
	}
	old, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	oldAddr := old.Options().Addr
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for i := 0; i < 50; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		cc.ReloadState(ctx)
		n, err := cc.MasterForKey(ctx, key)
		if err == nil && n.Options().Addr != oldAddr {
			return nil
		}
	}
	return errors.New("slot owner did not change")
}
