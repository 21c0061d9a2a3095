package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
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

// order returns the order of n sides in round r: a permutation drawn
// from a generator seeded with r (the same in every run), so that no side
// always runs first or right after the same other side. On a VM a call's
// round trip depends on what ran just before: in a run that kept one
// cyclic order, the two contenders that always came right after Redisson
// made sequential calls at 13-16 µs p50, the others at 66-82 µs.
func order(r, n int) []int {
	return rand.New(rand.NewPCG(uint64(r), 0x9e3779b97f4a7c15)).Perm(n)
}
