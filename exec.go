package ratelimiter

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// eval runs one of the library's scripts whose reply is one integer on
// the limiter's keys: EVALSHA, falling back to EVAL when Redis has lost
// its script cache.
func (r *RateLimiter) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	v, err := s.Run(ctx, r.c.rdb, keys, args...).Int64()
	return v, r.c.result(err)
}

// evalAcquire runs the acquire script, whose reply is {code, value}. On a
// client made with WithReplicaAck a grant also waits for the replicas
// (replicas.go).
func (r *RateLimiter) evalAcquire(ctx context.Context, args ...any) (code, value int64, err error) {
	var v []int64
	if ack, ok := r.c.replicaAck(); ok {
		v, err = r.evalAck(ctx, scriptAcquire, ack, r.keys.all(), args...)
	} else {
		v, err = scriptAcquire.Run(ctx, r.c.rdb, r.keys.all(), args...).Int64Slice()
	}
	if err != nil {
		return 0, 0, r.c.result(err)
	}
	if len(v) != 2 {
		return 0, 0, fmt.Errorf("%w: acquire script replied %v", ErrCorruptState, v)
	}
	return v[0], v[1], nil
}

// result is where the error of every Redis call the library makes ends:
// a cluster client learns of a topology change (topology.go), and script
// errors become sentinel errors.
func (c *Client) result(err error) error {
	c.observe(err)
	return scriptError(err)
}
