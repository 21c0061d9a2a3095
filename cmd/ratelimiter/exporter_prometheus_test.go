package main_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v2"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// The files under deploy/ that these tests check, from this package's
// directory.
var (
	rulesFile     = filepath.Join("..", "..", "deploy", "prometheus", "ratelimiter-rules.yml")
	rulesTestFile = filepath.Join("..", "..", "deploy", "prometheus", "ratelimiter-rules.test.yml")
	dashboardFile = filepath.Join("..", "..", "deploy", "grafana", "ratelimiter-dashboard.json")
)

// needTool returns the path of a program the test cannot do without; it
// fails (never skips) when it is missing.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (it installs Debian's prometheus package, with promtool)", name)
	}
	return p
}

// runTool runs a program with a deadline and returns its combined output
// and exit error.
func runTool(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, needTool(t, name), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The alert rules pass `promtool check rules` and their unit tests
// (`promtool test rules`), in which every alert both fires and stays
// silent.
func TestAlertRules(t *testing.T) {
	out, err := runTool(t, ".", "promtool", "check", "rules", rulesFile)
	require.NoError(t, err, out)
	alerts := alertNames(t)
	require.Contains(t, out, fmt.Sprintf("SUCCESS: %d rules found", len(alerts)))

	out, err = runTool(t, filepath.Dir(rulesTestFile), "promtool", "test", "rules", filepath.Base(rulesTestFile))
	require.NoError(t, err, out)
	require.Contains(t, out, "SUCCESS")

	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	b, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &tests))
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		require.True(t, fires[a], "no test case in which %s fires", a)
		require.True(t, silent[a], "no test case in which %s stays silent", a)
	}
}

// alertNames returns the alerts of the rules file.
func alertNames(t *testing.T) []string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &rules))
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "only alerting rules")
			names = append(names, r.Alert)
		}
	}
	require.NotEmpty(t, names)
	return names
}

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// loadDashboard parses the dashboard and checks its shape: the variables,
// and the panels of each topic, each with at least one PromQL target.
func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.Title)
	require.NotEmpty(t, d.UID)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name+":"+v.Type)
	}
	require.Equal(t, []string{"datasource:datasource", "job:query", "limiter:query"}, vars)
	var rows, titles []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		titles = append(titles, p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q, target %s", p.Title, tg.RefID)
		}
	}
	require.Equal(t, []string{"Limits", "Go and Redisson", "Clock skew", "Exporter"}, rows)
	require.Equal(t, []string{
		"Share of the rate available", "Permits granted per second", "Available permits and rate", "Records in the window and past it",
		"Window permits by writer", "Redisson's share of the window",
		"Newest record's lead over Redis's clock", "Records stamped after Redis's clock",
		"Exporter reading Redis", "Exporter scraped", "Read errors per second", "Reading duration",
		"Limiters exported, idle and truncation", "Eviction risk",
	}, titles)
	return d
}

// TestDashboardJSON checks the dashboard without a server; the panels'
// queries run in TestExporterWithPrometheus.
func TestDashboardJSON(t *testing.T) { loadDashboard(t) }

// startPrometheus runs a Prometheus server with config on a free loopback
// port, its data in a temporary directory, and returns its base URL once
// it is ready. It is stopped when t ends; its log is shown if t failed.
func startPrometheus(t *testing.T, config string) string {
	t.Helper()
	bin := needTool(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o600))
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	base := "http://" + addr
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("prometheus exited: %v", err)
		default:
		}
		if resp, err := c.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		require.True(t, time.Now().Before(deadline), "prometheus not ready within 20 s")
		time.Sleep(50 * time.Millisecond)
	}
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string
	Value  string
}

