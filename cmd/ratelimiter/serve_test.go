package main_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/goredisson/ratelimiter"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// serveProc is a running "ratelimiter serve".
type serveProc struct {
	cmd      *exec.Cmd
	grpcAddr string
	httpURL  string // scheme://host:port
	stderr   *redisproc.SyncBuffer
	exited   chan error
}

// startServe runs the binary's serve on free loopback ports with
// --url redisURL and args, and waits until it says where it serves; the
// process is killed when t ends if it still runs.
func startServe(t *testing.T, redisURL string, args ...string) *serveProc {
	t.Helper()
	all := append([]string{"serve", "--url", redisURL, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, args...)
	p := &serveProc{cmd: exec.Command(bin, all...), stderr: &redisproc.SyncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	lines := make(chan string)
	go func() {
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(line)
		}
	}()
	for p.grpcAddr == "" || p.httpURL == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "serve ended before serving: %s", p.stderr)
			if a, ok := strings.CutPrefix(line, "serving grpc "); ok {
				p.grpcAddr = a
			} else if u, ok := strings.CutPrefix(line, "serving http "); ok {
				p.httpURL = u
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("serve did not start: %s", p.stderr)
		}
	}
	return p
}

// client is a gRPC client of the service, through go-control-plane's
// generated stub, closed when t ends.
func (p *serveProc) client(t *testing.T, creds credentials.TransportCredentials) (rlspb.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn), conn
}

// signal sends sig and, for SIGTERM and SIGINT, waits for the exit.
func (p *serveProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// wait returns the exit code within d.
func (p *serveProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(d):
		t.Fatalf("serve still runs after %v: %s", d, p.stderr)
		return -1
	}
}

// desc is a descriptor of key, value pairs.
func desc(kv ...string) *rlsext.RateLimitDescriptor {
	d := &rlsext.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlsext.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// ask calls ShouldRateLimit with a 10 s deadline.
func ask(t *testing.T, c rlspb.RateLimitServiceClient, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(req.GetDescriptors()))
	return resp
}

func codesOf(resp *rlspb.RateLimitResponse) []string {
	out := []string{resp.GetOverallCode().String()}
	for _, s := range resp.GetStatuses() {
		out = append(out, s.GetCode().String())
	}
	return out
}

// serveConfig writes a configuration file for domain: body is its
// descriptors list, indented as in the file.
func serveConfig(t *testing.T, domain, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, p, "domain: "+domain+"\ndescriptors:\n"+body)
	return p
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	// Through a rename, as a deployment swaps a file: the server never
	// reads half of one.
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

const serveDescriptors = `
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 2
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
  - key: ldap
    rate_limit:
      unlimited: true
  - key: service
    descriptors:
      - key: user
        value: user-a
        shadow_mode: true
        rate_limit:
          unit: hour
          requests_per_unit: 1
  - key: bulk
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: blocked
    rate_limit:
      unit: second
      requests_per_unit: 0
`

