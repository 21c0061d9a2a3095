package main_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// get fetches url with the given request headers through c and returns
// the response with its body read (raw: c must not decompress).
func get(t *testing.T, c *http.Client, url string, header http.Header, basicAuth ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if len(basicAuth) == 2 {
		req.SetBasicAuth(basicAuth[0], basicAuth[1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// rawClient neither decompresses nor asks for compression on its own, so
// that the test sees what the exporter sends.
func rawClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true, TLSClientConfig: tlsConfig}}
}

// newLimiter configures a limiter named name and takes permits from it.
func newLimiter(t *testing.T, name string, cfg ratelimiter.Config, take int64) {
	t.Helper()
	l := ratelimiter.NewClient(newRedis(t)).Limiter(name)
	_, err := l.TrySetRate(context.Background(), cfg)
	require.NoError(t, err)
	if take > 0 {
		granted, err := l.TryAcquire(context.Background(), take)
		require.NoError(t, err)
		require.True(t, granted)
	}
}

// exporter -h lists the exporter's flags and the connection flags, and
// none that only writing or printing commands take.
func TestExporterHelpListsItsFlags(t *testing.T) {
	r := ok(t, cliOffline(t, "exporter", "-h"))
	var got []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if rest, found := strings.CutPrefix(line, "  --"); found {
			got = append(got, strings.Fields(rest)[0])
		}
	}
	sort.Strings(got)
	require.Equal(t, []string{
		"ca", "cluster", "collect-timeout", "idle", "insecure-skip-verify", "match", "max-clients", "max-limiters",
		"max-records", "max-scans", "redis-timeout", "scan-count", "sentinel", "url",
		"web.config.file", "web.listen-address", "web.telemetry-path",
	}, got, r.stdout)
}

// The default address is loopback on port 19379, which no exporter of
// Prometheus's default port allocations holds (9464, the default before,
// is OpenTelemetry's Prometheus exporter's); the usage line and the
// flag's help say it.
func TestExporterDefaultPort(t *testing.T) {
	r := ok(t, cliOffline(t, "exporter", "-h"))
	require.Contains(t, r.stdout, "usage: ratelimiter exporter [--web.listen-address 127.0.0.1:19379 ...]")
	require.Contains(t, strings.Join(strings.Fields(r.stdout), " "), "(default 127.0.0.1:19379, loopback;") // help wraps lines
	require.NotContains(t, r.stdout, "9464")
}

