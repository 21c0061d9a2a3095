package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// limitState is what the RateLimit fields report, read from Redis after
// the decision.
type limitState struct {
	rate      int64         // permits per interval
	interval  time.Duration // window
	available int64         // permits left
	nextFree  time.Duration // until the oldest record in the window expires; 0 when none
}

// readState reads the limiter's config, value and oldest permit record in
// one pipelined round trip. It only reads: the acquisition just before
// released the expired records, so the value is current up to requests
// running at the same time.
func readState(ctx context.Context, rdb redis.Cmdable, k ratelimiter.Keys, now time.Time) (limitState, error) {
	var (
		cfg      *redis.SliceCmd
		val      [2]*redis.StringCmd
		firstRec [2]*redis.ZSliceCmd
	)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		cfg = p.HMGet(ctx, k.Config, "rate", "interval", "type")
		val[0] = p.Get(ctx, k.Value)
		val[1] = p.Get(ctx, k.ClientValue)
		firstRec[0] = p.ZRangeWithScores(ctx, k.Permits, 0, 0)
		firstRec[1] = p.ZRangeWithScores(ctx, k.ClientPermits, 0, 0)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return limitState{}, err
	}
	f, err := cfg.Result()
	if err != nil {
		return limitState{}, err
	}
	num := func(v any) (int64, bool) {
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	rate, ok1 := num(f[0])
	interval, ok2 := num(f[1])
	mode, ok3 := num(f[2])
	if !ok1 || !ok2 || !ok3 || (mode != 0 && mode != 1) {
		return limitState{}, fmt.Errorf("%w: config of %s is %v", ratelimiter.ErrCorruptState, k.Config, f)
	}
	st := limitState{rate: rate, interval: time.Duration(interval) * time.Millisecond, available: rate}
	if s, err := val[mode].Result(); err == nil {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			st.available = max(v, 0)
		}
	}
	if z, err := firstRec[mode].Result(); err == nil && len(z) == 1 {
		expires := time.UnixMilli(int64(z[0].Score)).Add(st.interval)
		st.nextFree = max(expires.Sub(now), 0)
	}
	return st, nil
}

// setHeaders writes RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-11) in requests.
func (l *Middleware) setHeaders(ctx context.Context, h http.Header, rl *ratelimiter.Limiter, granted bool, retrySecs int64) error {
	st, err := readState(ctx, l.rdb, rl.Keys(), time.Now())
	if err != nil {
		return fmt.Errorf("httplimit: reading limiter state for RateLimit headers: %w", err)
	}
	policy := strconv.Quote(l.policy) + ";q=" + strconv.FormatInt(st.rate/l.permits, 10)
	if st.interval >= time.Second && st.interval%time.Second == 0 {
		policy += ";w=" + strconv.FormatInt(int64(st.interval/time.Second), 10)
	}
	remaining, t := st.available/l.permits, ceilSeconds(st.nextFree)
	if !granted {
		remaining, t = 0, retrySecs
	}
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", strconv.Quote(l.policy)+";r="+strconv.FormatInt(remaining, 10)+";t="+strconv.FormatInt(t, 10))
	return nil
}
