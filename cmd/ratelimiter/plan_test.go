package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planJSON is plan's and apply's -o json output.
type planJSON struct {
	File     string `json:"file"`
	Applied  bool   `json:"applied"`
	Limiters []struct {
		Name    string `json:"name"`
		Source  string `json:"source"`
		Line    int    `json:"line"`
		Action  string `json:"action"`
		Changes []struct {
			Field, Old, New string
		} `json:"changes"`
		Config  planConfig  `json:"config"`
		Current *planConfig `json:"current"`
		Problem string      `json:"problem"`
		Result  string      `json:"result"`
	} `json:"limiters"`
	Patterns []struct {
		Match     string `json:"match"`
		Matched   int    `json:"matched"`
		Truncated bool   `json:"truncated"`
	} `json:"patterns"`
	Summary struct {
		Create, Change, Unchanged, Problems, Created, Changed int
	} `json:"summary"`
}

// planConfig is a configuration as plan shows it.
type planConfig struct {
	Mode       string `json:"mode"`
	Rate       int64  `json:"rate"`
	IntervalMS int64  `json:"interval_ms"`
}

// byName returns the plan's items by limiter name.
func (p planJSON) byName() map[string]string {
	out := map[string]string{}
	for _, l := range p.Limiters {
		out[l.Name] = l.Action
		if p.Applied {
			out[l.Name] = l.Result
		}
	}
	return out
}

