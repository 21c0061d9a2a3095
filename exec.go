package ratelimiter

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// eval runs one of the library's scripts on the limiter's keys: EVALSHA,
// falling back to EVAL when Redis has lost its script cache. Every call
// that changes a limiter goes through here.
//
// On a client made with WithReplicaAck, acquisitions also wait for the
// replicas (replicas.go). Every error is shown to observe, which has a
// cluster client reload its slot map after a failover (topology.go).
func (r *RateLimiter) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	var (
		v   int64
		err error
	)
	if ack, ok := r.c.replicaAck(); ok && s == scriptAcquire {
		v, err = r.evalAck(ctx, s, ack, keys, args...)
	} else {
		v, err = s.Run(ctx, r.c.rdb, keys, args...).Int64()
	}
	r.c.observe(err)
	return v, scriptError(err)
}