// Issue 38: serve answers Envoy's ShouldRateLimit over gRPC (through
// go-control-plane's generated client) from an Envoy ratelimit file:
// nested descriptors, several descriptors in one request (OVER_LIMIT if
// any is over, each with its own status), unlimited, shadow_mode,
// descriptors and domains with no config (OK), hits_addend of the
// request and of a descriptor (0: a look that takes nothing), and a
// requests_per_unit of 0. Each limit is a Redisson limiter under the
// documented name, configured with the file's rate.
func TestServeGRPC(t *testing.T) {
	rdb := newRedis(t)
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors))
	c, conn := p.client(t, nil)
	ctx := context.Background()
	lims := ratelimiter.NewClient(rdb)

	// Nested: 2 a day for each number of a marketing message.
	nested := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "2061111111")}}
	for i, want := range []uint32{1, 0} {
		resp := ask(t, c, nested)
		require.Equal(t, []string{"OK", "OK"}, codesOf(resp), "request %d", i)
		st := resp.GetStatuses()[0]
		assert.Equal(t, want, st.GetLimitRemaining())
		assert.Equal(t, uint32(2), st.GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, rlspb.RateLimitResponse_RateLimit_DAY, st.GetCurrentLimit().GetUnit())
		d := st.GetDurationUntilReset().AsDuration()
		assert.True(t, d > 23*time.Hour && d <= 24*time.Hour, "reset in %v: when the first permit comes back", d)
	}
	resp := ask(t, c, nested)
	require.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp))
	assert.Equal(t, uint32(0), resp.GetStatuses()[0].GetLimitRemaining())
	assert.Greater(t, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(), 23*time.Hour, "the earliest a retry can pass")
	name := domain + ":message_type_marketing:to_number_2061111111"
	cfg, err := lims.Limiter(name).Config(ctx)
	require.NoError(t, err)
	assert.Equal(t, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 2, Interval: 24 * time.Hour, KeepAlive: 24 * time.Hour}, cfg)

	// Two descriptors: one over, one OK; the one over fails the request.
	both := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{
		desc("message_type", "marketing", "to_number", "2061111111"), desc("to_number", "2061111111")}}
	resp = ask(t, c, both)
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(99), resp.GetStatuses()[1].GetLimitRemaining())

	// Unlimited: OK, MaxUint32 left, nothing in Redis.
	resp = ask(t, c, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("ldap", "cn=x")}})
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(math.MaxUint32), resp.GetStatuses()[0].GetLimitRemaining())
	exists, err := lims.Limiter(domain + ":ldap_cn=x").Exists(ctx)
	require.NoError(t, err)
	assert.False(t, exists)

	// shadow_mode: over the limit of 1, still OK.
	shadow := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("service", "auth", "user", "user-a")}}
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, shadow)))
	resp = ask(t, c, shadow)
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(0), resp.GetStatuses()[0].GetLimitRemaining(), "the limiter counted it")

	// No config: a descriptor of a known domain, a key whose value has no
	// entry, and a domain no file names.
	for _, req := range []*rlspb.RateLimitRequest{
		{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("nothing", "here")}},
		{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("service", "auth", "user", "user-b")}},
		{Domain: domain + "-none", Descriptors: []*rlsext.RateLimitDescriptor{desc("to_number", "1")}},
	} {
		resp := ask(t, c, req)
		assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
		assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
	}

	// hits_addend: the request's (4) for every descriptor, a
	// descriptor's own over it (7 > 6 left, 0 takes nothing), and more
	// than the rate.
	bulk := func(reqHits uint32, own *wrapperspb.UInt64Value) *rlspb.RateLimitResponse {
		d := desc("bulk", "job-1")
		d.HitsAddend = own
		return ask(t, c, &rlspb.RateLimitRequest{Domain: domain, HitsAddend: reqHits, Descriptors: []*rlsext.RateLimitDescriptor{d}})
	}
	resp = bulk(4, nil)
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(6), resp.GetStatuses()[0].GetLimitRemaining())
	resp = bulk(4, wrapperspb.UInt64(7))
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp))
	assert.Equal(t, uint32(6), resp.GetStatuses()[0].GetLimitRemaining(), "a refusal takes nothing")
	resp = bulk(0, wrapperspb.UInt64(0))
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(6), resp.GetStatuses()[0].GetLimitRemaining())
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(bulk(11, nil)))
	resp = bulk(0, wrapperspb.UInt64(6))
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(0), resp.GetStatuses()[0].GetLimitRemaining())
	avail, err := lims.Limiter(domain + ":bulk_job-1").AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), avail)
	// hits_addend 0 on a used-up limit: OVER_LIMIT, taking nothing.
	resp = bulk(0, wrapperspb.UInt64(0))
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp), "a check with no permit left")
	assert.Equal(t, uint32(0), resp.GetStatuses()[0].GetLimitRemaining())
	assert.Equal(t, uint32(10), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())

	// Check at request, charge at response (token-based limits): the
	// check passes while permits are left, a charge that fits takes them,
	// one that does not fit takes nothing, and once the limit is used up
	// the check refuses. A check on a limiter not set up yet has the rate.
	tokens := func(hits uint64) *rlspb.RateLimitResponse {
		d := desc("bulk", "tokens")
		d.HitsAddend = wrapperspb.UInt64(hits)
		return ask(t, c, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{d}})
	}
	resp = tokens(0)
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(10), resp.GetStatuses()[0].GetLimitRemaining())
	assert.Equal(t, []string{"OK", "OK"}, codesOf(tokens(8)))
	resp = tokens(0)
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(2), resp.GetStatuses()[0].GetLimitRemaining())
	resp = tokens(3)
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp), "3 tokens do not fit in 2")
	assert.Equal(t, uint32(2), resp.GetStatuses()[0].GetLimitRemaining(), "a charge that does not fit takes nothing")
	assert.Equal(t, []string{"OK", "OK"}, codesOf(tokens(0)), "2 left")
	assert.Equal(t, []string{"OK", "OK"}, codesOf(tokens(2)))
	resp = tokens(0)
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp), "used up: the check refuses")
	assert.Equal(t, uint32(0), resp.GetStatuses()[0].GetLimitRemaining())

	// requests_per_unit 0 bars every request.
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(ask(t, c, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("blocked", "x")}})))

	// Envoy's service refuses a request without a domain or descriptors.
	_, err = c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Descriptors: []*rlsext.RateLimitDescriptor{desc("a", "b")}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: domain})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	// The health service says SERVING; the metrics count the decisions.
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())
	got := scrape(t, p.httpURL+"/metrics")
	assert.Equal(t, 8.0, got[fmt.Sprintf(`ratelimiter_serve_decisions_total{code="OVER_LIMIT",domain=%q}`, domain)])
	assert.Equal(t, 1.0, got[`ratelimiter_serve_decisions_total{code="OK",domain="(unknown)"}`])
	assert.Equal(t, 1.0, got[fmt.Sprintf(`ratelimiter_serve_shadow_mode_total{domain=%q}`, domain)])
	assert.Greater(t, got[`ratelimiter_serve_decision_duration_seconds_count{api="grpc"}`], 15.0)
	assert.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line, the configuration's, and no error: %s", p.stderr)
}