// limitsFile writes a limits file for the test and returns its path.
func limitsFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// planOf runs plan or apply with -o json and decodes its output,
// requiring the exit status.
func planOf(t *testing.T, code int, args ...string) planJSON {
	t.Helper()
	r := cli(t, append(args, "-o", "json")...)
	require.Equal(t, code, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	require.Empty(t, r.stderr)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
	return p
}

// plan and apply on limiters written by Go: create, change (the fields
// that differ, old -> new), unchanged; patterns cover existing limiters
// only; plan writes nothing and exits 3 on drift, 0 without; apply makes
// Redis match and a second apply changes nothing.
func TestPlanApply(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	base := uniqueName(t) + "-"
	ok(t, cli(t, "set-rate", base+"search", "--rate", "10", "--interval", "1m"))
	ok(t, cli(t, "set-rate", base+"same", "--rate", "5", "--interval", "1s", "--keep-alive", "1h"))
	ok(t, cli(t, "set-rate", base+"tenant:a", "--rate", "10", "--interval", "1m", "--mode", "per-client"))
	ok(t, cli(t, "set-rate", base+"tenant:b", "--rate", "7", "--interval", "1m", "--mode", "per-client"))
	// Not limiters: a hash without config fields, and a string, both
	// matching the pattern.
	require.NoError(t, rdb.HSet(ctx, base+"tenant:other", "foo", "bar").Err())
	require.NoError(t, rdb.Set(ctx, base+"tenant:str", "x", 0).Err())
	file := limitsFile(t, `
limits:
  - name: `+base+`api          # missing: created
    rate: 100
    interval: 1s
  - name: `+base+`search       # changed
    rate: 20
    interval: 30s
    keep_alive: 1h
  - name: `+base+`same
    rate: 5
    interval: 1s
    keep_alive: 1h
  - match: "`+base+`tenant:*"
    rate: 10
    interval: 1m
    mode: per_client
  - match: "`+base+`nothing:*"
    rate: 1
    interval: 1s
`)
	keys := []string{base + "api", base + "search", base + "same", base + "tenant:a", base + "tenant:b", base + "tenant:other"}
	before := dump(t, rdb, keys...)

	p := planOf(t, 3, "plan", "-f", file)
	assert.False(t, p.Applied)
	assert.Equal(t, map[string]string{base + "api": "create", base + "search": "change", base + "same": "unchanged",
		base + "tenant:a": "unchanged", base + "tenant:b": "change"}, p.byName())
	for _, l := range p.Limiters {
		switch l.Name {
		case base + "search":
			require.Len(t, l.Changes, 3)
			assert.Equal(t, []string{"rate", "10", "20"}, []string{l.Changes[0].Field, l.Changes[0].Old, l.Changes[0].New})
			assert.Equal(t, []string{"interval", "1m0s", "30s"}, []string{l.Changes[1].Field, l.Changes[1].Old, l.Changes[1].New})
			assert.Equal(t, []string{"keep_alive", "off", "1h0m0s"}, []string{l.Changes[2].Field, l.Changes[2].Old, l.Changes[2].New})
			assert.Equal(t, int64(10), l.Current.Rate)
		case base + "tenant:b":
			assert.Equal(t, "match="+base+"tenant:*", l.Source)
			assert.Equal(t, 14, l.Line)
			require.Len(t, l.Changes, 1)
			assert.Equal(t, "rate", l.Changes[0].Field)
		}
	}
	require.Len(t, p.Patterns, 2)
	assert.Equal(t, 2, p.Patterns[0].Matched, "tenant:other and tenant:str are not limiters")
	assert.Equal(t, 0, p.Patterns[1].Matched)
	assert.Equal(t, 1, p.Summary.Create)
	assert.Equal(t, 2, p.Summary.Change)
	assert.Equal(t, 2, p.Summary.Unchanged)
	assert.Equal(t, before, dump(t, rdb, keys...), "plan writes nothing")

	text := failsWith(t, 3, cli(t, "plan", "-f", file)).stdout
	assert.Contains(t, text, "rate 10 -> 20, interval 1m0s -> 30s, keep_alive off -> 1h0m0s")
	assert.Contains(t, text, "match="+base+"nothing:* (line 18) matches no limiter")
	assert.Contains(t, text, "1 to create, 2 to change, 2 unchanged, 0 problems")
	// apply --dry-run is plan: same exit status, nothing written.
	assert.Equal(t, text, failsWith(t, 3, cli(t, "apply", "--dry-run", "-f", file)).stdout)
	assert.Equal(t, before, dump(t, rdb, keys...), "apply --dry-run writes nothing")

	a := planOf(t, 0, "apply", "-f", file)
	assert.True(t, a.Applied)
	assert.Equal(t, map[string]string{base + "api": "created", base + "search": "changed", base + "same": "unchanged",
		base + "tenant:a": "unchanged", base + "tenant:b": "changed"}, a.byName())
	assert.Equal(t, 1, a.Summary.Created)
	assert.Equal(t, 2, a.Summary.Changed)
	for name, want := range map[string]string{
		base + "api":      `{"name":"` + base + `api","exists":true,"mode":"overall","rate":100,"interval_ms":1000}`,
		base + "search":   `{"name":"` + base + `search","exists":true,"mode":"overall","rate":20,"interval_ms":30000,"keep_alive_ms":3600000}`,
		base + "tenant:b": `{"name":"` + base + `tenant:b","exists":true,"mode":"per-client","rate":10,"interval_ms":60000}`,
	} {
		assert.JSONEq(t, want, ok(t, cli(t, "config", name, "-o", "json")).stdout)
	}
	assert.Equal(t, before[base+"same"], dump(t, rdb, base+"same")[base+"same"], "an unchanged limiter is not written")
	assert.Equal(t, before[base+"tenant:other"], dump(t, rdb, base+"tenant:other")[base+"tenant:other"], "a hash that is no limiter is not written")

	// Idempotent: the second apply changes nothing, and plan sees no drift.
	after := dump(t, rdb, keys...)
	again := ok(t, cli(t, "apply", "-f", file)).stdout
	assert.Contains(t, again, "0 created, 0 changed, 5 unchanged, 0 problems")
	assert.Contains(t, again, "no changes: Redis matched the file")
	assert.Equal(t, after, dump(t, rdb, keys...))
	assert.Contains(t, ok(t, cli(t, "plan", "-f", file)).stdout, "no changes: Redis matches the file")

	// Drift: someone changes a limiter by hand; plan exits 3 again.
	ok(t, cli(t, "set-rate", base+"same", "--rate", "6", "--interval", "1s", "--keep-alive", "1h"))
	p = planOf(t, 3, "plan", "-f", file)
	assert.Equal(t, "change", p.byName()[base+"same"])
}

// apply changes a limiter keeping its state: the permits taken before
// remain counted after it, for OVERALL and for each client of a
// PER_CLIENT limiter; apply leaves no budget of its own behind.
func TestApplyKeepsState(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name, pc := uniqueName(t), uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "10", "--interval", "1h"))
	ok(t, cli(t, "acquire", name, "-n", "4"))
	ok(t, cli(t, "--client-id", "w1", "set-rate", pc, "--rate", "10", "--interval", "1h", "--mode", "per-client"))
	ok(t, cli(t, "--client-id", "w1", "acquire", pc, "-n", "3"))

	ok(t, cli(t, "apply", "-f", limitsFile(t, "limits:\n  - name: "+name+"\n    rate: 6\n    interval: 1h\n"+
		"  - name: "+pc+"\n    rate: 5\n    interval: 1h\n    mode: per_client\n")))
	assert.Equal(t, "2\n", ok(t, cli(t, "available", name)).stdout, "4 of the new 6 still taken")
	assert.Equal(t, "2\n", ok(t, cli(t, "--client-id", "w1", "available", pc)).stdout, "w1's 3 of the new 5 still taken")
	clients, err := rdb.Keys(ctx, "{"+pc+"}:value:*").Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"{" + pc + "}:value:w1"}, clients, "no value key of apply's own client id")

	// With --client-id, apply recounts that client's budget at once.
	ok(t, cli(t, "--client-id", "w1", "apply", "-f", limitsFile(t, "limits:\n  - name: "+pc+"\n    rate: 4\n    interval: 1h\n    mode: per_client\n")))
	v, err := rdb.Get(ctx, "{"+pc+"}:value:w1").Result()
	require.NoError(t, err)
	assert.Equal(t, "1", v, "4 - the 3 w1 took")

	// Raised, the window still holds the 4.
	ok(t, cli(t, "apply", "-f", limitsFile(t, "limits:\n  - name: "+name+"\n    rate: 20\n    interval: 1h\n")))
	assert.Equal(t, "16\n", ok(t, cli(t, "available", name)).stdout)
	failsWith(t, 1, cli(t, "acquire", name, "-n", "17"))
	ok(t, cli(t, "acquire", name, "-n", "16"))
}

