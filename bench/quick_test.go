package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestQuickRun runs `make bench-quick`'s measurements end to end against
// the test server and checks that every contender was measured, the
// tables printed and the charts written. It asserts nothing about speed.
func TestQuickRun(t *testing.T) {
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	dir := t.TempDir()
	r, err := run(ctx, options{url: "redis://" + redisAddr, ownServer: true, quick: true, charts: dir, out: &out, log: &log})
	require.NoError(t, err, "progress:\n%s", log.String())
	t.Logf("progress:\n%s", log.String())
	for _, s := range r.skipped {
		t.Logf("LEFT OUT: %s", s)
	}
	md := out.String()
	t.Logf("tables:\n%s", md)

	want := []string{"ratelimiter (default)", "ratelimiter WithMaxBatch(1)", "GCRA (redis_rate v10)", "fixed window",
		"sliding log", "sliding window counter", "token bucket", "floor: one-command script"}
	if len(r.skipped) == 0 {
		want = append(want, redissonName)
	}
	require.ElementsMatch(t, want, r.names)
	tables := []string{"granted path", "refused path", "### Latency", "### Redis memory", "### Exactness"}
	require.NotNil(t, r.fleet)
	checkFleet(t, r.fleet, r.plan.fleetRounds, md)
	require.NotNil(t, r.keyed)
	checkKeyed(t, r.keyed, r.plan, md)
	require.NotNil(t, r.svc)
	checkService(t, r.svc, r.plan, md)
	require.NotNil(t, r.lone)
	require.Contains(t, md, "### A lone caller, call by call")
	for _, p := range paths {
		require.Len(t, r.lone.p50[p.name], len(r.lone.names), p.name)
		for i, name := range r.lone.names {
			require.Positive(t, r.lone.p50[p.name][i], "%s, %s path", name, p.name)
			require.LessOrEqual(t, r.lone.p50[p.name][i], r.lone.p99[p.name][i], "%s, %s path", name, p.name)
		}
	}
	for _, title := range append(tables, "### Combining", "### Fleet: Clients sharing one limiter, over-asking",
		"### Fleet: Clients sharing one limiter, under-asking", "### The floor from redis-benchmark", "### Blocked callers", "### The caller's cost",
		"### Replica acknowledgement", "### Redis time by records", "### Redis instructions", "### Several limits") {
		require.Contains(t, md, title)
	}
	for i, name := range r.names {
		for _, title := range tables {
			require.Equal(t, 1, strings.Count(section(md, title), "| "+name+" | "), "%s: one row in the table %q", name, title)
		}
		for _, p := range paths {
			for _, callers := range r.plan.callers {
				s := r.tp[p.name][callers][i]
				require.Len(t, s, r.plan.rounds)
				require.Positive(t, s[0].perSec, "%s, %s path, %d callers: no decisions", name, p.name, callers)
			}
		}
		require.Positive(t, r.lat[i][0].mean, name)
		wantLimiters := r.plan.idleLimiters
		if name == redissonName {
			wantLimiters = r.plan.idleLimitersJava
		}
		require.Equal(t, wantLimiters, r.mem[i].limiters, name)
		if !r.exact[i].noRule {
			require.Positive(t, r.exact[i].burstGrants, "%s: nothing granted in the bursts", name)
			require.Positive(t, r.exact[i].steadyShare, "%s: nothing granted under steady overload", name)
			require.NotEmpty(t, r.exact[i].series, name)
		}
	}
	// Every limiter keeps the keys its algorithm needs, no more (read
	// with SCAN after one grant each).
	keys := map[string]float64{"ratelimiter (default)": 3, "ratelimiter WithMaxBatch(1)": 3, redissonName: 3,
		"GCRA (redis_rate v10)": 1, "fixed window": 1, "sliding log": 1, "sliding window counter": 1, "token bucket": 1,
		"floor: one-command script": 1}
	for i, name := range r.names {
		require.Equal(t, keys[name], r.mem[i].keysPerLimiter, "%s: keys per idle limiter", name)
	}

	checkSections(t, r)

	for _, f := range []string{"throughput-granted.svg", "throughput-refused.svg", "cpu-granted.svg", "cpu-refused.svg", "boundary-burst.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(bytes.TrimSpace(b), []byte("<?xml")) || bytes.Contains(b[:min(len(b), 200)], []byte("<svg")), "%s is not SVG", f)
		for _, name := range r.names {
			if f == "boundary-burst.svg" && name == "floor: one-command script" {
				require.NotContains(t, string(b), name)
				continue
			}
			require.Contains(t, string(b), svgEscape(name), "%s: no line for %s", f, name)
		}
	}
}

