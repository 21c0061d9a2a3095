package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQuickRun runs `make bench-quick`'s measurements end to end against
// the test server and checks that every contender was measured, the
// tables printed and the charts written. It asserts nothing about speed.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	dir := t.TempDir()
	r, err := run(ctx, options{url: "redis://" + redisAddr, quick: true, charts: dir, out: &out, log: &log})
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
	for _, section := range []string{"granted path", "refused path", "### Latency", "### Redis memory", "### Exactness"} {
		require.Contains(t, md, section)
	}
	for i, name := range r.names {
		require.Equal(t, 5, strings.Count(md, "| "+name+" | "), "%s: one row in each of the five tables", name)
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

// svgEscape escapes what an SVG text element escapes in the names.
func svgEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
