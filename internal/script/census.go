package script

import (
	"context"
	"time"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// Census reads a limiter's interval and the newest max records of its
// window (keys k), in one round trip: what fair wakes weigh
// (internal/engine).
func (c *Conn) Census(ctx context.Context, k wire.Keys, max int) (time.Duration, []engine.Record, error) {
	pipe := c.rdb.Pipeline()
	iv := pipe.HGet(ctx, k.Config, "interval")
	zr := pipe.ZRangeWithScores(ctx, k.Permits, -int64(max), -1)
	_, _ = pipe.Exec(ctx)
	ms, err := iv.Int64()
	if err != nil {
		return 0, nil, err
	}
	zs, err := zr.Result()
	if err != nil {
		return 0, nil, err
	}
	recs := make([]engine.Record, len(zs))
	for i, z := range zs {
		s, _ := z.Member.(string)
		recs[i] = engine.Record{Score: z.Score, Member: s}
	}
	return millis(ms), recs, nil
}
