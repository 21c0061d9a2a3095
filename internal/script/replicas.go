package script

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ackError is the error of an acquisition that Redis granted but that
// fewer replicas than asked for acknowledged in time (the root's
// ErrReplicaAck states the contract). It matches ErrReplicaAck and
// unwraps to WAIT's own error, if any.
type ackError struct {
	wanted int   // replicas asked for
	acked  int   // replicas that acknowledged the write in time
	err    error // why WAIT itself failed, if it did (then acked is 0)
}

// Error says how many replicas acknowledged of how many asked for, and
// that the permits were taken.
func (e *ackError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("%v: %d of %d (WAIT failed: %v); the permits were taken", ErrReplicaAck, e.acked, e.wanted, e.err)
	}
	return fmt.Sprintf("%v: %d of %d; the permits were taken", ErrReplicaAck, e.acked, e.wanted)
}

// Is makes errors.Is(err, ErrReplicaAck) true.
func (e *ackError) Is(target error) bool { return target == ErrReplicaAck }

// Unwrap returns the WAIT error, if any.
func (e *ackError) Unwrap() error { return e.err }

type replicaAck struct {
	replicas int
	timeout  time.Duration
}

// ackMargin is kept free before the context's deadline when the WAIT
// timeout is fitted into it, for the reply to come back.
const ackMargin = 5 * time.Millisecond

// evalAck runs an acquisition script and WAIT in one pipeline on the
// master's connection, and turns a short acknowledgement of a grant into
// an *ackError, returned with the script's reply. Otherwise it returns
// the script's raw reply and error.
func (c *Conn) evalAck(ctx context.Context, s *redis.Script, keys []string, limiters [][]string, args ...any) (any, error) {
	return c.evalAckIf(ctx, s, grantedAny, keys, limiters, args...)
}

// evalAckIf is evalAck for a script whose reply granted says whether it
// granted anything (lease.lua's differs from the acquire scripts').
// limiters (each K1..K5) are those it may grant from (runGranting).
func (c *Conn) evalAckIf(ctx context.Context, s *redis.Script, granted func(any) bool, keys []string, limiters [][]string, args ...any) (any, error) {
	if err := c.fillDue(ctx, limiters); err != nil {
		return nil, err
	}
	ack := c.ack
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
		p, err = c.ackPipeline(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		script, wait = s.EvalSha(ctx, p, keys, args...), pipeWait(ctx, p, ack.replicas, timeout)
		_, _ = p.Exec(ctx)
		if redis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
			// The master's script cache is empty (a promoted replica, a
			// restart, SCRIPT FLUSH): look at it (restart.go), then send
			// the source.
			if err := c.afterNoScript(ctx, keys[0], limiters); err != nil {
				return nil, err
			}
			script, wait = s.Eval(ctx, p, keys, args...), pipeWait(ctx, p, ack.replicas, timeout)
			_, _ = p.Exec(ctx)
		}
		err = script.Err()
		if !movedError(err) {
			break
		}
		// The slot moved: have the cluster client learn where, then retry
		// on the new master (nothing ran on the old one).
		c.Observe(err)
		if werr := c.waitNewOwner(ctx, keys[0]); werr != nil {
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
		return v, &ackError{wanted: ack.replicas, err: werr}
	}
	if int(acked) < ack.replicas {
		return v, &ackError{wanted: ack.replicas, acked: int(acked)}
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
func (c *Conn) ackPipeline(ctx context.Context, key string) (redis.Pipeliner, error) {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Pipeline(), nil
	}
	if _, ok := c.rdb.(*redis.Ring); ok {
		return nil, Invalid("WithReplicaAck does not work with redis.Ring")
	}
	return c.rdb.Pipeline(), nil
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
func (c *Conn) waitNewOwner(ctx context.Context, key string) error {
	cc, ok := c.rdb.(*redis.ClusterClient)
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