// --web.telemetry-path moves the metrics: they are served there (the
// line on stdout and the landing page say so), and /metrics is not
// found; the health endpoints stay where they are. A path that is not
// absolute, or is /, /-/healthy or /-/ready, is a usage error.
func TestExporterTelemetryPath(t *testing.T) {
	name := uniqueName(t)
	newLimiter(t, name, ratelimiter.Config{Rate: 6, Interval: time.Hour}, 0)
	metrics := startExporter(t, "--match", name, "--web.telemetry-path", "/probe/metrics")
	base, found := strings.CutSuffix(metrics, "/probe/metrics")
	require.True(t, found, metrics)
	got := scrape(t, metrics)
	require.Equal(t, 6.0, got[`ratelimiter_rate{limiter=`+strconv.Quote(name)+`}`])
	c := rawClient(nil)
	resp, _ := get(t, c, base+"/metrics", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body := get(t, c, base+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `href="/probe/metrics"`)
	resp, _ = get(t, c, base+"/-/healthy", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, path := range []string{"metrics", "/", "/-/healthy", "/-/ready"} {
		r := failsWith(t, 2, cliOffline(t, "exporter", "--web.telemetry-path", path))
		require.Contains(t, r.stderr, "--web.telemetry-path", path)
	}
}

// The metrics come as OpenMetrics when the scraper asks for it (as
// Prometheus does), as text 0.0.4 otherwise, and gzipped when the
// scraper accepts gzip.
func TestExporterOpenMetricsAndGzip(t *testing.T) {
	name := uniqueName(t)
	newLimiter(t, name, ratelimiter.Config{Rate: 10, Interval: time.Hour}, 0)
	url := startExporter(t, "--match", name)
	c := rawClient(nil)
	series := `ratelimiter_rate{limiter=` + strconv.Quote(name) + `} 10` + "\n"

	resp, body := get(t, c, url, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4"), resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Content-Encoding"))
	require.Contains(t, body, series)
	require.NotContains(t, body, "# EOF")

	// Prometheus 2.42's Accept header.
	om := http.Header{"Accept": {"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"}}
	resp, body = get(t, c, url, om)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/openmetrics-text"), resp.Header.Get("Content-Type"))
	require.True(t, strings.HasSuffix(body, "# EOF\n"), "OpenMetrics ends with # EOF")
	require.Contains(t, body, strings.Replace(series, "} 10", "} 10.0", 1), "OpenMetrics writes floats with a point")
	// OpenMetrics names a counter's family without _total, its sample with.
	require.Contains(t, body, "# TYPE ratelimiter_exporter_collect_errors counter\n")
	require.Contains(t, body, "ratelimiter_exporter_collect_errors_total 0.0\n")

	resp, body = get(t, c, url, http.Header{"Accept-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	require.NotContains(t, body, series, "the body is compressed")
	zr, err := gzip.NewReader(strings.NewReader(body))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(plain), series)
}

// The health endpoints and the landing page; /-/ready follows Redis, and
// a scrape while Redis is down says so with ratelimiter_exporter_up 0 and
// no limiter series.
func TestExporterEndpoints(t *testing.T) {
	srv := startOwnServer(t)
	name := uniqueName(t)
	l := ratelimiter.NewClient(newRedisAt(t, srv.Addr())).Limiter(name)
	_, err := l.TrySetRate(context.Background(), ratelimiter.Config{Rate: 3, Interval: time.Hour})
	require.NoError(t, err)
	metrics := startExporterAt(t, srv.Addr())
	base := strings.TrimSuffix(metrics, "/metrics")
	c := rawClient(nil)

	resp, body := get(t, c, base+"/-/healthy", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = get(t, c, base+"/-/ready", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = get(t, c, base+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, `href="/metrics"`)
	require.Contains(t, body, `href="/-/ready"`)
	resp, _ = get(t, c, base+"/nope", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	got := scrape(t, metrics)
	require.Equal(t, 3.0, got[`ratelimiter_rate{limiter=`+strconv.Quote(name)+`}`])
	require.Equal(t, 1.0, got["ratelimiter_exporter_up"])

	require.NoError(t, srv.Close())
	resp, body = get(t, c, base+"/-/ready", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	require.Contains(t, body, "Not ready")
	resp, body = get(t, c, base+"/-/healthy", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	got = scrape(t, metrics)
	require.Equal(t, 0.0, got["ratelimiter_exporter_up"])
	require.GreaterOrEqual(t, got["ratelimiter_exporter_collect_errors_total"], 1.0)
	for series := range got {
		require.False(t, strings.HasPrefix(series, "ratelimiter_rate"), "no limiter series from a failed reading: %s", series)
	}
}

// webAuth is a web configuration file for exporter-toolkit: TLS with a
// self-signed certificate for 127.0.0.1, and one basic auth user.
type webAuth struct {
	config, certFile string
	user, password   string
	roots            *x509.CertPool // trusts the certificate
}

// writeWebConfig generates the certificate and the user's bcrypt hash and
// writes the files into a temporary directory.
func writeWebConfig(t *testing.T) webAuth {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "ratelimiter exporter test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	w := webAuth{certFile: filepath.Join(dir, "cert.pem"), config: filepath.Join(dir, "web.yml"), user: "scraper", roots: x509.NewCertPool()}
	w.roots.AddCert(cert)
	require.NoError(t, os.WriteFile(w.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	keyFile := filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	secret := make([]byte, 16)
	_, err = rand.Read(secret)
	require.NoError(t, err)
	w.password = hex.EncodeToString(secret)
	hash, err := bcrypt.GenerateFromPassword([]byte(w.password), bcrypt.MinCost)
	require.NoError(t, err)
	config := "tls_server_config:\n  cert_file: " + w.certFile + "\n  key_file: " + keyFile + "\n" +
		"basic_auth_users:\n  " + w.user + ": " + string(hash) + "\n"
	require.NoError(t, os.WriteFile(w.config, []byte(config), 0o600))
	return w
}

// --web.config.file: TLS with a certificate the client trusts, and basic
// auth: 401 without credentials or with a wrong password, 200 with them.
// A client that does not trust the certificate cannot connect.
func TestExporterTLSAndBasicAuth(t *testing.T) {
	name := uniqueName(t)
	newLimiter(t, name, ratelimiter.Config{Rate: 4, Interval: time.Hour}, 1)
	w := writeWebConfig(t)
	url := startExporter(t, "--match", name, "--web.config.file", w.config)
	require.True(t, strings.HasPrefix(url, "https://127.0.0.1:"), url)
	c := rawClient(&tls.Config{RootCAs: w.roots, MinVersion: tls.VersionTLS12})

	resp, _ := get(t, c, url, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
	resp, _ = get(t, c, url, nil, w.user, w.password+"x")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = get(t, c, strings.TrimSuffix(url, "/metrics")+"/-/healthy", nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "every path is behind basic auth")

	resp, body := get(t, c, url, nil, w.user, w.password)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotNil(t, resp.TLS)
	require.Contains(t, body, `ratelimiter_available_permits{limiter=`+strconv.Quote(name)+`} 3`+"\n")

	_, err := rawClient(&tls.Config{MinVersion: tls.VersionTLS12}).Get(url)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown, "a client without the certificate refuses the server")
	resp, _ = get(t, rawClient(nil), "http://"+strings.TrimPrefix(url, "https://"), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port")
}

// A web configuration file the toolkit refuses is a usage error, before
// any connection to Redis.
func TestExporterBadWebConfig(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{
		"tls_server_config:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n",
		"basic_auth_users:\n  scraper: not-a-bcrypt-hash\n",
		"no_such_key: 1\n",
	} {
		f := filepath.Join(dir, "web.yml")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		r := failsWith(t, 2, cliEnv(t, []string{"REDIS_URL=redis://127.0.0.1:1/0"}, "exporter", "--web.config.file", f))
		require.Contains(t, r.stderr, "--web.config.file", content)
	}
}

// Every --web.listen-address is served; one already in use is exit 2.
func TestExporterListenAddresses(t *testing.T) {
	redistest.Need(t)
	cmd := exec.Command(bin, "exporter", "--url", "redis://"+redisAddr+"/0", "--match", uniqueName(t),
		"--web.listen-address", "127.0.0.1:0", "--web.listen-address", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	seen := map[string]bool{}
	for range 2 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		url, found := strings.CutPrefix(strings.TrimSpace(line), "serving ")
		require.True(t, found, "line %q", line)
		seen[url] = true
		require.Equal(t, 1.0, scrape(t, url)["ratelimiter_exporter_up"], url)
	}
	require.Len(t, seen, 2, "two addresses")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	res := failsWith(t, 2, cli(t, "exporter", "--web.listen-address", busy.Addr().String()))
	require.Contains(t, res.stderr, "address already in use")
}
