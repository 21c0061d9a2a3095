package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestExporterAtScale runs the exporter with its default flags against a
// server of its own holding EXPORTER_SCALE limiters (default 100,000;
// docs/prometheus.md's table has 1,000,000), each a config hash and a value key
// as Redisson leaves them. The exporter keeps the first 1,000 by name and
// says it truncated; a collection (one per scrape) must take less than
// 5 s, half the default --collect-timeout, and the process's peak
// resident memory (VmHWM) stay under exporterBudgetMB.
//
//	EXPORTER_SCALE=1000000 go test -run TestExporterAtScale -v ./cmd/ratelimiter
func TestExporterAtScale(t *testing.T) {
	redistest.SkipIfShort(t, "populating a server with limiters")
	n := 100_000
	if s := os.Getenv("EXPORTER_SCALE"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	srv := startOwnServer(t)
	rdb := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < n; i += 10_000 {
		p := rdb.Pipeline()
		for j := i; j < min(i+10_000, n); j++ {
			name := fmt.Sprintf("scale:%07d", j)
			p.HSet(ctx, name, "rate", "10", "interval", "60000", "type", "0")
			p.Set(ctx, "{"+name+"}:value", "10", 0)
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
	}
	t.Logf("populated %d limiters in %v", n, time.Since(start).Round(time.Millisecond))

	cmd := exec.Command(bin, "exporter", "--url", "redis://"+srv.Addr()+"/0", "--web.listen-address", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "the first collection")
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
	require.True(t, ok, "first line %q", line)
	first := scrape(t, url)
	var got map[string]float64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = scrape(t, url); got["ratelimiter_exporter_last_success_timestamp_seconds"] > first["ratelimiter_exporter_last_success_timestamp_seconds"] {
			break
		}
	}
	hwm := vmHWM(t, cmd.Process.Pid)
	t.Logf("EXPORTER AT SCALE %d limiters, default flags: collections took %.2f s and %.2f s (bound 5 s); peak resident memory %d MB; exported %v, truncated %v",
		n, first["ratelimiter_exporter_collect_seconds"], got["ratelimiter_exporter_collect_seconds"], hwm>>10,
		got["ratelimiter_exporter_limiters"], got["ratelimiter_exporter_truncated"])
	require.Equal(t, 1000.0, got["ratelimiter_exporter_limiters"])
	require.Equal(t, 1.0, got["ratelimiter_exporter_truncated"])
	if 2*n <= 500_000 {
		// SCAN saw every key (at most 1,000 calls of COUNT 1000): the
		// first 1,000 by name, exactly.
		_, first := got[`ratelimiter_rate{limiter="scale:0000999"}`]
		_, next := got[`ratelimiter_rate{limiter="scale:0001000"}`]
		require.True(t, first && !next, "the first 1,000 names exported")
	}
	require.Less(t, got["ratelimiter_exporter_collect_seconds"], 5.0, "a collection within 5 s")
	require.Less(t, hwm>>10, int64(exporterBudgetMB), "peak resident memory, MB")
}

// Issue 39, item 8: the exporter's memory grows by a bounded amount per
// exported limiter, at any --max-limiters. A server of its own holds
// EXPORTER_MEM_SCALE limiters (default 20,000), each a config hash, a
// value key and a record in the window; an exporter with --max-limiters
// a quarter above that exports them all, and its peak resident memory
// (VmHWM) over two scrapes, less that of an exporter of the same server
// that matches no limiter, divided by the limiters, must stay under
// perLimiterBudget. It prints the figures (docs/prometheus.md, "The
// exporter at scale"):
//
//	EXPORTER_MEM_SCALE=200000 go test -run TestExporterMemoryPerLimiter -v ./cmd/ratelimiter
func TestExporterMemoryPerLimiter(t *testing.T) {
	redistest.SkipIfShort(t, "populating a server with limiters")
	n := 20_000
	if s := os.Getenv("EXPORTER_MEM_SCALE"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	srv := startOwnServer(t)
	rdb := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	now := float64(time.Now().UnixMilli())
	record := "\x10" + strings.Repeat("r", 16) + "\x01\x00\x00\x00" // Bc0I, 1 permit
	for i := 0; i < n; i += 10_000 {
		p := rdb.Pipeline()
		for j := i; j < min(i+10_000, n); j++ {
			name := fmt.Sprintf("mem:%07d", j)
			p.HSet(ctx, name, "rate", "10", "interval", "3600000", "type", "0")
			p.Set(ctx, "{"+name+"}:value", "9", 0)
			p.ZAdd(ctx, "{"+name+"}:permits", redis.Z{Score: now, Member: record})
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
	}
	url := "redis://" + srv.Addr() + "/0"
	// fetch times one scrape as Prometheus makes it (OpenMetrics, gzip)
	// or as text, uncompressed, and returns the page.
	fetch := func(url string, prometheus bool) ([]byte, float64) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if prometheus {
			req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
			req.Header.Set("Accept-Encoding", "gzip")
		}
		start := time.Now()
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return body, time.Since(start).Seconds()
	}
	run := func(match string) (hwmKB int64, took [2]float64, got map[string]float64) {
		start := time.Now()
		cmd := exec.Command(bin, "exporter", "--url", url, "--web.listen-address", "127.0.0.1:0", "--match", match,
			"--max-limiters", strconv.Itoa(n+n/4), "--collect-timeout", "60s")
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		t.Logf("--match %s: serving after %v", match, time.Since(start).Round(time.Millisecond))
		metrics, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
		require.True(t, ok, "first line %q", line)
		_, took[0] = fetch(metrics, true)
		body, took1 := fetch(metrics, false)
		took[1] = took1
		return vmHWM(t, cmd.Process.Pid), took, samples(t, body)
	}
	baseKB, _, _ := run("none:*")
	hwmKB, took, got := run("mem:*")
	require.Equal(t, float64(n), got["ratelimiter_exporter_limiters"])
	require.Equal(t, 0.0, got["ratelimiter_exporter_truncated"])
	require.Equal(t, 9.0, got[`ratelimiter_available_permits{limiter="mem:0000000"}`])
	perLimiter := (hwmKB - baseKB) * 1024 / int64(n)
	t.Logf("EXPORTER MEMORY %d limiters, --max-limiters %d: scrapes took %.2f s (OpenMetrics, gzip) and %.2f s (text; its reading %.2f s); peak resident memory %d MB, %d MB without limiters: %d bytes per limiter (budget %d)",
		n, n+n/4, took[0], took[1], got["ratelimiter_exporter_collect_seconds"], hwmKB>>10, baseKB>>10, perLimiter, perLimiterBudget)
	require.Less(t, perLimiter, int64(perLimiterBudget), "bytes of peak resident memory per exported limiter")
}

// perLimiterBudget bounds the exporter's peak resident memory per exported
// limiter, in bytes (docs/prometheus.md, "The exporter at scale", has the
// figures); before the limiters' series were streamed, each was a
// client_golang metric and a protobuf message per scrape.
const perLimiterBudget = 4096

// exporterBudgetMB bounds the exporter's peak resident memory with the
// default flags, whatever the number of limiters in Redis (docs/prometheus.md,
// "The exporter at scale", has the figures); before each SCAN batch was
// read as it came, memory grew with the keys matched.
const exporterBudgetMB = 50

// startOwnServer starts a redis-server for this test alone.
func startOwnServer(t *testing.T) *redistest.Server {
	t.Helper()
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.StartWrapped(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// vmHWM returns the peak resident set of process pid in kB, from
// /proc/pid/status.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
