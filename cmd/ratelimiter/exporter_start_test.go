package main_test

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
)

// Issue 39, item 8: the exporter starts when Redis is down or stalled.
// It serves /metrics anyway, with ratelimiter_exporter_up 0 and no
// limiter series, /-/ready answers 503 and /-/healthy 200; once Redis
// answers, the next scrape reads it.
func TestExporterStartsWithoutRedis(t *testing.T) {
	c := rawClient(nil)
	// Down: nothing listens on the port.
	start := time.Now()
	metrics := startExporterURL(t, "redis://127.0.0.1:"+strconv.Itoa(freePort(t))+"/0", nil,
		"--redis-timeout", "500ms", "--collect-timeout", "1s")
	require.Less(t, time.Since(start), 5*time.Second, "serving soon after start")
	base := strings.TrimSuffix(metrics, "/metrics")
	got := scrape(t, metrics)
	require.Equal(t, 0.0, got["ratelimiter_exporter_up"])
	resp, body := get(t, c, base+"/-/ready", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	resp, _ = get(t, c, base+"/-/healthy", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Stalled: the server accepts connections and answers nothing.
	srv := startOwnServer(t)
	name := uniqueName(t)
	l := ratelimiter.NewClient(newRedisAt(t, srv.Addr())).Limiter(name)
	_, err := l.TrySetRate(context.Background(), ratelimiter.Config{Rate: 3, Interval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(srv.Pid(), syscall.SIGSTOP))
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(srv.Pid(), syscall.SIGCONT)
		}
	})
	start = time.Now()
	metrics = startExporterURL(t, "redis://"+srv.Addr()+"/0", nil, "--redis-timeout", "500ms", "--collect-timeout", "1s")
	require.Less(t, time.Since(start), 5*time.Second, "serving soon after start")
	base = strings.TrimSuffix(metrics, "/metrics")
	got = scrape(t, metrics)
	require.Equal(t, 0.0, got["ratelimiter_exporter_up"])
	resp, body = get(t, c, base+"/-/ready", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)

	require.NoError(t, syscall.Kill(srv.Pid(), syscall.SIGCONT))
	resumed = true
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got = scrape(t, metrics)
		if got["ratelimiter_exporter_up"] == 1 || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, 1.0, got["ratelimiter_exporter_up"], "read once Redis answers")
	require.Equal(t, 3.0, got[`ratelimiter_rate{limiter=`+strconv.Quote(name)+`}`])
	resp, body = get(t, c, base+"/-/ready", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// Issue 39, item 8: label values never carry control bytes. Limiters and
// PER_CLIENT ids whose names hold CR, ESC, a tab, NUL or a newline are
// exported Go-quoted with <label>_quoted="1", one series each; the page
// holds no byte below 0x20 but its line ends, and it parses with
// expfmt's text parser and passes promtool check metrics.
func TestExporterLabelsEscapeControlBytes(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := uniqueName(t) + "-"
	names := []string{base + "cr\rx", base + "esc\x1b[31mred", base + "tab\tx", base + "nul\x00x", base + "nl\nx", base + "plain é"}
	for _, n := range names {
		l := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("id\r\x1b")).Limiter(n)
		_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Hour, Mode: ratelimiter.PerClient})
		require.NoError(t, err)
		_, err = l.TryAcquire(ctx, 1)
		require.NoError(t, err)
	}
	metrics := startExporter(t, "--match", base+"*")
	resp, body := get(t, rawClient(nil), metrics, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		for _, b := range []byte(line) {
			require.False(t, b < 0x20 || b == 0x7f, "line %d holds byte %#x: %q", i, b, line)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, m := range fams["ratelimiter_available_permits"].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		require.True(t, model.LabelValue(labels["limiter"]).IsValid())
		if labels["limiter"] == base+"plain é" {
			require.Empty(t, labels["limiter_quoted"], "a printable name stays as it is")
		} else {
			require.Equal(t, "1", labels["limiter_quoted"], labels["limiter"])
			name, err := strconv.Unquote(labels["limiter"])
			require.NoError(t, err)
			seen[name] = true
		}
		require.Equal(t, "1", labels["client_quoted"])
		require.Equal(t, strconv.Quote("id\r\x1b"), labels["client"])
		require.Equal(t, 4.0, m.GetGauge().GetValue())
	}
	for _, n := range names[:5] {
		require.True(t, seen[n], "%q exported", n)
	}
	cmd := exec.Command(needTool(t, "promtool"), "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
}