// A limiter written by real Java Redisson: plan reads its config like
// Go's, apply changes it keeping the permits Redisson took, and Redisson
// reads back what apply wrote (and a limiter apply created).
func TestPlanApplyRedisson(t *testing.T) {
	peer := javaPeer(t, "4.7.0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	base := uniqueName(t) + "-"
	java, javaPC, created := base+"java", base+"java-pc", base+"new"
	for _, cmd := range [][]any{
		{"trySetRate", java, "OVERALL", 10, 3_600_000},
		{"tryAcquire", java, 4},
		{"trySetRate", javaPC, "PER_CLIENT", 5, 60_000},
	} {
		_, err := peer.Do(ctx, cmd...)
		require.NoError(t, err, "%v", cmd)
	}
	same := limitsFile(t, "limits:\n  - name: "+java+"\n    rate: 10\n    interval: 1h\n"+
		"  - match: "+base+"java-*\n    rate: 5\n    interval: 1m\n    mode: PER_CLIENT\n")
	p := planOf(t, 0, "plan", "-f", same)
	assert.Equal(t, map[string]string{java: "unchanged", javaPC: "unchanged"}, p.byName())

	changed := limitsFile(t, "limits:\n  - name: "+java+"\n    rate: 6\n    interval: 1h\n    keep_alive: 2h\n"+
		"  - name: "+created+"\n    rate: 3\n    interval: 1m\n")
	p = planOf(t, 3, "plan", "-f", changed)
	assert.Equal(t, map[string]string{java: "change", created: "create"}, p.byName())
	ok(t, cli(t, "apply", "-f", changed))

	cfg, err := peer.Do(ctx, "getConfig", java)
	require.NoError(t, err)
	assert.Equal(t, "OVERALL 6 3600000", cfg)
	n, err := peer.Int(ctx, "availablePermits", java)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "Redisson's 4 permits still counted under the new rate")
	granted, err := peer.Bool(ctx, "tryAcquire", java, 3)
	require.NoError(t, err)
	assert.False(t, granted)
	cfg, err = peer.Do(ctx, "getConfig", created)
	require.NoError(t, err)
	assert.Equal(t, "OVERALL 3 60000", cfg)
	ttl, err := peer.Int(ctx, "remainTimeToLive", java)
	require.NoError(t, err)
	assert.Greater(t, ttl, int64(time.Hour/time.Millisecond), "keep-alive 2h put on the config")
	planOf(t, 0, "plan", "-f", changed)
}

