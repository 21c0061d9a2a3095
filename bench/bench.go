package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// bench runs the measurements of one plan against one Redis.
type bench struct {
	rdb    *redis.Client
	plan   plan
	cs     []contender
	prefix string // every key of this run starts with it
	seq    atomic.Int64
	log    io.Writer // progress
}

// key returns a limiter name unique to this run. The fixed-width sequence
// number keeps one name from being the prefix of another, so that
// "*"+key+"*" matches the keys of that limiter only.
func (b *bench) key(label string) string {
	return fmt.Sprintf("%s%s-%06d", b.prefix, label, b.seq.Add(1))
}

// drop deletes every key of the limiter called key.
func (b *bench) drop(ctx context.Context, key string) error {
	_, err := deleteKeys(ctx, b.rdb, "*"+key+"*")
	return err
}

// progress prints one line of progress.
func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// opened opens a fresh limiter of contender c.
func (b *bench) opened(ctx context.Context, c contender, label string, rate int64, interval time.Duration) (limiter, string, error) {
	key := b.key(label)
	l, err := c.open(ctx, key, rate, interval)
	if err != nil {
		return nil, key, fmt.Errorf("%s: open %s: %w", c.name, key, err)
	}
	return l, key, nil
}

// rotated returns the indexes 0 to n-1 starting at r mod n: the order of
// the sides in round r, so that no side always runs first or right after
// the same other side (on a VM, a call's round trip depends on whether
// the machine was idle just before).
func rotated(r, n int) []int {
	out := make([]int, n)
	for k := range out {
		out[k] = (r + k) % n
	}
	return out
}
