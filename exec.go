package ratelimiter

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// eval runs one of the library's scripts on the limiter's keys: EVALSHA,
// falling back to EVAL when Redis has lost its script cache. Every call
// that changes a limiter goes through here.
func (r *RateLimiter) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	v, err := s.Run(ctx, r.c.rdb, keys, args...).Int64()
	return v, scriptError(err)
}
