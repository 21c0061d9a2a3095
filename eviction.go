package ratelimiter

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Eviction is what a Redis server says of its eviction (INFO memory and
// INFO stats).
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

// Eviction reads the server's eviction settings and count with INFO
// (which the user must be allowed to run: +info). On a cluster client it
// asks one node.
func (c *Client) Eviction(ctx context.Context) (Eviction, error) {
	if c.err != nil {
		return Eviction{}, c.err
	}
	e, err := c.readEviction(ctx)
	return e, c.result(err)
}

func (c *Client) readEviction(ctx context.Context) (Eviction, error) {
	info, err := bounded(ctx, func() (string, error) {
		return c.rdb.Info(ctx, "memory", "stats").Result()
	})
	if err != nil {
		return Eviction{}, err
	}
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
// server's eviction policy.
const evictionRecheck = 10 * time.Second

// evictionState caches a Client's last read of the eviction policy.
type evictionState struct {
	mu   sync.Mutex
	last Eviction
	ok   bool // last was read
	at   time.Time
}

// evicting reports whether the server may evict the keys of a limiter
// (withTTL: they carry a TTL), reading the policy at most every
// evictionRecheck. When INFO fails (not allowed, for example) it reports
// false: the limiter is then created as Redisson creates it.
func (c *Client) evicting(ctx context.Context, withTTL bool) bool {
	c.evict.mu.Lock()
	e, ok, at := c.evict.last, c.evict.ok, c.evict.at
	c.evict.mu.Unlock()
	if at.IsZero() || time.Since(at) >= evictionRecheck {
		var err error
		e, err = c.readEviction(ctx) // an ACL refusal here is no news for permissions.go
		ok = err == nil
		c.evict.mu.Lock()
		c.evict.last, c.evict.ok, c.evict.at = e, ok, time.Now()
		c.evict.mu.Unlock()
	}
	return ok && e.Evicts(withTTL)
}