// postJSON posts body to the /json endpoint and returns the status and
// the response body.
func postJSON(t *testing.T, c *http.Client, base, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(base+"/json", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// Issue 38: the HTTP endpoint of Envoy's service, POST /json: the same
// request and response in protobuf's JSON mapping, 200 for OK and 429
// for OVER_LIMIT, 400 for what is not a request; and /healthcheck.
func TestServeJSON(t *testing.T) {
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors))
	hc := &http.Client{Timeout: 10 * time.Second}
	req := fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "message_type", "value": "marketing"}, {"key": "to_number", "value": "42"}]}, {"entries": [{"key": "ldap", "value": "x"}]}]}`, domain)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		code, body := postJSON(t, hc, p.httpURL, req)
		require.Equal(t, want, code, "request %d: %s", i, body)
		var resp rlspb.RateLimitResponse
		require.NoError(t, protojson.Unmarshal([]byte(body), &resp), body)
		require.Len(t, resp.GetStatuses(), 2)
		assert.Equal(t, uint32(2), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, uint32(math.MaxUint32), resp.GetStatuses()[1].GetLimitRemaining())
		if want == http.StatusTooManyRequests {
			assert.Contains(t, body, `"overallCode":"OVER_LIMIT"`)
		} else {
			assert.Contains(t, body, `"overallCode":"OK"`)
			assert.Contains(t, body, `"unit":"DAY"`)
		}
	}
	// hits_addend in JSON too.
	code, body := postJSON(t, hc, p.httpURL, fmt.Sprintf(`{"domain": %q, "hitsAddend": 9, "descriptors": [{"entries": [{"key": "bulk", "value": "j"}]}]}`, domain))
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"limitRemaining":1`)

	code, _ = postJSON(t, hc, p.httpURL, `{"domain": `)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = postJSON(t, hc, p.httpURL, `{"domain": "d", "bogus": 1}`)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = postJSON(t, hc, p.httpURL, `{"domain": "d"}`)
	assert.Equal(t, http.StatusBadRequest, code, "no descriptors")
	resp, body := get(t, hc, p.httpURL+"/json", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
	resp, body = get(t, hc, p.httpURL+"/healthcheck", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	got := scrape(t, p.httpURL+"/metrics")
	assert.Equal(t, 1.0, got[fmt.Sprintf(`ratelimiter_serve_decisions_total{code="OVER_LIMIT",domain=%q}`, domain)])
	assert.Equal(t, 4.0, got[`ratelimiter_serve_decision_duration_seconds_count{api="json"}`])
}

// Issue 38: SIGHUP reloads the configuration; a bad file is refused (the
// metrics and the log say so) and the previous configuration keeps
// answering. A limit whose rate changed takes the new rate on the
// limiter's next request, keeping what the window holds; --config-poll
// sees a changed file without a signal.
func TestServeReload(t *testing.T) {
	domain := uniqueName(t)
	path := serveConfig(t, domain, "  - key: k\n    rate_limit:\n      unlimited: true\n")
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", path, "--config-poll", "0")
	c, _ := p.client(t, nil)
	req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("k", "v")}}
	remaining := func() (string, uint32) {
		resp := ask(t, c, req)
		return resp.GetOverallCode().String(), resp.GetStatuses()[0].GetLimitRemaining()
	}
	reloads := func(result string) float64 {
		return scrape(t, p.httpURL+"/metrics")[`ratelimiter_serve_config_reloads_total{result="`+result+`"}`]
	}
	waitReloads := func(result string, n float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for reloads(result) < n {
			require.True(t, time.Now().Before(deadline), "no %s reload: %s", result, p.stderr)
			time.Sleep(20 * time.Millisecond)
		}
	}
	code, rem := remaining()
	require.Equal(t, "OK", code)
	require.Equal(t, uint32(math.MaxUint32), rem)

	writeFile(t, path, "domain: "+domain+"\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n")
	p.signal(t, syscall.SIGHUP)
	waitReloads("failure", 1)
	assert.Contains(t, p.stderr.String(), "configuration refused, keeping the previous one")
	assert.Contains(t, p.stderr.String(), "fortnight")
	assert.Equal(t, 0.0, scrape(t, p.httpURL+"/metrics")["ratelimiter_serve_config_last_reload_successful"])
	code, rem = remaining()
	assert.Equal(t, "OK", code)
	assert.Equal(t, uint32(math.MaxUint32), rem, "the previous configuration answers")

	writeFile(t, path, "domain: "+domain+"\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n")
	p.signal(t, syscall.SIGHUP)
	waitReloads("success", 1)
	code, rem = remaining()
	assert.Equal(t, "OK", code)
	assert.Equal(t, uint32(0), rem)
	code, _ = remaining()
	assert.Equal(t, "OVER_LIMIT", code)

	// 3 an hour: the limiter keeps the permit taken and grants 2 more.
	writeFile(t, path, "domain: "+domain+"\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 3\n")
	p.signal(t, syscall.SIGHUP)
	waitReloads("success", 2)
	for _, want := range []string{"OK", "OK", "OVER_LIMIT"} {
		code, _ = remaining()
		assert.Equal(t, want, code)
	}
	cfg, err := ratelimiter.NewClient(newRedis(t)).Limiter(domain + ":k_v").Config(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(3), cfg.Rate)

	// --config-poll: a change is read without a signal.
	path2 := serveConfig(t, domain+"-poll", "  - key: k\n    rate_limit:\n      unlimited: true\n")
	p2 := startServe(t, "redis://"+redisAddr+"/0", "--config", filepath.Dir(path2), "--config-poll", "50ms")
	c2, _ := p2.client(t, nil)
	writeFile(t, path2, "domain: "+domain+"-poll\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n")
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, p2.httpURL+"/metrics")[`ratelimiter_serve_config_reloads_total{result="success"}`] < 1 {
		require.True(t, time.Now().Before(deadline), "no reload: %s", p2.stderr)
		time.Sleep(20 * time.Millisecond)
	}
	resp := ask(t, c2, &rlspb.RateLimitRequest{Domain: domain + "-poll", Descriptors: []*rlsext.RateLimitDescriptor{desc("k", "v")}})
	assert.Equal(t, uint32(1), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
}