// A config that is corrupt, incomplete or not a hash is reported, by plan
// and apply, and never written; the rest of the file is applied.
func TestPlanProblems(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	base := uniqueName(t) + "-"
	require.NoError(t, rdb.HSet(ctx, base+"bad", "rate", "x", "interval", "1000", "type", "0").Err())
	require.NoError(t, rdb.HSet(ctx, base+"half", "rate", "5").Err())
	require.NoError(t, rdb.Set(ctx, base+"str", "x", 0).Err())
	require.NoError(t, rdb.HSet(ctx, base+"m:bad", "rate", "1", "interval", "1000", "type", "7").Err())
	file := limitsFile(t, `limits:
  - name: `+base+`bad
    rate: 1
    interval: 1s
  - name: `+base+`half
    rate: 1
    interval: 1s
  - name: `+base+`str
    rate: 1
    interval: 1s
  - name: `+base+`good
    rate: 1
    interval: 1s
  - match: `+base+`m:*
    rate: 1
    interval: 1s
`)
	keys := []string{base + "bad", base + "half", base + "str", base + "m:bad"}
	before := dump(t, rdb, keys...)
	p := planOf(t, 1, "plan", "-f", file)
	problems := map[string]string{}
	for _, l := range p.Limiters {
		if l.Action == "problem" {
			problems[l.Name] = l.Problem
		}
	}
	assert.Contains(t, problems[base+"bad"], base+`bad: field rate is "x"`)
	assert.Contains(t, problems[base+"half"], base+"half: no field interval")
	assert.Contains(t, problems[base+"str"], "is a string, not a hash")
	assert.Contains(t, problems[base+"m:bad"], base+`m:bad: field type is "7"`)
	assert.Len(t, problems, 4)
	assert.Equal(t, 4, p.Summary.Problems)

	a := planOf(t, 1, "apply", "-f", file)
	assert.Equal(t, "skipped", a.byName()[base+"bad"])
	assert.Equal(t, "created", a.byName()[base+"good"])
	assert.Equal(t, before, dump(t, rdb, keys...), "problems are left alone")
	assert.Contains(t, failsWith(t, 1, cli(t, "apply", "-f", file)).stdout, "0 created, 0 changed, 1 unchanged, 4 problems")
}

// Bad input fails with exit 2 and one line naming the problem, before
// anything is sent to Redis: the file's valid limiter is not created.
func TestPlanBadInput(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	good := "  - name: " + name + "\n    rate: 1\n    interval: 1s\n"
	for _, tc := range []struct{ file, want string }{
		{"", "empty file"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 1s\n    mode: sometimes\n", `line 8: unknown mode "sometimes"`},
		{"limits:\n" + good + "  - name: x\n    rate: 0\n    interval: 1s\n", "line 6: rate must be at least 1, got 0"},
		{"limits:\n" + good + "  - name: x\n    rate: -3\n    interval: 1s\n", "rate must be at least 1, got -3"},
		{"limits:\n" + good + "  - name: x\n    rate: ten\n    interval: 1s\n", `rate must be a whole number, not "ten"`},
		{"limits:\n" + good + "  - name: x\n    rate: 1.5\n    interval: 1s\n", `rate must be a whole number`},
		{"limits:\n" + good + "  - name: x\n    rate: 99999999999999999999\n    interval: 1s\n", `rate 99999999999999999999 is not a decimal integer in [1, 9007199254740991]`},
		{"limits:\n" + good + "  - name: x\n    rate: 9007199254740992\n    interval: 1s\n", `rate 9007199254740992 out of range`},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 0s\n", "interval must be a positive duration"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: -1s\n", "interval must not be negative"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 1000\n", `interval "1000" is not a duration with a unit`},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: soon\n", `interval "soon" is not a duration`},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 1500us\n", "whole number of milliseconds"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n", "x: interval is required"},
		{"limits:\n" + good + "  - name: x\n    interval: 1s\n", "x: rate is required"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 1m\n    keep_alive: 1s\n", "keep-alive 1s is shorter than the interval 1m0s"},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    interval: 1s\n    burst: 5\n", `line 8: unknown field "burst"`},
		{"limits:\n" + good + "  - name: x\n    rate: 1\n    rate: 2\n    interval: 1s\n", "line 7: field rate given twice"},
		{"limits:\n" + good + "version: 2\n", `unknown field "version"`},
		{"limits:\n" + good + good, "line 5: " + name + " given twice (first at line 2)"},
		{"limits:\n" + good + "  - match: a*\n    rate: 1\n    interval: 1s\n  - match: a*\n    rate: 2\n    interval: 1s\n", "match=a* given twice"},
		{"limits:\n" + good + "  - name: x\n    match: x*\n    rate: 1\n    interval: 1s\n", "a name or a match pattern, not both"},
		{"limits:\n" + good + "  - rate: 1\n    interval: 1s\n", "needs a name"},
		{"limits:\n" + good + "  - name: \"\"\n    rate: 1\n    interval: 1s\n", "empty name"},
		{"limits:\n" + good + "  - name: 12\n    rate: 1\n    interval: 1s\n", "name must be a string"},
		{"limits: {}\n", "limits must be a list"},
		{"- name: x\n", "want a mapping with a limits: list"},
		{"limits:\n" + good + "---\nlimits: []\n", "a second YAML document"},
		{"limits: [\n", "yaml"},
	} {
		file := limitsFile(t, tc.file)
		for _, cmd := range []string{"plan", "apply"} {
			r := failsWith(t, 2, cli(t, cmd, "-f", file))
			assert.Contains(t, r.stderr, "ratelimiter "+cmd+": "+file+": ", "file %q", tc.file)
			assert.Contains(t, r.stderr, tc.want, "file %q", tc.file)
			assert.Empty(t, r.stdout)
		}
	}
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was created")

	assert.Contains(t, failsWith(t, 2, cli(t, "plan")).stderr, "--file FILE is required")
	assert.Contains(t, failsWith(t, 2, cli(t, "apply", "-f", filepath.Join(t.TempDir(), "none.yaml"))).stderr, "no such file")
	assert.Contains(t, failsWith(t, 2, cli(t, "plan", "-f", limitsFile(t, "limits: []\n"), "extra")).stderr, "unexpected argument extra")

	// Two patterns asking for different limits of one limiter: refused,
	// after reading, before any write.
	base := uniqueName(t) + "-"
	ok(t, cli(t, "set-rate", base+"ab", "--rate", "1", "--interval", "1s"))
	conflict := limitsFile(t, "limits:\n"+good+"  - match: "+base+"a*\n    rate: 2\n    interval: 1s\n  - match: "+base+"*b\n    rate: 3\n    interval: 1s\n")
	r := failsWith(t, 2, cli(t, "apply", "-f", conflict))
	assert.Contains(t, r.stderr, base+"ab matches both match="+base+"a* (line 5) and match="+base+"*b (line 8)")
	n, err = rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was created")
	assert.Contains(t, ok(t, cli(t, "config", base+"ab")).stdout, "rate        1")
	// A name wins over the patterns.
	resolved := limitsFile(t, "limits:\n  - name: "+base+"ab\n    rate: 4\n    interval: 1s\n  - match: "+base+"a*\n    rate: 2\n    interval: 1s\n  - match: "+base+"*b\n    rate: 3\n    interval: 1s\n")
	p := planOf(t, 3, "plan", "-f", resolved)
	require.Len(t, p.Limiters, 1)
	assert.Equal(t, base+"ab", p.Limiters[0].Source)
}

