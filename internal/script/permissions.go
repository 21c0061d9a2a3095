package script

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/probe.lua
var luaProbe string

var scriptProbe = redis.NewScript(luaProbe)

// The commands each script may call after its first write, or that
// lua/probe.lua checks for it. A command the script calls only as its
// first write, or before any write, needs no check: a refusal there leaves
// everything as it was (trysetrate.lua's HSETNX, expire.lua's one
// command). permissions_test.go checks these lists
// against the Lua files and probe.lua.
var (
	needAcquire    = []string{"hmget", "get", "zrangebyscore", "zrange", "zscore", "zadd", "zremrangebyrank", "set", "decrby", "pexpire", "pttl"}
	needAcquireAll = needAcquire
	needSettle     = []string{"hmget", "get", "zrangebyscore", "zscore", "zremrangebyrank", "set", "pexpire", "pttl"}
	needRelease    = append(append([]string(nil), needSettle...), "zrevrangebyscore", "zrem", "zadd")
	needSetRate    = []string{"hget", "exists", "zrangebyscore", "hset", "pexpire", "del", "zremrangebyscore", "set", "pttl"}
	needTrySetRate = []string{"pexpire", "exists", "zadd", "set", "pttl"}
	needLease      = append(append([]string(nil), needSettle...), "zrem", "zadd", "zrange")
)

// scriptNeeds names each script's operation and its needs, for eval.
var scriptNeeds = map[*redis.Script]struct {
	op   string
	cmds []string
}{
	scriptRelease:    {"Release", needRelease},
	scriptReleaseAll: {"Release", needRelease},
	scriptAvailable:  {"AvailablePermits", needSettle},
	scriptSetRate:    {"SetRate", needSetRate},
	scriptTrySetRate: {"TrySetRate", needTrySetRate},
	scriptLeaseEnd:   {"lease return", needLease},
}

// permRecheck is how long a probe that found a command denied is trusted:
// a user whose ACL is fixed works again within it. A probe that found
// everything allowed is trusted until a script meets an ACL refusal.
const permRecheck = time.Second

// permState is a Client's knowledge of its user's permissions.
type permState struct {
	ok     atomic.Bool // the last probe found every command allowed
	mu     sync.Mutex
	denied map[string]bool
	at     time.Time // when denied was probed; zero: never
}

// permitted returns nil when the user may run every command of need, and
// otherwise an error matching ErrPermissionDenied that names the missing
// ones and op. The user's permissions are probed (lua/probe.lua, one
// script call on the value and permits keys among keys, probeKeys) once
// per Client; after that the call costs an
// atomic load while everything is allowed. The probe checks commands, not
// key patterns: EVAL itself refuses a script whose keys the user may not
// access, before it runs. On a cluster it runs on the node of keys only;
// the other nodes are assumed to share the ACL.
func (c *Conn) permitted(ctx context.Context, keys []string, op string, need []string) error {
	if c.perm.ok.Load() {
		return nil
	}
	c.perm.mu.Lock()
	denied, at := c.perm.denied, c.perm.at
	c.perm.mu.Unlock()
	if at.IsZero() || time.Since(at) >= permRecheck {
		names, err := scriptProbe.Run(ctx, c.rdb, probeKeys(keys)).StringSlice()
		if err != nil {
			return err // the caller's result maps it
		}
		denied = make(map[string]bool, len(names))
		for _, n := range names {
			denied[n] = true
		}
		c.perm.mu.Lock()
		c.perm.denied, c.perm.at = denied, time.Now()
		c.perm.mu.Unlock()
		if len(denied) == 0 {
			c.perm.ok.Store(true)
			return nil
		}
	}
	var missing []string
	for _, n := range need {
		if denied[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s needs %s", ErrPermissionDenied, op, strings.Join(missing, ", "))
	}
	return nil
}

// aclRefusal reports whether err is Redis refusing a command under the
// ACL, inside a script or not.
func aclRefusal(err error) bool {
	if err == nil {
		return false // before rerr, which escapes (errors.As)
	}
	err = innerScriptError(err)
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	return strings.HasPrefix(msg, "noperm") || strings.Contains(msg, "can't run this command") ||
		strings.Contains(msg, "no permissions to run")
}

// forgetPermissions makes the next call probe again: a script met an ACL
// refusal, so the ACL changed since the last probe.
func (c *Conn) forgetPermissions() {
	c.perm.ok.Store(false)
	c.perm.mu.Lock()
	c.perm.at = time.Time{}
	c.perm.mu.Unlock()
}

// Missing probes, now and without using what the Conn cached, which
// commands the Redis user may not run on a limiter's keys (K1..K5), and
// returns them per operation that needs them after its first write
// ("Release", "TrySetRate", "acquire" for Allow, TryAcquire and the
// waits, "composite", "lease return" for leases, ...); an empty map means
// every operation may run. It fails with the Redis error (MapError's)
// when the probe script itself is refused (no EVAL, or keys the user may
// not touch).
func (c *Conn) Missing(ctx context.Context, keys []string) (map[string][]string, error) {
	names, err := Bounded(ctx, func() ([]string, error) {
		return scriptProbe.Run(ctx, c.rdb, keys).StringSlice()
	})
	if err != nil {
		return nil, MapError(err)
	}
	denied := map[string]bool{}
	for _, n := range names {
		denied[n] = true
	}
	out := map[string][]string{}
	ops := map[string][]string{"acquire": needAcquire, "composite": needAcquireAll}
	for _, need := range scriptNeeds {
		ops[need.op] = need.cmds
	}
	for op, cmds := range ops {
		for _, c := range cmds {
			if denied[c] {
				out[op] = append(out[op], c)
			}
		}
	}
	return out, nil
}