// checkSections checks that the sections after the contenders' tables
// measured what they name.
func checkSections(t *testing.T, r *results) {
	t.Helper()
	wantBlocked := []string{"ratelimiter (default)", "ratelimiter WithMaxBatch(1)"}
	if len(r.skipped) == 0 {
		wantBlocked = append(wantBlocked, redissonName)
	}
	require.Equal(t, wantBlocked, r.blocked.names)
	for i, ss := range r.blocked.samples {
		require.Len(t, ss, r.plan.rounds)
		require.Positive(t, ss[0].grants, r.blocked.names[i])
		require.Positive(t, ss[0].scripts, r.blocked.names[i])
	}
	require.Len(t, r.multi, len(multiCases))
	for i, ss := range r.multi {
		require.Len(t, ss, r.plan.multiRounds)
		require.Positive(t, ss[0].compRedis, multiCases[i].String())
		require.Positive(t, ss[0].sepRedis, multiCases[i].String())
	}
	require.Len(t, r.window, len(r.plan.windowRecords)+1)
	for i, us := range r.window {
		require.Len(t, us, r.plan.costRounds)
		require.Positive(t, us[0], r.windowNames[i])
	}
	require.Len(t, r.cost, 4)
	for i, cs := range r.cost {
		require.Positive(t, cs[0].allocs, r.costNames[i])
	}
	require.Empty(t, r.replica.skipped, "the test's server is the run's own: a replica is started")
	for i, ls := range r.replica.samples {
		require.Positive(t, ls[0].p50, r.replica.names[i])
	}
	if r.instr.skipped != "" {
		require.False(t, redistest.Required(), "under CI valgrind is installed: %s", r.instr.skipped)
		t.Logf("LEFT OUT: instructions: %s", r.instr.skipped)
		return
	}
	require.Len(t, r.instr.counts, 3) // granted, refused, settling (compat.ScriptInstructions)
	for _, c := range r.instr.counts {
		require.Positive(t, c.Go, c.Path)
		require.Positive(t, c.OneCommand, c.Path)
		require.Equal(t, len(r.skipped) == 0, c.Redisson > 0, "%s: Redisson counted when it runs", c.Path)
	}
}

// section returns the part of md from the heading that holds title to the
// next heading.
func section(md, title string) string {
	i := strings.Index(md, title)
	if i < 0 {
		return ""
	}
	rest := md[i:]
	if j := strings.Index(rest[1:], "### "); j >= 0 {
		return rest[:j+1]
	}
	return rest
}

// svgEscape escapes what an SVG text element escapes in the names.
func svgEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// checkKeyed checks the many-keys section: every contender, regime and
// limiter count measured in every round and printed; far from the rate
// every decision is granted, and no contender makes two script calls per
// decision.
func checkKeyed(t *testing.T, k *keyedResult, p plan, md string) {
	t.Helper()
	require.Contains(t, md, "### Many keys")
	require.Equal(t, []string{"ratelimiter (default)", "ratelimiter WithMaxBatch(1)", "GCRA (redis_rate v10)"}, k.names)
	for _, reg := range keyedRegimes {
		for _, n := range p.keyedLimiters {
			for i, name := range k.names {
				all := k.samples[reg.name][n][i]
				require.Len(t, all, p.keyedRounds, "%s, %s, %d limiters", name, reg.name, n)
				for _, s := range all {
					require.Positive(t, s.perSec, "%s, %s, %d limiters: no decisions", name, reg.name, n)
					// At most one call per decision, and a few retries: one
					// run read 1.011 for WithMaxBatch(1) (a second call after
					// a refusal the script makes before writing, such as a
					// record collision or a clock-step bound, is a retry).
					// A contender making two calls per decision still fails.
					require.LessOrEqual(t, s.scripts, 1.05, "%s, %s, %d limiters: script calls per decision", name, reg.name, n)
					if reg.rate >= 1_000_000 {
						require.Equal(t, 1.0, s.granted, "%s, far from the rate: a refusal", name)
					}
				}
				require.Equal(t, 1, strings.Count(md, "| "+reg.name+" | "+fmt.Sprint(n)+" | "+name+" | "), "%s: one row", name)
			}
		}
	}
}

// TestLoneOnly runs --lone-only: the lone-caller table alone, every side
// measured on both paths, and nothing else.
func TestLoneOnly(t *testing.T) {
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	_, err := run(ctx, options{url: "redis://" + redisAddr, ownServer: true, quick: true, loneOnly: true, out: &out, log: &log})
	require.NoError(t, err, "progress:\n%s", log.String())
	md := out.String()
	require.Contains(t, md, "## Lone-caller section (quick run, --lone-only)")
	require.Contains(t, md, "### A lone caller, call by call")
	for _, side := range []string{"ratelimiter (default), context.Background()", "GCRA (redis_rate v10)"} {
		for _, path := range []string{"| granted | " + side + " |", "| refused | " + side + " |"} {
			require.Contains(t, md, path)
		}
	}
	require.NotContains(t, md, "### Latency", "only the lone-caller section")
}
