package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// globals are the flags every admin subcommand takes, before or after the
// subcommand's name.
type globals struct {
	url      string
	cluster  string
	sentinel string
	clientID string
	prefix   string
	format   string
	output   string
	timeout  time.Duration
	ca       string         // --ca: PEM file of the CAs to trust for TLS
	insecure bool           // --insecure-skip-verify: no check of the server's certificate
	roots    *x509.CertPool // its certificates, loaded by check
}

// register defines the global flags on fs. Defaults never show REDIS_URL:
// it may hold a password and -h prints defaults.
func (g *globals) register(fs *flag.FlagSet) {
	g.registerConn(fs)
	g.registerClient(fs)
	fs.StringVar(&g.output, "o", "table", "output: table or json")
	fs.StringVar(&g.output, "output", "table", "same as --o")
}

// registerClient defines the flags that configure the library's Client:
// help lists them under "Client flags".
func (g *globals) registerClient(fs *flag.FlagSet) {
	fs.StringVar(&g.clientID, "client-id", "", "client id naming this client's PER_CLIENT keys (default: a new random UUID)")
	fs.StringVar(&g.prefix, "name-prefix", "", "prefix put before every limiter name, like a Redisson NameMapper that adds one")
	fs.StringVar(&g.format, "format", "current", "permit record format to write: bc0i or current (Redisson >= 3.17), lc0i (3.16.4-3.16.8), fi (<= 3.16.3)")
}

// registerConn defines only the flags that say how to reach Redis (help
// lists them under "Connection flags"), alone for commands that write no
// records and print no table (the exporter). The others keep their
// defaults, which check accepts.
func (g *globals) registerConn(fs *flag.FlagSet) {
	g.format, g.output = "current", "table"
	fs.StringVar(&g.url, "url", "", "Redis URL: redis://[user:password@]host:port[/db] or rediss:// for TLS (default $REDIS_URL, else redis://localhost:6379/0); with --cluster or --sentinel only its user, password, db and TLS are used")
	fs.StringVar(&g.cluster, "cluster", "", "Redis Cluster seed addresses, comma-separated host:port")
	fs.StringVar(&g.sentinel, "sentinel", "", "Sentinel: master name, then sentinel addresses, comma-separated: mymaster,host:26379,...")
	fs.DurationVar(&g.timeout, "redis-timeout", 5*time.Second, "dial, read and write timeout for Redis")
	fs.StringVar(&g.ca, "ca", "", "PEM file of the CA certificates to trust for rediss:// (a private CA), instead of the system's")
	fs.BoolVar(&g.insecure, "insecure-skip-verify", false, "with rediss://, do not check the server's certificate or name (anyone on the path can then read and change the traffic); the URL's skip_verify=true is refused without it")
}

// check validates the global flags without connecting.
func (g *globals) check() error {
	if g.output != "table" && g.output != "json" {
		return usagef("--output must be table or json, not %q", g.output)
	}
	if _, err := parseFormat(g.format); err != nil {
		return err
	}
	if g.cluster != "" && g.sentinel != "" {
		return usagef("--cluster and --sentinel exclude each other")
	}
	if g.timeout <= 0 {
		return usagef("--redis-timeout must be positive")
	}
	if g.sentinel != "" {
		parts := splitList(g.sentinel)
		if len(parts) < 2 {
			return usagef("--sentinel wants the master name and at least one address: mymaster,host:26379")
		}
	}
	if g.cluster != "" && len(splitList(g.cluster)) == 0 {
		return usagef("--cluster wants at least one host:port")
	}
	return g.loadCA()
}

// loadCA reads the --ca file into g.roots.
func (g *globals) loadCA() error {
	if g.ca == "" {
		return nil
	}
	pem, err := os.ReadFile(g.ca)
	if err != nil {
		return usagef("--ca: %v", err)
	}
	g.roots = x509.NewCertPool()
	if !g.roots.AppendCertsFromPEM(pem) {
		return usagef("--ca %s holds no PEM certificate", g.ca)
	}
	return nil
}

