package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Names that share keys. Redisson names a limiter's value and permits
// keys after its name, wrapped in a hash tag unless the name has one
// (wire.KeysFor): the limiters "api" and "{api}" both use {api}:value and
// {api}:permits, so each one's writes change the other's state (a
// set-rate of one resets the other's window). The commands that write a
// config warn before they write, and doctor warns, when the other name is
// configured (docs/operations.md, "Names that share keys").

// sharesKeysWith returns the config key of the other limiter whose value
// and permits keys are those of the limiter whose config key is key:
// "{key}" for a key without '{', and "name" for a key "{name}" whose name
// is not empty and holds no '{'. ok is false when no other name maps to
// them.
func sharesKeysWith(key string) (other string, ok bool) {
	if !strings.Contains(key, "{") {
		return "{" + key + "}", true
	}
	if inner, found := strings.CutPrefix(key, "{"); found && strings.HasSuffix(inner, "}") {
		if inner = strings.TrimSuffix(inner, "}"); inner != "" && !strings.Contains(inner, "{") {
			return inner, true
		}
	}
	return "", false
}

// configuredOthers returns, for each config key of keys, the config key of
// the other limiter that shares its value and permits keys when that one
// is configured (its hash holds a field of a limiter's config), else "".
// It reads them all in one pipeline (HMGET), and fails with the first read
// that failed (a refused HMGET, say); a key of another type is no config.
func configuredOthers(ctx context.Context, rdb redis.Cmdable, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	cmds := make([]*redis.SliceCmd, len(keys))
	replies, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			if other, ok := sharesKeysWith(k); ok {
				cmds[i] = p.HMGet(ctx, other, wire.ConfigFields()...)
			}
		}
		return nil
	})
	if err := readErr(true, replies...); err != nil {
		return nil, err
	}
	for i, c := range cmds {
		if c == nil || c.Err() != nil {
			continue
		}
		for _, v := range c.Val() {
			if v != nil {
				out[i], _ = sharesKeysWith(keys[i])
				break
			}
		}
	}
	return out, nil
}

// sharedKeysWarning says what sharing its keys with the limiter whose
// config key is other means for the limiter whose config key is key.
func sharedKeysWarning(key, other string) string {
	k := wire.KeysFor(key, "")
	return fmt.Sprintf("the limiter whose config key is %s shares this one's value and permits keys (%s, %s): "+
		"writing either one's config or state changes the other's (docs/operations.md, \"Names that share keys\")",
		shown(other), shown(k.Value), shown(k.Permits))
}
