package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inspect calls corrupt what acquire calls corrupt (exit 2, "unexpected
// limiter state"), shows no available count for it, and still prints the
// rest; and for sound states its available count is what available says.
func TestInspectCorruptLikeAcquire(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		break_ func(value, permits string)
	}{
		{"value not a number", func(value, _ string) { rdb.Set(ctx, value, "lots", 0) }},
		{"value a fraction", func(value, _ string) { rdb.Set(ctx, value, "2.5", 0) }},
		{"value a hash", func(value, _ string) { rdb.Del(ctx, value); rdb.HSet(ctx, value, "a", "1") }},
		{"permits a string", func(_, permits string) { rdb.Del(ctx, permits); rdb.Set(ctx, permits, "x", 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName(t)
			ok(t, cli(t, "set-rate", name, "--rate", "8", "--interval", "1m"))
			ok(t, cli(t, "acquire", name, "-n", "1"))
			tc.break_("{"+name+"}:value", "{"+name+"}:permits")

			r := failsWith(t, 2, cli(t, "acquire", name))
			assert.Contains(t, r.stderr, "unexpected limiter state")
			r = failsWith(t, 2, cli(t, "inspect", name, "-o", "json"))
			assert.Contains(t, r.stderr, "unexpected limiter state")
			var in inspection
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
			require.NotEmpty(t, in.Budgets)
			assert.Nil(t, in.Budgets[0].AvailableNow, "no count for a corrupt budget")
			r = failsWith(t, 2, cli(t, "inspect", name))
			assert.NotContains(t, r.stdout, "available now 8")
			assert.Contains(t, r.stdout, "available now: corrupt")
		})
	}

	// Sound states: inspect predicts what available (AvailablePermits)
	// then reports.
	for _, tc := range []struct {
		name  string
		setup func(name string)
	}{
		{"value lost, records remain", func(name string) { rdb.Del(ctx, "{"+name+"}:value") }},
		{"value over the rate", func(name string) { rdb.Set(ctx, "{"+name+"}:value", "50", 0) }},
		{"records lost", func(name string) { rdb.Del(ctx, "{"+name+"}:permits") }},
		{"records lost, nothing left", func(name string) {
			rdb.Del(ctx, "{"+name+"}:permits")
			rdb.Set(ctx, "{"+name+"}:value", "0", 0)
		}},
		{"negative value", func(name string) { rdb.Set(ctx, "{"+name+"}:value", "-3", 0) }},
		// A record shorter than 4 bytes holds no permits, for every call.
		{"oldest record in the window of 3 bytes", func(name string) {
			rdb.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: float64(time.Now().Add(-30 * time.Second).UnixMilli()), Member: "abc"})
		}},
		{"record of 3 bytes, value lost", func(name string) {
			rdb.Del(ctx, "{"+name+"}:value")
			rdb.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: float64(time.Now().UnixMilli()), Member: "abc"})
		}},
		{"expired record of 3 bytes", func(name string) {
			rdb.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "abc"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName(t)
			ok(t, cli(t, "set-rate", name, "--rate", "8", "--interval", "1m"))
			ok(t, cli(t, "acquire", name, "-n", "3"))
			tc.setup(name)
			r := ok(t, cli(t, "inspect", name, "-o", "json"))
			var in inspection
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
			require.NotNil(t, in.Budgets[0].AvailableNow)
			r = ok(t, cli(t, "available", name))
			assert.Equal(t, strings.TrimSpace(r.stdout), jsonInt(*in.Budgets[0].AvailableNow))
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Names with control characters are quoted in what inspect, watch and the
// other commands print as text; JSON escapes them.
func TestNamesQuoted(t *testing.T) {
	name := uniqueName(t) + "\x1b[31m\tred\nline\a"
	ok(t, cli(t, "set-rate", "--rate", "2", "--interval", "1m", "--", name))
	for _, args := range [][]string{
		{"inspect", "--", name},
		{"watch", "--count", "1", "--", name},
		{"config", "--", name},
		{"acquire", "--", name},
		{"set-rate", "--rate", "2", "--interval", "1m", "--", name},
		{"expire", "--ttl", "1h", "--", name},
		{"delete", "--", name},
	} {
		r := cli(t, args...)
		assert.Contains(t, []int{0, 1}, r.code, "%v: %s", args, r.stderr)
		for _, raw := range []string{"\x1b", "\a", "\tred", "red\nline"} {
			assert.NotContains(t, r.stdout, raw, "%v", args)
			assert.NotContains(t, r.stderr, raw, "%v", args)
		}
		if args[0] != "watch" && args[0] != "acquire" { // these two do not print the name
			assert.Contains(t, r.stdout+r.stderr, `\x1b[31m\tred\nline\a`, "%v", args)
		}
	}
}