// -f - reads the file from standard input; --name-prefix maps the file's
// names and patterns as it maps every command's.
func TestPlanStdinAndPrefix(t *testing.T) {
	base := uniqueName(t) + "-"
	ok(t, cli(t, "--name-prefix", "app:", "set-rate", base+"x", "--rate", "2", "--interval", "1s"))
	file := "limits:\n  - match: " + base + "*\n    rate: 3\n    interval: 1s\n"
	cmd := exec.Command(bin, "--name-prefix", "app:", "apply", "-f", "-", "-o", "json")
	cmd.Env = append(os.Environ(), "REDIS_URL=redis://"+redisAddr+"/0")
	cmd.Stdin = strings.NewReader(file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	var p planJSON
	require.NoError(t, json.Unmarshal(out.Bytes(), &p), out.String())
	assert.Equal(t, "<stdin>", p.File)
	assert.Equal(t, map[string]string{base + "x": "changed"}, p.byName())
	assert.Contains(t, ok(t, cli(t, "config", "app:"+base+"x")).stdout, "rate        3")
}

// -h documents the exit statuses; a Redis that refuses the password, or
// is not there, is exit 2 with one line that never shows the password.
func TestPlanHelpAndConnection(t *testing.T) {
	assert.Contains(t, ok(t, cli(t, "plan", "-h")).stdout, "Exit status: 0 Redis matches the file, 3 there")
	assert.Contains(t, ok(t, cli(t, "apply", "-h")).stdout, "--dry-run")
	file := limitsFile(t, "limits:\n  - name: "+uniqueName(t)+"\n    rate: 1\n    interval: 1s\n")
	for _, url := range []string{"redis://someone:Sec%2Fret9@" + redisAddr + "/0", "redis://someone:Sec%2Fret9@127.0.0.1:1/0"} {
		for _, cmd := range []string{"plan", "apply"} {
			r := failsWith(t, 2, cliEnv(t, []string{"REDIS_URL=" + url}, cmd, "-f", file, "--redis-timeout", "2s"))
			assert.Contains(t, r.stderr, "ratelimiter "+cmd+": ")
			assert.NotContains(t, r.stderr+r.stdout, "Sec")
		}
	}
}