// blackhole listens on loopback and accepts connections that never get
// an answer: a Redis that stalls.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// Issue 38: when Redis does not answer, --failure-mode answers within the
// caller's deadline (gRPC's, as Envoy's filter sends it) or within
// --decision-timeout (JSON): allow gives OK, deny OVER_LIMIT; a
// descriptor with no limit needs no Redis and stays OK; the failures are
// counted and logged.
func TestServeFailureMode(t *testing.T) {
	domain := uniqueName(t)
	config := serveConfig(t, domain, serveDescriptors)
	url := "redis://" + blackhole(t) + "/0"
	for _, mode := range []string{"allow", "deny"} {
		t.Run(mode, func(t *testing.T) {
			p := startServe(t, url, "--config", config, "--failure-mode", mode, "--redis-timeout", "300ms", "--decision-timeout", "400ms")
			c, _ := p.client(t, nil)
			want := map[string]string{"allow": "OK", "deny": "OVER_LIMIT"}[mode]
			req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "x"), desc("nothing", "x")}}
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			start := time.Now()
			resp, err := c.ShouldRateLimit(ctx, req)
			took := time.Since(start)
			require.NoError(t, err, "answered before the deadline, after %v", took)
			assert.Equal(t, []string{want, want, "OK"}, codesOf(resp))
			assert.Less(t, took, 250*time.Millisecond)

			start = time.Now()
			code, body := postJSON(t, &http.Client{Timeout: 10 * time.Second}, p.httpURL,
				fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "bulk", "value": "x"}]}]}`, domain))
			took = time.Since(start)
			assert.Contains(t, body, `"overallCode":"`+want+`"`)
			assert.Equal(t, map[string]int{"allow": 200, "deny": 429}[mode], code)
			assert.Less(t, took, 2*time.Second, "--decision-timeout bounds it")
			assert.GreaterOrEqual(t, took, 350*time.Millisecond, "--decision-timeout, not the default")
			assert.Equal(t, 2.0, scrape(t, p.httpURL+"/metrics")[fmt.Sprintf(`ratelimiter_serve_redis_failures_total{domain=%q}`, domain)])
			assert.Contains(t, p.stderr.String(), fmt.Sprintf("limiter %q", domain+":bulk_x"))
		})
	}
}

// Issue 38: --refuse-unconfigured answers OVER_LIMIT for a descriptor
// that matches no limit (unknown domain included); unlimited is a
// configured limit and stays OK.
// A request's limit override (a route's 50 a minute on a path the file
// sets at 10 a minute) has a limiter of its own, named after the path
// and the override: requests with and without it, alternating, keep
// their own rates and counts, and neither rewrites the other's rate.
func TestServeLimitOverride(t *testing.T) {
	rdb := newRedis(t)
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors))
	c, _ := p.client(t, nil)
	ctx := context.Background()
	lims := ratelimiter.NewClient(rdb)

	plain := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "o")}}
	od := desc("bulk", "o")
	od.Limit = &rlsext.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 50, Unit: typev3.RateLimitUnit_HOUR}
	overridden := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{od}}
	fileName, overrideName := domain+":bulk_o", domain+":bulk_o:override=50/hour"
	fileCfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 10, Interval: time.Minute, KeepAlive: 24 * time.Hour}
	overrideCfg := ratelimiter.Config{Mode: ratelimiter.Overall, Rate: 50, Interval: time.Hour, KeepAlive: 24 * time.Hour}
	for i := range 3 {
		resp := ask(t, c, plain)
		require.Equal(t, []string{"OK", "OK"}, codesOf(resp), "request %d", i)
		assert.Equal(t, uint32(9-i), resp.GetStatuses()[0].GetLimitRemaining(), "the file's limiter counts only its requests")
		assert.Equal(t, uint32(10), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		resp = ask(t, c, overridden)
		require.Equal(t, []string{"OK", "OK"}, codesOf(resp), "request %d", i)
		assert.Equal(t, uint32(49-i), resp.GetStatuses()[0].GetLimitRemaining(), "the override's limiter counts only its requests")
		assert.Equal(t, uint32(50), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, rlspb.RateLimitResponse_RateLimit_HOUR, resp.GetStatuses()[0].GetCurrentLimit().GetUnit())
		for name, want := range map[string]ratelimiter.Config{fileName: fileCfg, overrideName: overrideCfg} {
			got, err := lims.Limiter(name).Config(ctx)
			require.NoError(t, err, name)
			assert.Equal(t, want, got, "%s after round %d: its rate was not rewritten", name, i)
		}
	}
	assert.NotContains(t, p.stderr.String(), "writing the configured rate")
}

func TestServeRefuseUnconfigured(t *testing.T) {
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors), "--refuse-unconfigured")
	c, _ := p.client(t, nil)
	for _, cs := range []struct {
		domain string
		d      *rlsext.RateLimitDescriptor
		want   string
	}{
		{domain, desc("nothing", "x"), "OVER_LIMIT"},
		{domain + "-none", desc("bulk", "x"), "OVER_LIMIT"},
		{domain, desc("ldap", "x"), "OK"},
		{domain, desc("bulk", "x"), "OK"},
	} {
		resp := ask(t, c, &rlspb.RateLimitRequest{Domain: cs.domain, Descriptors: []*rlsext.RateLimitDescriptor{cs.d}})
		assert.Equal(t, []string{cs.want, cs.want}, codesOf(resp), "%s %v", cs.domain, cs.d)
	}
}

// Issue 38: SIGTERM and SIGINT end serve with status 0 within
// --shutdown-timeout; a configuration that does not load, or a missing
// --config, is a usage error before anything is served.
func TestServeShutdownAndUsage(t *testing.T) {
	domain := uniqueName(t)
	config := serveConfig(t, domain, serveDescriptors)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := startServe(t, "redis://"+redisAddr+"/0", "--config", config, "--shutdown-timeout", "2s", "--shutdown-drain", "0")
		c, _ := p.client(t, nil)
		ask(t, c, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "x")}})
		p.signal(t, sig)
		assert.Equal(t, 0, p.wait(t, 10*time.Second), "%v: %s", sig, p.stderr)
	}
	r := failsWith(t, 2, cli(t, "serve"))
	assert.Contains(t, r.stderr, "--config is required")
	r = failsWith(t, 2, cli(t, "serve", "--config", writeBad(t)))
	assert.Contains(t, r.stderr, "rate_limits")
	r = failsWith(t, 2, cli(t, "serve", "--config", config, "--failure-mode", "maybe"))
	assert.Contains(t, r.stderr, "--failure-mode")
	r = failsWith(t, 2, cli(t, "serve", "--config", config, "--shutdown-drain", "-1s"))
	assert.Contains(t, r.stderr, "--shutdown-drain")
	r = failsWith(t, 2, cli(t, "serve", "--config", config, "--tls-cert", "x.pem"))
	assert.Contains(t, r.stderr, "--tls-key")
}

// On SIGTERM, for --shutdown-drain, the health service reads
// NOT_SERVING and /healthcheck 503 while requests are still answered
// over gRPC and /json; then serve closes its listeners and exits 0, not
// before the drain ended. A second signal ends a drain at once.
func TestServeShutdownDrain(t *testing.T) {
	domain := uniqueName(t)
	config := serveConfig(t, domain, serveDescriptors)
	const drainFor = 3 * time.Second
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", config, "--shutdown-drain", drainFor.String(), "--shutdown-timeout", "2s")
	c, conn := p.client(t, nil)
	hc := &http.Client{Timeout: 5 * time.Second}
	req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "drain")}}
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, req)))
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		return h.GetStatus()
	}
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, health())

	sent := time.Now()
	p.signal(t, syscall.SIGTERM)
	deadline := time.Now().Add(drainFor / 2)
	for health() != healthpb.HealthCheckResponse_NOT_SERVING {
		require.True(t, time.Now().Before(deadline), "health still SERVING %v after SIGTERM: %s", time.Since(sent), p.stderr)
		time.Sleep(20 * time.Millisecond)
	}
	// Still answering, on the connection and on new ones.
	resp := ask(t, c, req)
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp))
	assert.Equal(t, uint32(8), resp.GetStatuses()[0].GetLimitRemaining())
	code, body := postJSON(t, hc, p.httpURL, fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "bulk", "value": "drain"}]}]}`, domain))
	assert.Equal(t, http.StatusOK, code, body)
	hr, body := get(t, hc, p.httpURL+"/healthcheck", nil)
	assert.Equal(t, http.StatusServiceUnavailable, hr.StatusCode, body)
	require.Less(t, time.Since(sent), drainFor, "the checks above ran within the drain")

	assert.Equal(t, 0, p.wait(t, drainFor+10*time.Second), p.stderr.String())
	assert.GreaterOrEqual(t, time.Since(sent), drainFor, "exited before the drain ended")
	assert.Contains(t, p.stderr.String(), "--shutdown-drain")

	// A second signal ends a long drain.
	p = startServe(t, "redis://"+redisAddr+"/0", "--config", config, "--shutdown-drain", "10m")
	_, conn = p.client(t, nil)
	p.signal(t, syscall.SIGTERM)
	deadline = time.Now().Add(5 * time.Second)
	for health() != healthpb.HealthCheckResponse_NOT_SERVING {
		require.True(t, time.Now().Before(deadline), "health still SERVING after SIGTERM: %s", p.stderr)
		time.Sleep(20 * time.Millisecond)
	}
	p.signal(t, syscall.SIGINT)
	assert.Equal(t, 0, p.wait(t, 10*time.Second), p.stderr.String())
}

