package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

func doctorReport(t *testing.T, r result) doctorJSON {
	t.Helper()
	var d doctorJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), r.stdout)
	return d
}

type doctorJSON struct {
	Status string `json:"status"`
	Checks []struct {
		Check, Status, Detail string
	} `json:"checks"`
}

func (d doctorJSON) status(check string) string {
	for _, c := range d.Checks {
		if c.Check == check {
			return c.Status + ": " + c.Detail
		}
	}
	return ""
}

// TestDoctor is issue 22's sixth item: doctor reports every check and
// exits 0 on a sound deployment; a user missing a command fails the
// permissions check, naming the command and the operations (exit 2); an
// evicting maxmemory-policy is a warning (exit 1).
func TestDoctor(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	r := ok(t, cli(t, "doctor", name, "-o", "json"))
	d := doctorReport(t, r)
	require.Equal(t, "ok", d.Status, r.stdout)
	for _, c := range []string{"server", "lua", "eviction", "persistence", "permissions", "clock", "ttl"} {
		require.True(t, strings.HasPrefix(d.status(c), "ok: "), "%s: %s", c, d.status(c))
	}

	rdb := newRedis(t)
	user := "doctor-" + strings.ReplaceAll(name, "_", "-")
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "-zrem").Err())
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", user) })
	r = cliEnv(t, []string{fmt.Sprintf("REDIS_URL=redis://%s:pw@%s/0", user, redisAddr)}, "doctor", name, "-o", "json")
	failsWith(t, 2, r)
	require.Equal(t, "fail: Release needs zrem; lease return needs zrem", doctorReport(t, r).status("permissions"))

	srv, err := redistest.StartWrapped(ctx, nil, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	r = cliEnv(t, []string{"REDIS_URL=redis://" + srv.Addr() + "/0"}, "doctor", name, "-o", "json")
	failsWith(t, 1, r)
	require.Contains(t, doctorReport(t, r).status("eviction"), "warn: maxmemory-policy allkeys-lru")

	// Snapshots without an append-only file: a restart brings back old
	// windows. With AOF, all is well.
	// CONFIG SET, not the command line: Redis 6.2 keeps the harness's
	// --save "" over a later --save.
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"save", "3600 1"}, `warn: snapshots only (save "3600 1", appendonly no)`},
		{[]string{"save", "3600 1", "appendonly", "yes"}, "ok: appendonly yes"},
	} {
		srv, err := redistest.StartWrapped(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		own := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { own.Close() })
		for i := 0; i < len(tc.set); i += 2 {
			require.NoError(t, own.ConfigSet(ctx, tc.set[i], tc.set[i+1]).Err())
		}
		require.Eventually(t, func() bool { // AOF turns on after its rewrite
			return tc.set[len(tc.set)-1] != "yes" || strings.Contains(own.Info(ctx, "persistence").Val(), "aof_enabled:1")
		}, 10*time.Second, 20*time.Millisecond)
		r = cliEnv(t, []string{"REDIS_URL=redis://" + srv.Addr() + "/0"}, "doctor", name, "-o", "json")
		require.Contains(t, doctorReport(t, r).status("persistence"), tc.want, tc.set)
	}
}

// The TTL check reads every client's PER_CLIENT keys, not only this
// client's: a budget another client left without a TTL on a limiter whose
// config expires is named; PER_CLIENT budgets of many client ids that
// never expire (a fresh id per process start) are a leak.
func TestDoctorTTLOtherClients(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m", "--mode", "per-client", "--keep-alive", "1h"))
	ok(t, cli(t, "--client-id", "a", "acquire", name))
	require.True(t, strings.HasPrefix(doctorReport(t, ok(t, cli(t, "doctor", name, "-o", "json"))).status("ttl"), "ok: "))

	require.NoError(t, rdb.Set(ctx, "{"+name+"}:value:left-behind", 5, 0).Err())
	r := cli(t, "doctor", name, "-o", "json")
	failsWith(t, 1, r)
	got := doctorReport(t, r).status("ttl")
	require.True(t, strings.HasPrefix(got, "warn: the config expires in "), got)
	require.True(t, strings.HasSuffix(got, " but 1 state keys have no TTL: {"+name+"}:value:left-behind"), got)

	leak := uniqueName(t)
	ok(t, cli(t, "set-rate", leak, "--rate", "5", "--interval", "1m", "--mode", "per-client"))
	for i := 0; i < 101; i++ {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("{%s}:value:%d", leak, i), 5, 0).Err())
	}
	r = cli(t, "doctor", leak, "-o", "json")
	failsWith(t, 1, r)
	require.Contains(t, doctorReport(t, r).status("ttl"), "warn: 101 PER_CLIENT keys of client ids never expire")
}
