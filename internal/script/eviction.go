package script

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
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
func (e Eviction) Evicts(withTTL bool) bool {
	if e.MaxMemory == 0 {
		return false
	}
	switch {
	case strings.HasPrefix(e.Policy, "allkeys-"):
		return true
	case strings.HasPrefix(e.Policy, "volatile-"):
		return withTTL
	}
	return false
}

// ReadEviction reads the server's eviction settings and count with INFO
// (which the user must be allowed to run: +info). On a cluster client it
// asks one node. The error is Result's.
func (c *Conn) ReadEviction(ctx context.Context) (Eviction, error) {
	e, err := c.readEviction(ctx)
	return e, c.Result(err)
}

func (c *Conn) readEviction(ctx context.Context) (Eviction, error) {
	info, err := Bounded(ctx, func() (string, error) {
		// Plain INFO: Redis 6.2 refuses several sections in one call.
		return c.rdb.Info(ctx).Result()
	})
	if err != nil {
		return Eviction{}, err
	}
	c.noteServer(ctx, info) // the same reading tells a restart (restart.go)
	return parseEviction(info), nil
}

// parseEviction reads the fields of Eviction from INFO's text.
func parseEviction(info string) Eviction {
	var e Eviction
	s := bufio.NewScanner(strings.NewReader(info))
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "maxmemory_policy":
			e.Policy = v
		case "maxmemory":
			e.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
		case "evicted_keys":
			e.EvictedKeys, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return e
}

// evictionRecheck is how long a Client trusts what it read of the
// server's eviction policy before it reads it again, in the background.
const evictionRecheck = 10 * time.Second

// evictionState caches a Client's last read of the eviction policy.
type evictionState struct {
	cur        atomic.Pointer[evictionRead]
	refreshing atomic.Bool
}

type evictionRead struct {
	e  Eviction
	ok bool // e was read; false when INFO failed (not allowed, for example)
	at time.Time
}

// evictionReadTimeout bounds a background read of the eviction policy.
const evictionReadTimeout = 5 * time.Second

// eviction returns the last read of the server's eviction policy. The
// first call reads it (one INFO); a read older than evictionRecheck is
// renewed in the background, so later calls cost a clock reading.
func (c *Conn) eviction(ctx context.Context) evictionRead {
	r := c.evict.cur.Load()
	if r == nil {
		return c.readEvictionNow(ctx)
	}
	if time.Since(r.at) >= evictionRecheck && c.evict.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer c.evict.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), evictionReadTimeout)
			defer cancel()
			c.readEvictionNow(ctx)
		}()
	}
	return *r
}

func (c *Conn) readEvictionNow(ctx context.Context) evictionRead {
	e, err := c.readEviction(ctx) // an ACL refusal here is no news for permissions.go
	r := &evictionRead{e: e, ok: err == nil, at: time.Now()}
	if err != nil && ctx.Err() != nil {
		return *r // the caller gave up: read again next time
	}
	c.evict.cur.Store(r)
	return *r
}

// Evicting reports whether the server may evict the keys of a limiter
// (withTTL: they carry a TTL). When INFO fails it reports false: the
// limiter then works as Redisson's does.
func (c *Conn) Evicting(ctx context.Context, withTTL bool) bool {
	r := c.eviction(ctx)
	return r.ok && r.e.Evicts(withTTL)
}

// acquireScript returns base, or the copy of it among variants
// ([0] allkeys-*, [1] volatile-*) for the server's eviction policy.
func (c *Conn) acquireScript(ctx context.Context, base *redis.Script, variants [2]*redis.Script) *redis.Script {
	r := c.eviction(ctx)
	switch {
	case !r.ok || r.e.MaxMemory == 0:
		return base
	case strings.HasPrefix(r.e.Policy, "allkeys-"):
		return variants[0]
	case strings.HasPrefix(r.e.Policy, "volatile-"):
		return variants[1]
	}
	return base
}