func writeBad(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, p, "domain: d\ndescriptors:\n  - key: k\n    rate_limits: {unit: second, requests_per_unit: 1}\n")
	return p
}

// Issue 38: with --tls-cert and --tls-key both listeners speak TLS: the
// generated gRPC client over TLS and an HTTPS /json, each trusting the
// test CA; a plaintext gRPC client gets no answer.
func TestServeTLS(t *testing.T) {
	domain := uniqueName(t)
	caFile, certFile, keyFile := writeCerts(t, t.TempDir())
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors), "--tls-cert", certFile, "--tls-key", keyFile)
	require.True(t, strings.HasPrefix(p.httpURL, "https://"), p.httpURL)
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	tlsConf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c, _ := p.client(t, credentials.NewTLS(tlsConf))
	req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "tls")}}
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, req)))

	plain, _ := p.client(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = plain.ShouldRateLimit(ctx, req)
	assert.Error(t, err, "plaintext to a TLS listener")

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	code, body := postJSON(t, hc, p.httpURL, fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "bulk", "value": "tls"}]}]}`, domain))
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"limitRemaining":8`)
}

// Issue 38: --tls-client-ca requires a client certificate signed by that
// CA on both listeners: with one, the gRPC call and the HTTPS /json are
// answered; without one, or with one another CA signed, the handshake
// fails and nothing is answered.
func TestServeMutualTLS(t *testing.T) {
	domain := uniqueName(t)
	caFile, certFile, keyFile := writeCerts(t, t.TempDir())
	clientCA, clientCert, clientKey := writeCertsFor(t, t.TempDir(), x509.ExtKeyUsageClientAuth)
	_, strangerCert, strangerKey := writeCertsFor(t, t.TempDir(), x509.ExtKeyUsageClientAuth)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors),
		"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", clientCA)
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	conf := func(cert, key string) *tls.Config {
		c := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			require.NoError(t, err)
			c.Certificates = []tls.Certificate{pair}
		}
		return c
	}
	req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "mtls")}}
	body := fmt.Sprintf(`{"domain": %q, "descriptors": [{"entries": [{"key": "bulk", "value": "mtls"}]}]}`, domain)

	c, _ := p.client(t, credentials.NewTLS(conf(clientCert, clientKey)))
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, req)))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf(clientCert, clientKey)}}
	code, out := postJSON(t, hc, p.httpURL, body)
	assert.Equal(t, http.StatusOK, code, out)
	assert.Contains(t, out, `"limitRemaining":8`, "the gRPC call took one, this one another")

	for name, tc := range map[string]*tls.Config{"no client certificate": conf("", ""), "another CA's": conf(strangerCert, strangerKey)} {
		c, _ := p.client(t, credentials.NewTLS(tc))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := c.ShouldRateLimit(ctx, req)
		cancel()
		assert.Error(t, err, "gRPC with %s", name)
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := hc.Post(p.httpURL+"/json", "application/json", strings.NewReader(body))
		if err == nil {
			_ = resp.Body.Close()
		}
		assert.Error(t, err, "/json with %s", name)
	}
	// Nothing the refused clients sent was counted.
	code, out = postJSON(t, hc, p.httpURL, body)
	assert.Equal(t, http.StatusOK, code, out)
	assert.Contains(t, out, `"limitRemaining":7`)
}