func parseFormat(s string) (wire.Format, error) {
	switch strings.ToLower(s) {
	case "current", "bc0i":
		return wire.Bc0I, nil
	case "lc0i":
		return wire.Lc0I, nil
	case "fi":
		return wire.FI, nil
	}
	return 0, usagef("--format must be current, lc0i or fi, not %q", s)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// effectiveURL is --url, else $REDIS_URL, else the local default.
func (g *globals) effectiveURL() string {
	switch {
	case g.url != "":
		return g.url
	case os.Getenv("REDIS_URL") != "":
		return os.Getenv("REDIS_URL")
	case g.cluster != "" || g.sentinel != "":
		return ""
	}
	return "redis://localhost:6379/0"
}

// connect makes the Redis client the flags describe and checks that Redis
// answers. Errors are connection errors, with any password redacted.
func (g *globals) connect(ctx context.Context) (redis.UniversalClient, error) {
	rdb, err := g.newClient()
	if err != nil {
		return nil, err
	}
	if err := g.ping(ctx, rdb); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return rdb, nil
}

// ping checks that Redis answers PING within --redis-timeout and a
// second; its error is a connection error, with any password redacted.
func (g *globals) ping(ctx context.Context, rdb redis.UniversalClient) error {
	raw := g.effectiveURL()
	pctx, cancel := context.WithTimeout(ctx, g.timeout+time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return connErr{fmt.Sprintf("cannot reach Redis at %s: %s", g.where(raw), redact(err.Error(), raw))}
	}
	return nil
}

// newClient makes the Redis client the flags describe, without sending
// anything. Its commands return by their context's deadline
// (ContextTimeoutEnabled). It fails on a bad URL or flag (usageError).
func (g *globals) newClient() (redis.UniversalClient, error) {
	raw := g.effectiveURL()
	var base *redis.Options
	if raw != "" {
		o, err := parseURL(raw)
		if err != nil {
			return nil, err
		}
		base = o
	} else {
		base = &redis.Options{}
	}
	if g.roots != nil {
		if base.TLSConfig == nil {
			return nil, usagef("--ca is for TLS: use a rediss:// URL")
		}
		base.TLSConfig.RootCAs = g.roots
	}
	// go-redis reads skip_verify=true in the URL as InsecureSkipVerify:
	// certificate checks off, with nothing said. It takes the flag too.
	switch {
	case base.TLSConfig != nil && base.TLSConfig.InsecureSkipVerify && !g.insecure:
		return nil, usagef("the Redis URL's skip_verify turns off the checks of the server's certificate: remove it, or also pass --insecure-skip-verify to mean it")
	case g.insecure && base.TLSConfig == nil:
		return nil, usagef("--insecure-skip-verify is for TLS: use a rediss:// URL")
	case g.insecure && g.roots != nil:
		return nil, usagef("--insecure-skip-verify and --ca exclude each other: --ca checks the certificate against that CA")
	case g.insecure:
		base.TLSConfig.InsecureSkipVerify = true
	}
	var rdb redis.UniversalClient
	switch {
	case g.cluster != "":
		if base.DB != 0 {
			return nil, usagef("Redis Cluster has only database 0")
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: splitList(g.cluster), Username: base.Username, Password: base.Password,
			TLSConfig: base.TLSConfig, DialTimeout: g.timeout, ReadTimeout: g.timeout, WriteTimeout: g.timeout,
			MaxRedirects: 8, ContextTimeoutEnabled: true,
		})
	case g.sentinel != "":
		parts := splitList(g.sentinel)
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: parts[0], SentinelAddrs: parts[1:],
			Username: base.Username, Password: base.Password, DB: base.DB, TLSConfig: base.TLSConfig,
			DialTimeout: g.timeout, ReadTimeout: g.timeout, WriteTimeout: g.timeout, ContextTimeoutEnabled: true,
		})
	default:
		base.DialTimeout, base.ReadTimeout, base.WriteTimeout = g.timeout, g.timeout, g.timeout
		base.DialerRetries, base.DialerRetryTimeout = 2, 50*time.Millisecond
		base.ContextTimeoutEnabled = true
		if base.TLSConfig != nil && base.TLSConfig.MinVersion == 0 {
			base.TLSConfig.MinVersion = tls.VersionTLS12
		}
		rdb = redis.NewClient(base)
	}
	return rdb, nil
}

// where names the server for messages, without a password.
func (g *globals) where(raw string) string {
	switch {
	case g.cluster != "":
		return "cluster " + g.cluster
	case g.sentinel != "":
		return "sentinel " + g.sentinel
	}
	return redactURL(raw)
}
