package ratelimiterotel_test

import (
	"bufio"
	"context"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/compat"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// The CLI's exporter, end to end: the real binary serves limiters written
// by Java Redisson (the compat peer) and by Go; the page is scraped over
// HTTP and parsed with Prometheus's own text-format parser.
func TestExporterEndToEnd(t *testing.T) {
	redistest.Need(t)
	const version = "4.7.0"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if tool := compat.ToolsMissing(); tool != "" {
		if redistest.Required() {
			t.Fatalf("%s required (CI=true)", tool)
		}
		t.Skipf("no %s: the Java peer cannot run", tool)
	}
	require.NoError(t, compat.Build(ctx, version))
	peer, err := compat.StartPeer(ctx, compat.PeerOptions{Version: version, Addr: redisAddr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = peer.Close() })

	base := redistest.Name(t)
	javaOverall, javaPerClient, goLimiter := base+"-java", base+"-java-pc", base+"-go"
	for _, cmd := range [][]any{
		{"trySetRate", javaOverall, "OVERALL", 10, 3_600_000},
		{"tryAcquire", javaOverall, 4},
		{"trySetRate", javaPerClient, "PER_CLIENT", 5, 3_600_000},
		{"tryAcquire", javaPerClient, 2},
	} {
		_, err := peer.Do(ctx, cmd...)
		require.NoError(t, err, "%v", cmd)
	}
	gl := ratelimiter.NewClient(newRedis(t)).Limiter(goLimiter)
	_, err = gl.TrySetRate(ctx, ratelimiter.Config{Rate: 100, Interval: time.Minute})
	require.NoError(t, err)

	url := startExporter(t, buildCLI(t), "--match", base+"*")
	fams := scrapeParsed(t, url)
	require.Equal(t, dto.MetricType_GAUGE, fams["ratelimiter_rate"].GetType())
	require.Equal(t, 10.0, value(t, fams, "ratelimiter_rate", "limiter", javaOverall))
	require.Equal(t, 3600.0, value(t, fams, "ratelimiter_interval_seconds", "limiter", javaOverall))
	require.Equal(t, 6.0, value(t, fams, "ratelimiter_available_permits", "limiter", javaOverall))
	require.Equal(t, 4.0, value(t, fams, "ratelimiter_window_permits", "limiter", javaOverall))
	require.Equal(t, 1.0, value(t, fams, "ratelimiter_info", "limiter", javaPerClient, "mode", "per-client"))
	require.Equal(t, 3.0, value(t, fams, "ratelimiter_available_permits", "limiter", javaPerClient, "client", peer.ID()))
	require.Equal(t, 100.0, value(t, fams, "ratelimiter_available_permits", "limiter", goLimiter))
	require.Equal(t, 3.0, value(t, fams, "ratelimiter_exporter_limiters"))

	// Grants after a reading are counted by the next ones, Java's and
	// Go's, as counters.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := peer.Do(ctx, "tryAcquire", javaOverall, 1)
		require.NoError(t, err)
		_, err = gl.TryAcquire(ctx, 5)
		require.NoError(t, err)
		fams = scrapeParsed(t, url)
		goPermits, ok := lookup(fams, "ratelimiter_recorded_permits_total", "limiter", goLimiter)
		javaPermits, ok2 := lookup(fams, "ratelimiter_recorded_permits_total", "limiter", javaOverall)
		if ok && ok2 && goPermits > 0 && javaPermits > 0 {
			require.Equal(t, dto.MetricType_COUNTER, fams["ratelimiter_recorded_permits_total"].GetType())
			require.Zero(t, math.Mod(goPermits, 5), "Go's grants are of 5 permits")
			break
		}
		require.True(t, time.Now().Before(deadline), "no recorded permits counted in 20s")
		time.Sleep(50 * time.Millisecond)
	}
}

// buildCLI builds cmd/ratelimiter into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ratelimiter")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/goredisson/ratelimiter/cmd/ratelimiter").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// startExporter runs the exporter on a free loopback port against the
// test server and returns its /metrics URL; it is stopped when t ends.
func startExporter(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"exporter", "--url", "redis://" + redisAddr + "/0", "--web.listen-address", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
	require.True(t, ok, "first line %q", line)
	return url
}

func scrapeParsed(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, expfmt.TypeTextPlain, expfmt.ResponseFormat(resp.Header).FormatType())
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value returns the value (a gauge's or a counter's) of family name
// whose labels are exactly the given pairs; it fails t when there is none.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookup(fams, name, labels...)
	require.True(t, ok, "no %s%v in %v", name, labels, fams[name])
	return v
}

// lookup is value that reports whether the sample exists. The pairs may
// come in any order (client_golang sorts a series' labels by name).
func lookup(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}
