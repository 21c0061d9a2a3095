package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// An ACL user with a password and a database number from the URL; a wrong
// password, a dead port and a malformed URL exit 2 with one line that
// never shows the password.
func TestURLUserPasswordDB(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	const pw = "s3cret-Pw_42"
	require.NoError(t, rdb.Do(ctx, "ACL", "SETUSER", "cli-alice", "reset", "on", ">"+pw, "~*", "&*", "+@all").Err())
	t.Cleanup(func() { rdb.Do(context.Background(), "ACL", "DELUSER", "cli-alice") })
	name := uniqueName(t)
	url := fmt.Sprintf("redis://cli-alice:%s@%s/3", pw, redisAddr)

	// --url wins over REDIS_URL (which points at a dead port here).
	dead := fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))
	ok(t, cliEnv(t, []string{"REDIS_URL=" + dead}, "set-rate", name, "--rate", "4", "--interval", "1s", "--url", url))
	db3 := redis.NewClient(&redis.Options{Addr: redisAddr, DB: 3})
	defer db3.Close()
	assert.Equal(t, "4", db3.HGet(ctx, name, "rate").Val(), "written to database 3")
	assert.Zero(t, rdb.Exists(ctx, name).Val(), "not to database 0")
	// REDIS_URL alone works too.
	r := ok(t, cliEnv(t, []string{"REDIS_URL=" + url}, "config", name, "-o", "json"))
	assert.Contains(t, r.stdout, `"rate":4`)

	for _, bad := range []struct{ url, want string }{
		{fmt.Sprintf("redis://cli-alice:wrong-%s@%s/3", pw, redisAddr), "WRONGPASS"},
		{fmt.Sprintf("redis://cli-alice:%s@127.0.0.1:%d/0", pw, freePort(t)), "cannot reach Redis"},
		{fmt.Sprintf("redis://cli-alice:%s@%s:notaport/0", pw, "127.0.0.1"), "bad Redis URL"},
		{fmt.Sprintf("redis://cli-alice:%s@%s/notadb", pw, redisAddr), "bad Redis URL"},
	} {
		r := failsWith(t, 2, cli(t, "--url", bad.url, "config", name))
		assert.Contains(t, r.stderr, bad.want)
		assert.NotContains(t, r.stderr, pw, "password leaked")
		assert.NotContains(t, r.stdout, pw)
	}
	// Help never shows REDIS_URL's password as a default.
	r = ok(t, cliEnv(t, []string{"REDIS_URL=" + url}, "config", "-h"))
	assert.NotContains(t, r.stdout, pw)
}

// rediss:// connects over TLS and verifies the server's certificate (here
// against a CA given through SSL_CERT_FILE).
func TestTLS(t *testing.T) {
	redistest.Need(t)
	// StartTLS starts a server of its own even when REDIS_ADDR is set.
	dir := t.TempDir()
	ca, cert, key := writeCerts(t, dir)
	tlsPort := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, note, err := redistest.StartTLS(ctx, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	if err != nil {
		t.Fatalf("redis-server with TLS: %v", err)
	}
	if note != "" {
		t.Log(note)
	}
	defer srv.Close()
	name := uniqueName(t)
	url := fmt.Sprintf("rediss://127.0.0.1:%d/0", tlsPort)
	env := []string{"SSL_CERT_FILE=" + ca, "REDIS_URL=" + url}
	ok(t, cliEnv(t, env, "set-rate", name, "--rate", "2", "--interval", "1s"))
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer plain.Close()
	assert.Equal(t, "2", plain.HGet(ctx, name, "rate").Val())

	// Without the CA the certificate is refused; plain redis:// on the TLS
	// port fails too.
	r := failsWith(t, 2, cliEnv(t, []string{"SSL_CERT_FILE=/dev/null", "REDIS_URL=" + url}, "config", name))
	assert.Contains(t, r.stderr, "certificate")
	failsWith(t, 2, cliEnv(t, []string{fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", tlsPort)}, "config", name, "--redis-timeout", "1s"))

	// Issue 39, item 9: skip_verify=true in the URL would turn the
	// certificate's checks off in silence: it is refused, before anything
	// is sent, unless --insecure-skip-verify says so (which works alone
	// too, and only for TLS).
	noCA := []string{"SSL_CERT_FILE=/dev/null", "REDIS_URL=" + url + "?skip_verify=true"}
	r = failsWith(t, 2, cliEnv(t, noCA, "config", name))
	assert.Contains(t, r.stderr, "skip_verify")
	assert.Contains(t, r.stderr, "--insecure-skip-verify")
	r = failsWith(t, 2, cliEnv(t, noCA, "exporter"))
	assert.Contains(t, r.stderr, "skip_verify")
	assert.Contains(t, ok(t, cliEnv(t, noCA, "config", name, "--insecure-skip-verify")).stdout, "rate")
	ok(t, cliEnv(t, []string{"SSL_CERT_FILE=/dev/null", "REDIS_URL=" + url}, "--insecure-skip-verify", "config", name))
	r = failsWith(t, 2, cliEnv(t, []string{fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", tlsPort)}, "config", name, "--insecure-skip-verify"))
	assert.Contains(t, r.stderr, "rediss://")
}

func freePort(t testing.TB) int {
	t.Helper()
	p, err := redistest.FreePort()
	require.NoError(t, err)
	return p
}

// writeCerts makes a CA and a server certificate for 127.0.0.1.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	return writeCertsFor(t, dir, x509.ExtKeyUsageServerAuth)
}

// writeCertsFor makes a CA and a certificate for 127.0.0.1 signed by it,
// for usage (a server's or a client's).
func writeCertsFor(t *testing.T, dir string, usage x509.ExtKeyUsage) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// --ca trusts a private CA's PEM file for rediss://, in place of the
// system's roots; a CA that did not sign the server's certificate is
// refused, and --ca is refused with a file that holds no certificate or
// with a plain redis:// URL.
func TestTLSPrivateCA(t *testing.T) {
	redistest.Need(t)
	// StartTLS starts a server of its own even when REDIS_ADDR is set.
	dir := t.TempDir()
	ca, cert, key := writeCerts(t, dir)
	otherCA, _, _ := writeCerts(t, t.TempDir())
	tlsPort := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, note, err := redistest.StartTLS(ctx, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert,
		"--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no")
	require.NoError(t, err)
	if note != "" {
		t.Log(note)
	}
	defer srv.Close()
	name := uniqueName(t)
	env := []string{"SSL_CERT_FILE=/dev/null", fmt.Sprintf("REDIS_URL=rediss://127.0.0.1:%d/0", tlsPort)}

	ok(t, cliEnv(t, env, "set-rate", name, "--rate", "3", "--interval", "1s", "--ca", ca))
	r := ok(t, cliEnv(t, env, "--ca", ca, "config", name, "-o", "json"))
	assert.Contains(t, r.stdout, `"rate":3`)

	r = failsWith(t, 2, cliEnv(t, env, "config", name, "--ca", otherCA))
	assert.Contains(t, r.stderr, "certificate")
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	for _, args := range [][]string{
		{"config", name, "--ca", notPEM},
		{"config", name, "--ca", filepath.Join(dir, "missing.pem")},
		{"config", name, "--ca", ca, "--url", "redis://" + srv.Addr() + "/0"},
	} {
		r = failsWith(t, 2, cliEnv(t, env, args...))
		assert.Contains(t, r.stderr, "--ca", "%v", args)
	}
}