// Issue 38: a Java service draws on the same limit. Real Redisson
// (internal/compat's peer) opens the limiter under the documented name
// (getRateLimiter(name)): it reads what the service took, takes permits
// itself, and the service then refuses.
func TestServeSharesLimitWithJavaRedisson(t *testing.T) {
	peer := javaPeer(t, "4.7.0")
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors))
	c, _ := p.client(t, nil)
	ctx := context.Background()
	do := func(args ...any) string {
		t.Helper()
		out, err := peer.Do(ctx, args...)
		require.NoError(t, err, "%v", args)
		return out
	}
	req := &rlspb.RateLimitRequest{Domain: domain, HitsAddend: 3, Descriptors: []*rlsext.RateLimitDescriptor{desc("bulk", "user_7:eu")}}
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, req)))
	name := domain + ":bulk_user%5F7%3Aeu"
	assert.Equal(t, "OVERALL 10 60000", do("getConfig", name))
	assert.Equal(t, "7", do("availablePermits", name))
	assert.Equal(t, "true", do("tryAcquire", name, 5))
	resp := ask(t, c, req)
	assert.Equal(t, []string{"OVER_LIMIT", "OVER_LIMIT"}, codesOf(resp))
	assert.Equal(t, uint32(2), resp.GetStatuses()[0].GetLimitRemaining())
	req.HitsAddend = 2
	assert.Equal(t, []string{"OK", "OK"}, codesOf(ask(t, c, req)))
	assert.Equal(t, "false", do("tryAcquire", name, 1))
	assert.Equal(t, 1, strings.Count(p.stderr.String(), "\n"), "one line, the configuration's, and no error: %s", p.stderr)
}

