package main

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
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

// findLimiters returns the limiters whose config key matches one of the
// patterns, on every master of a cluster.
func findLimiters(ctx context.Context, rdb redis.UniversalClient, lim findLimits) (findResult, error) {
	var res findResult
	names, truncated, err := scanHashes(ctx, rdb, lim)
	if err != nil {
		return res, err
	}
	res.truncated = truncated
	cmds := make([]*redis.SliceCmd, len(names))
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cmds[i] = p.HMGet(ctx, n, "rate", "interval", "type", "keepAliveTime")
		}
		return nil
	})
	if err != nil && !isReply(err) {
		return res, err
	}
	for i, n := range names {
		if cfg, ok := configOf(cmds[i].Val()); ok {
			if len(res.limiters) == lim.maxLimiters {
				res.truncated = true
				break
			}
			res.limiters = append(res.limiters, found{name: n, cfg: cfg})
		}
	}
	return res, nil
}

// scanHashes returns the hash keys matching the patterns, sorted.
func scanHashes(ctx context.Context, rdb redis.UniversalClient, lim findLimits) ([]string, bool, error) {
	return scanBounded(ctx, rdb, lim.patterns, "hash", lim.count, lim.maxScans)
}

// scanBounded returns the keys of type typ matching the patterns, sorted,
// on every master of a cluster, making at most maxScans SCAN calls per
// pattern and master; truncated says the bound stopped a scan.
func scanBounded(ctx context.Context, rdb redis.UniversalClient, patterns []string, typ string, count int64, maxScans int) (keys []string, truncated bool, err error) {
	var mu sync.Mutex
	seen := map[string]bool{}
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
				mu.Lock()
				for _, k := range keys {
					seen[k] = true
				}
				mu.Unlock()
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
	keys = make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, truncated, err
}

// configOf reads HMGET rate interval type keepAliveTime as the scripts
// would accept it: rate and interval positive integers, type 0 or 1,
// keepAliveTime absent or a non-negative integer. Anything else is not a
// limiter (or one the scripts refuse).
func configOf(vals []any) (ratelimiter.Config, bool) {
	if len(vals) != 4 {
		return ratelimiter.Config{}, false
	}
	var n [4]int64
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			if i == 3 && v == nil {
				continue
			}
			return ratelimiter.Config{}, false
		}
		x, ok := valueOf(s)
		if !ok || x < 0 {
			return ratelimiter.Config{}, false
		}
		n[i] = x
	}
	if n[0] < 1 || n[1] < 1 || (n[2] != 0 && n[2] != 1) {
		return ratelimiter.Config{}, false
	}
	return ratelimiter.Config{Rate: n[0], Interval: millis(n[1]), Mode: ratelimiter.Mode(n[2]), KeepAlive: millis(n[3])}, true
}

// isReply reports whether err is a reply from Redis (redis.Nil, WRONGTYPE)
// rather than a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// millis converts ms to a Duration, saturating past about 292 years.
func millis(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

func sortStrings(s []string) { sort.Strings(s) }
