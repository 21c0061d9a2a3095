package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// memorySample is what one contender's limiters hold in Redis.
type memorySample struct {
	limiters       int     // idle limiters created
	perLimiter     float64 // used_memory per idle limiter, bytes
	keysPerLimiter float64
	permits        int64   // grants held in the window
	perPermit      float64 // used_memory per grant held in the window, bytes
}

// memory measures, per contender, the bytes of an idle limiter (set up,
// one grant, rate 10 per hour) and of each grant held in one window.
func (b *bench) memory(ctx context.Context) ([]memorySample, error) {
	dropBallast, err := b.ballast(ctx, 3*b.plan.idleLimiters)
	if err != nil {
		return nil, err
	}
	defer dropBallast()
	out := make([]memorySample, len(b.cs))
	for i, c := range b.cs {
		n := b.plan.idleLimiters
		if c.name == redissonName {
			n = b.plan.idleLimitersJava
		}
		per, keys, err := b.idleMemory(ctx, c, n)
		if err != nil {
			return nil, err
		}
		permits, perPermit, err := b.permitMemory(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = memorySample{limiters: n, perLimiter: per, keysPerLimiter: keys, permits: permits, perPermit: perPermit}
		b.progress("memory %s: %.0f B per idle limiter (%d), %.1f B per permit", c.name, per, n, perPermit)
	}
	return out, nil
}

// ballast sizes Redis's keyspace tables (keys and expires) for n more
// keys than it leaves, so that no contender's keys make them grow (the
// table doubles at once: whoever crossed the size would pay for everyone)
// and deleting a contender's keys does not make them shrink during the
// next measurement. It creates 2n keys with a TTL and deletes n of them.
func (b *bench) ballast(ctx context.Context, n int) (func(), error) {
	pattern := b.prefix + "ballast:"
	for i := 0; i < 2*n; i += 1000 {
		pipe := b.rdb.Pipeline()
		for j := i; j < min(i+1000, 2*n); j++ {
			pipe.Set(ctx, fmt.Sprintf("%s%d:%08d", pattern, j%2, j), "x", time.Hour)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("ballast: %w", err)
		}
	}
	if _, err := deleteKeys(ctx, b.rdb, pattern+"1:*"); err != nil {
		return nil, err
	}
	return func() { _, _ = deleteKeys(context.Background(), b.rdb, pattern+"*") }, nil
}

// idleMemory creates n limiters of c, one grant each, from 32 workers, and
// returns used_memory and keys per limiter.
func (b *bench) idleMemory(ctx context.Context, c contender, n int) (float64, float64, error) {
	// First a few limiters that are not counted: the scripts a first
	// call loads into Redis's script cache are not the limiters' memory.
	warm := b.key("idle-warm")
	for i := 0; i < 5; i++ {
		if err := b.idleOne(ctx, c, fmt.Sprintf("%s-%d", warm, i)); err != nil {
			return 0, 0, err
		}
	}
	if err := b.drop(ctx, warm); err != nil {
		return 0, 0, err
	}
	label := b.key("idle") + "-"
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if err := b.idleOne(ctx, c, fmt.Sprintf("%s%07d", label, i)); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, firstErr
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	keys, err := countKeys(ctx, b.rdb, "*"+label+"*")
	if err != nil {
		return 0, 0, err
	}
	if _, err := deleteKeys(ctx, b.rdb, "*"+label+"*"); err != nil {
		return 0, 0, err
	}
	return float64(after.sub(before).usedMemory) / float64(n), float64(keys) / float64(n), nil
}

func (b *bench) idleOne(ctx context.Context, c contender, key string) error {
	l, err := c.open(ctx, key, 10, time.Hour)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	ok, err := l.once(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if !ok {
		return fmt.Errorf("%s: the first acquisition of a fresh limiter was refused", c.name)
	}
	return nil
}

// permitMemory fills one limiter's window with plan.windowPermits grants
// from 16 callers and returns the grants and used_memory per grant after
// the first.
func (b *bench) permitMemory(ctx context.Context, c contender) (int64, float64, error) {
	rate := int64(b.plan.windowPermits)
	l, key, err := b.opened(ctx, c, "permits", rate, time.Hour)
	if err != nil {
		return 0, 0, err
	}
	defer b.drop(ctx, key)
	if _, err := l.once(ctx); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", c.name, err)
	}
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	grants := int64(1)
	for chunk := 0; chunk < 100 && grants < rate; chunk++ {
		o, err := l.run(ctx, 16, 100*time.Millisecond, false)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", c.name, err)
		}
		grants += o.grants
		if o.grants == 0 {
			break
		}
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return 0, 0, err
	}
	return grants, float64(after.sub(before).usedMemory) / float64(max(grants-1, 1)), nil
}