// Issue 38: replaces and quota_mode as Envoy's service reads them. A
// limit that another matched limit of the request replaces is neither
// checked nor charged; quota-mode descriptors fail the request only when
// all of them are over.
func TestServeReplacesAndQuotaMode(t *testing.T) {
	domain := uniqueName(t)
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, `
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        rate_limit:
          name: specific_limit
          unit: hour
          requests_per_unit: 1
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        rate_limit:
          replaces:
            - name: specific_limit
          unit: hour
          requests_per_unit: 2
  - key: quota_a
    quota_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: quota_b
    quota_mode: true
    rate_limit:
      unit: hour
      requests_per_unit: 2
`))
	c, _ := p.client(t, nil)
	ctx := context.Background()
	lims := ratelimiter.NewClient(newRedis(t))
	specific := desc("key_1", "value_1", "user", "u")
	replacing := desc("key_2", "value_2", "user", "u")
	req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{specific, replacing}}
	for i, want := range [][]string{{"OK", "OK", "OK"}, {"OK", "OK", "OK"}, {"OVER_LIMIT", "OK", "OVER_LIMIT"}} {
		assert.Equal(t, want, codesOf(ask(t, c, req)), "request %d", i)
	}
	exists, err := lims.Limiter(domain + ":key_1_value_1:user_u").Exists(ctx)
	require.NoError(t, err)
	assert.False(t, exists, "the replaced limit was not charged")
	resp := ask(t, c, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{specific}})
	assert.Equal(t, []string{"OK", "OK"}, codesOf(resp), "alone, it has its own limit")
	assert.Equal(t, uint32(1), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())

	quota := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlsext.RateLimitDescriptor{desc("quota_a", "q"), desc("quota_b", "q")}}
	for i, want := range [][]string{{"OK", "OK", "OK"}, {"OK", "OVER_LIMIT", "OK"}, {"OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT"}} {
		assert.Equal(t, want, codesOf(ask(t, c, quota)), "request %d", i)
	}
}

// Issue 38: SIGHUP re-reads the TLS pair: a client that trusts only the
// new certificate's CA connects once the files are swapped.
func TestServeTLSReload(t *testing.T) {
	domain := uniqueName(t)
	dir := t.TempDir()
	_, certFile, keyFile := writeCerts(t, dir)
	ca2, cert2, key2 := writeCerts(t, t.TempDir())
	p := startServe(t, "redis://"+redisAddr+"/0", "--config", serveConfig(t, domain, serveDescriptors), "--tls-cert", certFile, "--tls-key", keyFile)
	pem, err := os.ReadFile(ca2)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}}
	_, err = hc.Get(p.httpURL + "/healthcheck")
	require.Error(t, err, "the old certificate is not signed by the new CA")
	for _, f := range [][2]string{{cert2, certFile}, {key2, keyFile}} {
		b, err := os.ReadFile(f[0])
		require.NoError(t, err)
		writeFile(t, f[1], string(b))
	}
	p.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get(p.httpURL + "/healthcheck")
		if err == nil {
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			break
		}
		require.True(t, time.Now().Before(deadline), "the new certificate is not served: %v; %s", err, p.stderr)
		time.Sleep(20 * time.Millisecond)
	}
}
