package main_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// aclFromREADME returns the README's least-privilege ACL SETUSER line, so
// that the README and this test cannot drift apart.
func aclFromREADME(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "ACL SETUSER ratelimiter ") {
			return strings.Fields(line)
		}
	}
	require.NoError(t, s.Err())
	t.Fatal("README.md has no line starting with ACL SETUSER ratelimiter")
	return nil
}

// TestLeastPrivilegeACL: a user with exactly the README's command list runs
// every library call and every CLI command; without EVAL and EVALSHA
// (what renaming them amounts to for the library) the limiter does not
// work.
func TestLeastPrivilegeACL(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	user := "ratelimiter-" + strings.ReplaceAll(uniqueName(t), "_", "-")
	args := aclFromREADME(t)
	args[2] = user
	cmd := make([]any, 0, len(args))
	for _, a := range args {
		if a == "><password>" {
			a = ">pw"
		}
		cmd = append(cmd, a)
	}
	require.NoError(t, rdb.Do(ctx, append(cmd, "resetkeys", "~*")...).Err())
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })

	as := redis.NewClient(&redis.Options{Addr: redisAddr, Username: user, Password: "pw"})
	defer as.Close()
	name := uniqueName(t)
	libraryCalls(t, as, name, ratelimiter.Overall)
	libraryCalls(t, as, name+"-pc", ratelimiter.PerClient)

	env := []string{fmt.Sprintf("REDIS_URL=redis://%s:pw@%s/0", user, redisAddr)}
	limits := limitsFile(t, "limits:\n  - name: "+name+"\n    rate: 6\n    interval: 1m\n"+
		"  - name: "+name+"-plan\n    rate: 5\n    interval: 1m\n"+
		"  - match: "+name+"-p*\n    rate: 5\n    interval: 1m\n    mode: per_client\n")
	for _, c := range [][]string{
		{"try-set-rate", name, "--rate", "5", "--interval", "1m"},
		{"set-rate", name, "--rate", "5", "--interval", "1m", "--keep-state"},
		{"update-rate", name, "--rate", "6", "--interval", "1m"},
		{"config", name}, {"available", name}, {"acquire", name, "-n", "2"},
		{"acquire", name, "--timeout", "1s"}, {"release", name, "-n", "1"},
		{"expire", name, "--ttl", "1h"}, {"expire", name, "--at", fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())},
		{"ttl", name}, {"persist", name}, {"exists", name}, {"inspect", name}, {"watch", name, "--count", "1"},
		{"--client-id", "c1", "set-rate", name + "-pc", "--rate", "5", "--interval", "1m", "--mode", "per-client"},
		{"--client-id", "c1", "acquire", name + "-pc"}, {"inspect", name + "-pc"},
		{"apply", "-f", limits}, {"plan", "-f", limits},
		{"delete", name},
	} {
		r := cliEnv(t, env, c...)
		assert.Equal(t, 0, r.code, "%v: %s", c, r.stderr)
	}

	// Take EVAL and EVALSHA away: nothing works any more.
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", user, "-eval", "-evalsha").Err())
	l := ratelimiter.NewClient(as).Limiter(name + "-noeval")
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 1, Interval: time.Second})
	require.ErrorContains(t, err, "NOPERM")
}

// libraryCalls runs every library call that reaches Redis, and requires
// each to succeed.
func libraryCalls(t *testing.T, rdb *redis.Client, name string, mode ratelimiter.Mode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("c1")).Limiter(name)
	cfg := ratelimiter.Config{Mode: mode, Rate: 5, Interval: time.Minute, KeepAlive: time.Hour}
	step := func(what string, err error) { require.NoError(t, err, what) }
	_, err := l.TrySetRate(ctx, cfg)
	step("TrySetRate", err)
	step("SetRate", l.SetRate(ctx, cfg))
	step("SetRate KeepState", l.SetRate(ctx, cfg, ratelimiter.KeepState()))
	_, err = l.UpdateRate(ctx, cfg)
	step("UpdateRate", err)
	_, err = l.Config(ctx)
	step("Config", err)
	_, err = l.TryAcquire(ctx, 1)
	step("TryAcquire", err)
	_, err = l.Allow(ctx, 1)
	step("Allow", err)
	step("Acquire", l.Acquire(ctx, 1))
	_, err = l.TryAcquireTimeout(ctx, 1, time.Second)
	step("TryAcquireTimeout", err)
	step("Release", l.Release(ctx, 1))
	_, err = l.AvailablePermits(ctx)
	step("AvailablePermits", err)
	_, err = l.Expire(ctx, time.Hour)
	step("Expire", err)
	res, err := l.Allow(ctx, 5)
	step("Allow refused", err)
	require.False(t, res.Granted, "the refusal path (wait hint) runs too")
	// A release smaller than the newest record shrinks it.
	step("Release 2", l.Release(ctx, 2))
	ok, err := l.TryAcquire(ctx, 3)
	step("TryAcquire 3", err)
	require.True(t, ok)
	// Oldest first: the last 1-permit record, then 1 of the 3 (ZADD).
	step("Release part of a record", l.Release(ctx, 2))
	// A client whose clock is past the interval releases expired records.
	later := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("c1"),
		ratelimiter.WithClock(func() time.Time { return time.Now().Add(2 * time.Minute) }), ratelimiter.WithServerClock(false))
	_, err = later.Limiter(l.Name()).TryAcquire(ctx, 1)
	step("TryAcquire after the interval", err)
	_, err = l.ExpireAt(ctx, time.Now().Add(time.Hour))
	step("ExpireAt", err)
	_, err = l.ExpireIf(ctx, 2*time.Hour, ratelimiter.ExpireGT)
	step("ExpireIf", err)
	_, err = l.RemainTimeToLive(ctx)
	step("RemainTimeToLive", err)
	_, err = l.ClearExpire(ctx)
	step("ClearExpire", err)
	_, err = l.Exists(ctx)
	step("Exists", err)
	_, err = l.Delete(ctx)
	step("Delete", err)
}

// aclLinesFromREADME returns every ACL SETUSER line of the README's
// least-privilege section, split into words: the library's line, then
// what the CLI and the exporter add.
func aclLinesFromREADME(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "ACL SETUSER ratelimiter ") {
			out = append(out, strings.Fields(line))
		}
	}
	require.NotEmpty(t, out, "README.md has no line starting with ACL SETUSER ratelimiter")
	return out
}

// readmeUser creates the ACL user named user on the server at addr from
// every README line, then applies the extra rules (such as "-zrevrange"),
// on the keys ~*; it returns a redis:// URL that logs in as that user.
// The user is deleted when t ends.
func readmeUser(t *testing.T, addr, user string, extra ...string) string {
	t.Helper()
	ctx := context.Background()
	admin := newRedisAt(t, addr)
	require.NoError(t, admin.Do(ctx, "ACL", "DELUSER", user).Err())
	for _, words := range aclLinesFromREADME(t) {
		cmd := []any{"ACL", "SETUSER", user}
		for _, w := range words[3:] {
			if w == "><password>" {
				w = ">pw"
			}
			cmd = append(cmd, w)
		}
		require.NoError(t, admin.Do(ctx, append(cmd, "resetkeys", "~*")...).Err())
	}
	if len(extra) > 0 {
		cmd := []any{"ACL", "SETUSER", user}
		for _, e := range extra {
			cmd = append(cmd, e)
		}
		require.NoError(t, admin.Do(ctx, cmd...).Err())
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	return fmt.Sprintf("redis://%s:pw@%s/0", user, addr)
}
