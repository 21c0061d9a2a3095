package main

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// escapeGlob makes s match itself in a SCAN MATCH pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanKeys returns the keys matching pattern of type typ, on every master
// of a cluster. It uses SCAN, never KEYS.
func scanKeys(ctx context.Context, rdb redis.UniversalClient, pattern, typ string) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.ScanType(ctx, cursor, pattern, 1000, typ).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range keys {
				seen[k] = true
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, err
}
