package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// startExporter runs the binary's exporter on a free loopback port
// against the test server and returns the /metrics URL; the process is
// stopped when t ends.
func startExporter(t *testing.T, args ...string) string {
	t.Helper()
	return startExporterAt(t, redisAddr, args...)
}

// startExporterAt is startExporter against the server at addr.
func startExporterAt(t *testing.T, addr string, args ...string) string {
	t.Helper()
	return startExporterURL(t, "redis://"+addr+"/0", nil, args...)
}

// startExporterURL is startExporter with --url redisURL; the exporter's
// stderr goes to stderr when it is not nil.
func startExporterURL(t *testing.T, redisURL string, stderr io.Writer, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"exporter", "--url", redisURL, "--web.listen-address", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = stderr
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

// scrape returns the samples of a /metrics page: the sample text before
// the value, such as name{limiter="x"}, mapped to the value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "version=0.0.4")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return samples(t, body)
}

// samples reads a text-format page as scrape does.
func samples(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "line %q", line)
		got[line[:i]] = v
	}
	return got
}

// The exporter finds the limiters matching --match and reports their
// config and window; PER_CLIENT budgets per client id.
func TestExporterServesLimiters(t *testing.T) {
	ctx := context.Background()
	rdb := newRedis(t)
	base := uniqueName(t)
	over, pc, other := base+"-over", base+"-pc", "unmatched-"+base
	for name, cfg := range map[string]ratelimiter.Config{
		over:  {Rate: 10, Interval: time.Hour},
		pc:    {Rate: 5, Interval: time.Hour, Mode: ratelimiter.PerClient},
		other: {Rate: 1, Interval: time.Hour},
	} {
		_, err := ratelimiter.NewClient(rdb).Limiter(name).TrySetRate(ctx, cfg)
		require.NoError(t, err)
	}
	require.NoError(t, rdb.HSet(ctx, base+"-not-a-limiter", "rate", "x").Err())
	_, err := ratelimiter.NewClient(rdb).Limiter(over).TryAcquire(ctx, 3)
	require.NoError(t, err)
	_, err = ratelimiter.NewClient(rdb, ratelimiter.WithClientID("alice")).Limiter(pc).TryAcquire(ctx, 2)
	require.NoError(t, err)

	got := scrape(t, startExporter(t, "--match", base+"*"))
	q := strconv.Quote
	require.Equal(t, 10.0, got[`ratelimiter_rate{limiter=`+q(over)+`}`])
	require.Equal(t, 3600.0, got[`ratelimiter_interval_seconds{limiter=`+q(over)+`}`])
	require.Equal(t, 1.0, got[`ratelimiter_info{limiter=`+q(pc)+`,mode="per-client"}`])
	require.Equal(t, 7.0, got[`ratelimiter_available_permits{limiter=`+q(over)+`}`])
	require.Equal(t, 3.0, got[`ratelimiter_window_permits{limiter=`+q(over)+`}`])
	require.Equal(t, 1.0, got[`ratelimiter_window_records{limiter=`+q(over)+`}`])
	require.Equal(t, 3.0, got[`ratelimiter_available_permits{client="alice",limiter=`+q(pc)+`}`])
	require.Equal(t, 1.0, got[`ratelimiter_clients{limiter=`+q(pc)+`}`])
	require.Equal(t, 2.0, got["ratelimiter_exporter_limiters"], "the two matching limiters, not the other hash")
	require.Equal(t, 1.0, got["ratelimiter_exporter_up"])
	require.NotContains(t, got, `ratelimiter_rate{limiter=`+q(other)+`}`)
}

// The page carries ratelimiter_build_info with the version and revision
// that --version prints and the Go version, and client_golang's
// go_build_info.
func TestExporterBuildInfo(t *testing.T) {
	out := strings.TrimSpace(ok(t, cliOffline(t, "--version")).stdout)
	v, rest, found := strings.Cut(strings.TrimPrefix(out, "ratelimiter "), " (")
	require.True(t, found, out)
	parts := strings.Split(strings.TrimSuffix(rest, ")"), ", ")
	revision, goVersion := "unknown", parts[len(parts)-1]
	if len(parts) == 2 {
		revision = parts[0]
	}
	got := scrape(t, startExporter(t, "--match", uniqueName(t)))
	q := strconv.Quote
	series := `ratelimiter_build_info{goversion=` + q(goVersion) + `,revision=` + q(revision) + `,version=` + q(v) + `}`
	require.Equal(t, 1.0, got[series], "%s in %v", series, got)
	var goBuild bool
	for s := range got {
		goBuild = goBuild || strings.HasPrefix(s, "go_build_info{")
	}
	require.True(t, goBuild, "go_build_info")
}

