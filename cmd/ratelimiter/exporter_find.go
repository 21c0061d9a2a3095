package main

import (
	"container/heap"
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// Finding limiters for the exporter: SCAN (never KEYS) for hashes whose
// name matches a pattern, bounded in SCAN calls and limiters per
// collection, then HMGET of the fields every limiter's config has, from
// Go or Java alike.

// findLimits bound one collection's search.
type findLimits struct {
	patterns    []string // SCAN MATCH patterns; at least one
	count       int64    // SCAN COUNT hint
	maxScans    int      // SCAN calls per pattern and master
	maxLimiters int      // limiters kept, in name order
}

// found is one limiter's config as read.
type found struct {
	name string // the config key: the limiter's name after any name mapping
	cfg  ratelimiter.Config
}

// findResult is what one search found; truncated says a bound was hit.
type findResult struct {
	limiters  []found
	truncated bool
}

// findLimiters returns the first lim.maxLimiters limiters in name order
// whose config key matches one of the patterns, on every master of a
// cluster. Each SCAN batch's hashes are read (HMGET, one pipeline per
// batch) as they come and only the limiters kept so far are held, so its
// memory grows with maxLimiters and the SCAN COUNT, not with the keys
// matched (docs/prometheus.md, "The exporter at scale").
func findLimiters(ctx context.Context, rdb redis.UniversalClient, lim findLimits) (findResult, error) {
	var res findResult
	var mu sync.Mutex
	kept := newNameHeap(lim.maxLimiters)
	truncated, err := scanEach(ctx, rdb, lim.patterns, "hash", lim.count, lim.maxScans, func(ctx context.Context, c redis.Cmdable, names []string) error {
		// A name past the greatest kept one cannot be kept: it is not read.
		mu.Lock()
		all := len(names)
		names = kept.candidates(names)
		if len(names) < all {
			res.truncated = true
		}
		mu.Unlock()
		cmds := make([]*redis.SliceCmd, len(names))
		replies, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, n := range names {
				cmds[i] = p.HMGet(ctx, n, wire.ConfigFields()...)
			}
			return nil
		})
		// A hash that became another type since the SCAN is no limiter;
		// a refused HMGET fails the search rather than hide limiters.
		if err := readErr(true, replies...); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, n := range names {
			if cfg, ok := configOf(cmds[i].Val()); ok && !kept.offer(found{name: n, cfg: cfg}) {
				res.truncated = true
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.truncated = res.truncated || truncated
	res.limiters = kept.sorted()
	return res, nil
}

// scanBounded returns the keys of type typ matching the patterns, sorted,
// on every master of a cluster, making at most maxScans SCAN calls per
// pattern and master; truncated says the bound stopped a scan.
func scanBounded(ctx context.Context, rdb redis.Cmdable, patterns []string, typ string, count int64, maxScans int) (keys []string, truncated bool, err error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	truncated, err = scanEach(ctx, rdb, patterns, typ, count, maxScans, func(_ context.Context, _ redis.Cmdable, batch []string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range batch {
			seen[k] = true
		}
		return nil
	})
	keys = make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, truncated, err
}

// scanEach runs SCAN MATCH pattern COUNT count TYPE typ for every pattern
// on every master of a cluster (rdb a *redis.ClusterClient, concurrently
// across masters), else on the server rdb talks to, at most
// maxScans calls per pattern and master, and hands each non-empty batch
// to each with the node it came from. A key may come twice. truncated
// says the bound stopped a scan.
func scanEach(ctx context.Context, rdb redis.Cmdable, patterns []string, typ string, count int64, maxScans int,
	each func(ctx context.Context, c redis.Cmdable, keys []string) error) (truncated bool, err error) {
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, pattern := range patterns {
			var cursor uint64
			for calls := 0; ; calls++ {
				if calls == maxScans {
					mu.Lock()
					truncated = true
					mu.Unlock()
					break
				}
				keys, next, err := c.ScanType(ctx, cursor, pattern, count, typ).Result()
				if err != nil {
					return err
				}
				if len(keys) > 0 {
					if err := each(ctx, c, keys); err != nil {
						return err
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	return truncated, err
}

// nameHeap keeps the n limiters of least name offered to it.
type nameHeap struct {
	n    int
	h    []found // a max-heap by name
	have map[string]bool
}

func newNameHeap(n int) *nameHeap { return &nameHeap{n: n, have: map[string]bool{}} }

// offer keeps f if it is among the n least names so far, dropping the
// greatest kept one if need be; it returns false when a limiter was left
// out (f or the one it replaced). A name kept already is ignored.
func (k *nameHeap) offer(f found) bool {
	if k.have[f.name] {
		return true
	}
	if len(k.h) < k.n {
		k.have[f.name] = true
		heap.Push((*byNameDesc)(&k.h), f)
		return true
	}
	if f.name < k.h[0].name {
		delete(k.have, k.h[0].name)
		k.have[f.name] = true
		k.h[0] = f
		heap.Fix((*byNameDesc)(&k.h), 0)
	}
	return false
}

// candidates returns the names that offer could keep: all of them until
// n are kept, then those before the greatest kept name that are not kept
// already. It reuses names' backing array.
func (k *nameHeap) candidates(names []string) []string {
	if len(k.h) < k.n {
		return names
	}
	out := names[:0]
	for _, n := range names {
		if n < k.h[0].name && !k.have[n] {
			out = append(out, n)
		}
	}
	return out
}

// sorted returns the kept limiters in name order.
func (k *nameHeap) sorted() []found {
	out := append([]found(nil), k.h...)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// byNameDesc orders found by name, greatest first, for container/heap.
type byNameDesc []found

func (b byNameDesc) Len() int           { return len(b) }
func (b byNameDesc) Less(i, j int) bool { return b[i].name > b[j].name }
func (b byNameDesc) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }
func (b *byNameDesc) Push(x any)        { *b = append(*b, x.(found)) }
func (b *byNameDesc) Pop() any {
	old := *b
	x := old[len(old)-1]
	*b = old[:len(old)-1]
	return x
}

// configOf reads the reply of HMGET of wire.ConfigFields by the scripts'
// rule (wire.ParseConfig). ok is false for a hash that is not a limiter,
// or one whose config the scripts refuse.
func configOf(vals []any) (cfg ratelimiter.Config, ok bool) {
	fields := wire.ConfigFields()
	if len(vals) != len(fields) {
		return ratelimiter.Config{}, false
	}
	h := make(map[string]string, len(fields))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			h[fields[i]] = s
		}
	}
	c, err := wire.ParseConfig(h)
	return libConfig(c), err == nil
}

// isReply reports whether err is a reply from Redis (redis.Nil, WRONGTYPE)
// rather than a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func sortStrings(s []string) { sort.Strings(s) }
