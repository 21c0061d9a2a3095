// Package diag holds the checks that operators' tools make of a Redis
// server and user before they trust it with limiters: whether the server
// may evict a limiter's keys, and which commands a limiter's calls need
// that the user may not run. A Client makes the same checks itself as it
// works (docs/operations.md); the CLI's doctor and the exporter report
// them.
package diag

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/script"
	"github.com/goredisson/ratelimiter/wire"
)

// Eviction is what a Redis server says of its eviction (INFO's memory and
// stats sections).
type Eviction struct {
	// Policy is maxmemory-policy, for example "noeviction" or "allkeys-lru".
	Policy string
	// MaxMemory is maxmemory in bytes; 0 means no limit, and then nothing
	// is evicted whatever the policy.
	MaxMemory int64
	// EvictedKeys is how many keys the server has evicted since it started
	// (any keys, not only limiters').
	EvictedKeys int64
}

// Evicts reports whether the server may evict a limiter's keys: under an
// allkeys-* policy always, under a volatile-* policy when the keys carry a
// TTL (a limiter with keep-alive, or one given an expiry), never under
// noeviction or without maxmemory.
func (e Eviction) Evicts(withTTL bool) bool { return script.Eviction(e).Evicts(withTTL) }

// ReadEviction reads the server's eviction settings and count with INFO
// (which the user must be allowed to run: +info). On a cluster client it
// asks one node. It fails with Redis's error (an ACL refusal matches
// ratelimiter.ErrPermissionDenied), or ctx's when ctx is done first.
func ReadEviction(ctx context.Context, rdb redis.UniversalClient) (Eviction, error) {
	e, err := script.New(rdb, script.Options{}).ReadEviction(ctx)
	return Eviction(e), err
}

// MissingPermissions probes which commands the Redis user of rdb may not
// run on the keys of the limiter k (one script call, internal/script/lua/probe.lua), and
// returns them per operation that needs them after its first write
// ("Release", "TrySetRate", "acquire" for Allow, TryAcquire and the
// waits, "composite", "lease return" for WithLeases, ...); an empty map
// means every operation may run. It fails with the Redis error when the
// probe script itself is refused (no EVAL, or keys the user may not
// touch), or ctx's when ctx is done first.
func MissingPermissions(ctx context.Context, rdb redis.UniversalClient, k wire.Keys) (map[string][]string, error) {
	return script.New(rdb, script.Options{}).Missing(ctx, k.All())
}
