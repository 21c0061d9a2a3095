package script

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Clock samples for the root's clock skew check (clock_skew.go there).

// TimeSample is one comparison of the Client's clock with Redis's TIME.
type TimeSample struct {
	// Offset is the Client's clock minus Redis's TIME at the middle of the
	// fastest round trip; Uncertainty is half that round trip.
	Offset, Uncertainty time.Duration
	// At is the middle of that round trip, by the Client's clock.
	At time.Time
}

// SampleTime asks Redis for TIME samples times and keeps the fastest
// round trip.
func (c *Conn) SampleTime(ctx context.Context, samples int) (TimeSample, error) {
	var best TimeSample
	bestRTT := time.Duration(-1)
	for i := 0; i < samples; i++ {
		start, c0 := time.Now(), c.clock()
		server, err := c.rdb.Time(ctx).Result()
		rtt, c1 := time.Since(start), c.clock()
		if err != nil {
			return TimeSample{}, err
		}
		if bestRTT >= 0 && rtt >= bestRTT {
			continue
		}
		mid := c0.Add(c1.Sub(c0) / 2)
		bestRTT = rtt
		best = TimeSample{Offset: mid.Sub(server), Uncertainty: rtt / 2, At: mid}
	}
	return best, nil
}

// ShortestInterval reads the interval field of the config hashes keys, in
// one pipeline, and returns the shortest; 0 when none is configured.
func (c *Conn) ShortestInterval(ctx context.Context, keys []string) (time.Duration, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	pipe := c.rdb.Pipeline()
	for _, k := range keys {
		pipe.HGet(ctx, k, "interval")
	}
	cmds, err := pipe.Exec(ctx)
	var reply redis.Error
	if err != nil && !errors.As(err, &reply) {
		return 0, err // not a reply (redis.Nil is one): Redis was not reached
	}
	var shortest time.Duration
	for _, cmd := range cmds {
		s, err := cmd.(interface{ Result() (string, error) }).Result()
		if err != nil {
			continue // absent, or not a string: not a limiter now
		}
		ms, ok := wire.Decimal(s)
		if !ok || ms < 1 || ms > wire.MaxMS {
			continue // not an interval the scripts take
		}
		if d := time.Duration(ms) * time.Millisecond; shortest == 0 || d < shortest {
			shortest = d
		}
	}
	return shortest, nil
}