// promAPI calls Prometheus's HTTP API and returns data; an API error
// (a bad query) is returned as err.
func promAPI(t *testing.T, base, path string, q url.Values) (json.RawMessage, error) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var r struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// query runs an instant PromQL query; scalar and vector results both come
// back as samples.
func query(t *testing.T, base, expr string) ([]promSample, error) {
	t.Helper()
	data, err := promAPI(t, base, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	require.Equal(t, "vector", d.ResultType, expr)
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	require.NoError(t, json.Unmarshal(d.Result, &raw))
	out := make([]promSample, len(raw))
	for i, s := range raw {
		out[i] = promSample{Metric: s.Metric, Value: s.Value[1].(string)}
	}
	return out, nil
}

// values maps the value of label key of each sample to its value.
func values(samples []promSample, key string) map[string]string {
	m := map[string]string{}
	for _, s := range samples {
		m[s.Metric[key]] = s.Value
	}
	return m
}

// A real Prometheus scrapes the exporter over TLS with basic auth (the
// same web configuration as TestExporterTLSAndBasicAuth) and loads the
// alert rules; PromQL through its HTTP API returns the limiters' series
// with the values Redis holds; every rule evaluates without error; every
// panel of the Grafana dashboard runs and returns series.
func TestExporterWithPrometheus(t *testing.T) {
	ctx := context.Background()
	needTool(t, "prometheus")
	base := uniqueName(t)
	overall, perClient := base+"-overall", base+"-pc"
	newLimiter(t, overall, ratelimiter.Config{Rate: 10, Interval: time.Hour}, 3)
	// What Redisson 3.21+ writes for acquire(2): 16 random bytes, no mark.
	rdb := newRedis(t)
	random := make([]byte, 16)
	_, _ = rand.Read(random)
	m, err := wire.Encode(wire.Bc0I, random, 2)
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, "{"+overall+"}:permits", redis.Z{Score: float64(time.Now().UnixMilli()), Member: m}).Err())
	require.NoError(t, rdb.DecrBy(ctx, "{"+overall+"}:value", 2).Err())
	pc := ratelimiter.NewClient(rdb, ratelimiter.WithClientID("alice")).Limiter(perClient)
	_, err = pc.TrySetRate(ctx, ratelimiter.Config{Rate: 5, Interval: time.Hour, Mode: ratelimiter.PerClient})
	require.NoError(t, err)
	granted, err := pc.TryAcquire(ctx, 4)
	require.NoError(t, err)
	require.True(t, granted)

	w := writeWebConfig(t)
	metrics := startExporter(t, "--match", base+"*", "--web.config.file", w.config)
	target := strings.TrimSuffix(strings.TrimPrefix(metrics, "https://"), "/metrics")
	rules, err := filepath.Abs(rulesFile)
	require.NoError(t, err)
	prom := startPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: ratelimiter
    scheme: https
    tls_config:
      ca_file: %q
    basic_auth:
      username: %q
      password: %q
    static_configs:
      - targets: [%q]
`, rules, w.certFile, w.user, w.password, target))

	// The first scrape is in within a scrape interval or two.
	q := strconv.Quote
	var got []promSample
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err = query(t, prom, `ratelimiter_available_permits{limiter=`+q(overall)+`}`)
		require.NoError(t, err)
		if len(got) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no series scraped within 15 s")
	}
	require.Len(t, got, 1)
	require.Equal(t, "5", got[0].Value, "10 - 3 (Go) - 2 (Redisson)")
	require.Equal(t, "ratelimiter", got[0].Metric["job"])
	require.Equal(t, target, got[0].Metric["instance"])

	got, err = query(t, prom, `ratelimiter_window_permits_by_writer{limiter=`+q(overall)+`}`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"go": "3", "redisson": "2"}, values(got, "writer"))
	got, err = query(t, prom, `ratelimiter_available_permits{limiter=`+q(perClient)+`}`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"alice": "1"}, values(got, "client"))
	got, err = query(t, prom, `up{job="ratelimiter"}`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{target: "1"}, values(got, "instance"), "scraped through TLS and basic auth")

	t.Run("rules", func(t *testing.T) {
		want := alertNames(t)
		sort.Strings(want)
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			data, err := promAPI(t, prom, "/api/v1/rules", nil)
			require.NoError(t, err)
			var r struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			}
			require.NoError(t, json.Unmarshal(data, &r))
			var names []string
			evaluated := true
			for _, g := range r.Groups {
				for _, rule := range g.Rules {
					names = append(names, rule.Name)
					require.NotEqual(t, "err", rule.Health, "%s: %s", rule.Name, rule.LastError)
					evaluated = evaluated && rule.Health == "ok"
				}
			}
			sort.Strings(names)
			require.Equal(t, want, names, "the rules Prometheus loaded")
			if evaluated {
				return
			}
			require.True(t, time.Now().Before(deadline), "rules not evaluated within 15 s")
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		d := loadDashboard(t)
		vars := strings.NewReplacer(`$job`, `ratelimiter`, `$limiter`, `.+`, `$__rate_interval`, `1m`)
		labelValues := regexp.MustCompile(`^label_values\((.+), *(\w+)\)$`)
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := labelValues.FindStringSubmatch(v.Definition)
			require.NotNil(t, m, "variable %s: %q", v.Name, v.Definition)
			data, err := promAPI(t, prom, "/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {vars.Replace(m[1])}})
			require.NoError(t, err, "variable %s", v.Name)
			var vals []string
			require.NoError(t, json.Unmarshal(data, &vals))
			want := map[string][]string{"job": {"ratelimiter"}, "limiter": {overall, perClient}}[v.Name]
			require.Subset(t, vals, want, "variable %s", v.Name)
		}
		// Rates need two scrapes in their range: poll until every query
		// returns series; a query error fails at once.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			var empty []string
			for _, p := range d.Panels {
				for _, tg := range p.Targets {
					got, err := query(t, prom, vars.Replace(tg.Expr))
					require.NoError(t, err, "panel %q, target %s: %s", p.Title, tg.RefID, tg.Expr)
					if len(got) == 0 {
						empty = append(empty, p.Title+" "+tg.RefID)
					}
				}
			}
			if len(empty) == 0 {
				return
			}
			require.True(t, time.Now().Before(deadline), "panels with no series after 15 s: %v", empty)
		}
	})
}