// Issue 37: two scrapers read the record counters alike. Scraper B,
// scraping right after scraper A, sees the permits granted before A's
// scrape (a gauge of what came since the previous reading, whoever took
// it, showed B nothing), and neither sees a record counted twice.
func TestExporterCountersReadAlike(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t)
	l := ratelimiter.NewClient(newRedis(t)).Limiter(name)
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 100, Interval: time.Hour})
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, 9) // before the exporter's first reading: not counted
	require.NoError(t, err)
	metrics := startExporter(t, "--match", name)
	a := &http.Client{Transport: &http.Transport{}}
	b := &http.Client{Transport: &http.Transport{}}
	q := strconv.Quote(name)
	records, permits := `ratelimiter_permit_records_total{limiter=`+q+`}`, `ratelimiter_recorded_permits_total{limiter=`+q+`}`
	read := func(c *http.Client) (float64, float64) {
		t.Helper()
		resp, err := c.Get(metrics)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), "# TYPE ratelimiter_recorded_permits_total counter\n")
		got := samples(t, body)
		return got[records], got[permits]
	}
	for _, c := range []*http.Client{a, b} {
		n, p := read(c)
		require.Equal(t, [2]float64{0, 0}, [2]float64{n, p})
	}
	for _, n := range []int64{2, 3} {
		granted, err := l.TryAcquire(ctx, n)
		require.NoError(t, err)
		require.True(t, granted)
	}
	time.Sleep(3 * time.Millisecond) // the next reading's Redis time is past the records' stamps
	for _, c := range []*http.Client{a, b, a, b} {
		n, p := read(c)
		require.Equal(t, [2]float64{2, 5}, [2]float64{n, p}, "records, permits")
	}
}

// Bad flags are usage errors: exit 2, one line, nothing served.
func TestExporterFlags(t *testing.T) {
	for _, args := range [][]string{
		{"exporter", "--collect-timeout", "1ms"},
		{"exporter", "--web.listen-address", "nope"},
		{"exporter", "--listen", "127.0.0.1:0"}, // renamed --web.listen-address
		{"exporter", "--every", "5s"},           // gone: read on each scrape
		{"exporter", "--web.config.file", "/nonexistent/web.yml"},
		{"exporter", "--web.telemetry-path", "metrics"},
		{"exporter", "--client-id", "x"}, // a flag only writing commands take
		{"exporter", "--max-limiters", "0"},
		{"exporter", "--match", ""},
		{"exporter", "extra"},
	} {
		failsWith(t, 2, cli(t, args...))
	}
}

// inspect shows records stamped after Redis's clock, written by a client
// whose clock is ahead.
func TestInspectShowsFutureRecords(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t)
	ahead := ratelimiter.WithClock(func() time.Time { return time.Now().Add(time.Hour) })
	l := ratelimiter.NewClient(newRedis(t), ahead, ratelimiter.WithServerClock(false)).Limiter(name)
	_, err := l.TrySetRate(ctx, ratelimiter.Config{Rate: 10, Interval: time.Hour})
	require.NoError(t, err)
	_, err = l.TryAcquire(ctx, 2)
	require.NoError(t, err)
	out := ok(t, cli(t, "inspect", name)).stdout
	require.Contains(t, out, "1 records (2 permits) are stamped after Redis's clock")
	var in struct {
		Future struct {
			Records   int   `json:"records"`
			MaxLeadMS int64 `json:"max_lead_ms"`
		} `json:"future_of_server_clock"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok(t, cli(t, "inspect", name, "-o", "json")).stdout), &in))
	require.Equal(t, 1, in.Future.Records)
	require.InDelta(t, time.Hour.Milliseconds(), in.Future.MaxLeadMS, 60_000)
}

// Issue 39, item 3: the exporter reports a read the user may not make.
// Without ZCOUNT (which the limiters' reading needs) a scrape says
// ratelimiter_exporter_up 0, with no limiter series, and stderr names the
// command; without INFO (only the eviction series need it) the reading
// succeeds, the eviction series are absent and
// ratelimiter_exporter_info_errors_total counts the refusals.
func TestExporterReportsRefusedReads(t *testing.T) {
	name := uniqueName(t)
	newLimiter(t, name, ratelimiter.Config{Rate: 10, Interval: time.Hour}, 2)
	user := "exp-" + strings.ReplaceAll(name, "_", "-")

	var stderr redisproc.SyncBuffer
	url := startExporterURL(t, readmeUser(t, redisAddr, user, "-zcount"), &stderr, "--match", name)
	got := scrape(t, url)
	require.Equal(t, 0.0, got["ratelimiter_exporter_up"], "a refused ZCOUNT fails the reading")
	_, rate := got[`ratelimiter_rate{limiter=`+strconv.Quote(name)+`}`]
	require.False(t, rate, "no limiter series from a failed reading")
	require.Contains(t, stderr.String(), "zcount")

	url = startExporterURL(t, readmeUser(t, redisAddr, user+"-i", "-info"), nil, "--match", name)
	got = scrape(t, url)
	require.Equal(t, 1.0, got["ratelimiter_exporter_up"])
	require.Equal(t, 8.0, got[`ratelimiter_available_permits{limiter=`+strconv.Quote(name)+`}`])
	require.GreaterOrEqual(t, got["ratelimiter_exporter_info_errors_total"], 1.0, "INFO refused: counted")
	for series := range got {
		require.False(t, strings.HasPrefix(series, "ratelimiter_redis_eviction_risk"), series)
	}
}
