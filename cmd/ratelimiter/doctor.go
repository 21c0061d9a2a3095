package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/diag"
)

func init() {
	adminCommand("doctor", "check a deployment for NAME's limiter: server, Lua and TIME, eviction policy, "+
		"the user's permissions for every operation, clock offset, keys without TTL, cluster slots "+
		"(exit 0 all well, 1 warnings, 2 failures)", "[--output json]", doctorCmd)
}

// check is one line of the doctor's report.
type check struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
}

type doctorJSON struct {
	Name   string  `json:"name"`
	Status string  `json:"status"` // the worst of the checks
	Checks []check `json:"checks"`
	// ToolCommands are the commands the CLI and the exporter send
	// themselves, with whether the user may run them (check tools).
	ToolCommands []toolCommand `json:"tool_commands"`
}

func doctorCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		tools, list := c.doctorTools()
		checks := []check{
			c.doctorServer(),
			c.doctorLua(),
			c.doctorEviction(),
			c.doctorPersistence(),
			c.doctorPermissions(),
			tools,
			c.doctorClock(),
			c.doctorTTL(),
			c.doctorNames(),
		}
		if cc, ok := c.rdb.(*redis.ClusterClient); ok {
			checks = append(checks, c.doctorSlots(cc))
		}
		out := doctorJSON{Name: c.name, Status: "ok", Checks: checks, ToolCommands: list}
		for _, ch := range checks {
			if rank(ch.Status) > rank(out.Status) {
				out.Status = ch.Status
			}
		}
		if err := c.emit(out, func(w io.Writer) {
			for _, ch := range checks {
				fmt.Fprintf(w, "%-4s %-12s %s\n", ch.Status, ch.Check, ch.Detail)
			}
		}); err != nil {
			return err
		}
		switch out.Status {
		case "warn":
			return errRefused
		case "fail":
			return doctorFailed{}
		}
		return nil
	}}
}

// doctorFailed makes exit status 2 after the report was printed.
type doctorFailed struct{}

func (doctorFailed) Error() string { return "some checks failed" }

func rank(status string) int {
	switch status {
	case "warn":
		return 1
	case "fail":
		return 2
	}
	return 0
}

func (c *cli) doctorServer() check {
	info, err := c.rdb.Info(c.ctx, "server").Result()
	if err != nil {
		// The least-privilege user of the README may not run INFO.
		return check{"server", "warn", "cannot read INFO server: " + err.Error()}
	}
	fields := infoFields(info)
	name, version := "Redis", fields["redis_version"]
	if v := fields["valkey_version"]; v != "" {
		name, version = "Valkey", v
	}
	mode := fields["redis_mode"]
	if mode == "" {
		mode = fields["server_mode"]
	}
	return check{"server", "ok", strings.TrimSuffix(fmt.Sprintf("%s %s (%s)", name, version, mode), " ()")}
}

func (c *cli) doctorLua() check {
	t, err := c.rdb.Eval(c.ctx, "return redis.call('TIME')", []string{c.keys(c.name).Config}).StringSlice()
	if err != nil {
		return check{"lua", "fail", "a script calling TIME failed: " + err.Error()}
	}
	return check{"lua", "ok", "scripts run; server TIME " + strings.Join(t, ".")}
}

func (c *cli) doctorEviction() check {
	e, err := diag.ReadEviction(c.ctx, c.rdb)
	if err != nil {
		return check{"eviction", "warn", "cannot read maxmemory-policy (INFO): " + err.Error()}
	}
	detail := fmt.Sprintf("maxmemory-policy %s, maxmemory %d, %d keys evicted", e.Policy, e.MaxMemory, e.EvictedKeys)
	switch {
	case e.Evicts(false):
		return check{"eviction", "warn", detail + ": limiter keys can be evicted (docs/differences.md, Eviction)"}
	case e.Evicts(true):
		return check{"eviction", "warn", detail + ": keys of limiters with keep-alive can be evicted"}
	}
	return check{"eviction", "ok", detail}
}

// doctorPersistence warns when the server keeps snapshots but no
// append-only file: a restart then brings back the windows of the last
// snapshot, and the grants made since are made again by any client that
// does not fill the window (docs/operations.md, "Restarts, failovers and
// clock steps"). A server with neither loses its limiters on a restart
// (ErrNotInitialized until SetRate), which grants nothing twice.
func (c *cli) doctorPersistence() check {
	info, err := c.rdb.Info(c.ctx, "persistence").Result()
	if err != nil {
		return check{"persistence", "warn", "cannot read INFO persistence: " + err.Error()}
	}
	if infoFields(info)["aof_enabled"] == "1" {
		return check{"persistence", "ok", "appendonly yes"}
	}
	save, err := c.rdb.ConfigGet(c.ctx, "save").Result()
	switch {
	case err != nil:
		return check{"persistence", "ok", "appendonly no; snapshot points unknown (CONFIG GET save: " + err.Error() + ")"}
	case strings.TrimSpace(save["save"]) == "":
		return check{"persistence", "ok", "no persistence: a restart loses every limiter"}
	}
	return check{"persistence", "warn", fmt.Sprintf("snapshots only (save %q, appendonly no): a restart brings back the last snapshot's windows; "+
		"Go Clients fill them for one interval, Redisson does not (docs/operations.md, Restarts, failovers and clock steps)", save["save"])}
}

func (c *cli) doctorPermissions() check {
	missing, err := diag.MissingPermissions(c.ctx, c.rdb, c.keys(c.name))
	if err != nil {
		return check{"permissions", "fail", "the permission probe failed: " + err.Error()}
	}
	if len(missing) == 0 {
		return check{"permissions", "ok", "the user may run every command of every operation"}
	}
	var parts []string
	for op, cmds := range missing {
		parts = append(parts, op+" needs "+strings.Join(cmds, ", "))
	}
	sort.Strings(parts)
	return check{"permissions", "fail", strings.Join(parts, "; ")}
}

// doctorTools checks the commands the CLI and the exporter send
// themselves (toolCommands): a missing one is a warning, since the
// library's calls do not need it.
func (c *cli) doctorTools() (check, []toolCommand) {
	list, err := probeToolCommands(c.ctx, c.rdb, c.keys(c.name))
	if err != nil {
		return check{"tools", "fail", "checking the CLI's and the exporter's commands: " + err.Error()}, nil
	}
	if missing := missingByTool(list); missing != "" {
		return check{"tools", "warn", missing + " (the README's least-privilege ACL lists them)"}, list
	}
	return check{"tools", "ok", fmt.Sprintf("the user may run the %d commands the CLI and the exporter send themselves", len(list))}, list
}

func (c *cli) doctorClock() check {
	s, err := c.client.MeasureClock(c.ctx)
	if err != nil {
		return check{"clock", "fail", "measuring against TIME: " + err.Error()}
	}
	detail := fmt.Sprintf("this host's clock minus Redis's: %v ± %v", s.Offset.Round(time.Microsecond), s.Uncertainty.Round(time.Microsecond))
	if s.Offset > 50*time.Millisecond || s.Offset < -50*time.Millisecond {
		return check{"clock", "warn", detail + " (over 50 ms: docs/operations.md, Clock skew)"}
	}
	return check{"clock", "ok", detail}
}

// doctorTTL warns when the config hash has a TTL that some state keys do
// not have (they would outlive it), this client's and every other
// client's PER_CLIENT keys found by a bounded SCAN included; and when
// PER_CLIENT budgets of many client ids never expire (a process that
// starts with a fresh id leaves its budget behind for good).
func (c *cli) doctorTTL() check {
	k := c.keys(c.name)
	keys := []string{k.Config, k.Value, k.Permits}
	for _, q := range []struct{ base, typ string }{{k.Value, "string"}, {k.Permits, "zset"}} {
		found, _, err := scanBounded(c.ctx, c.rdb, []string{escapeGlob(q.base) + ":*"}, q.typ, 1000, ttlScans)
		if err != nil {
			return check{"ttl", "fail", "SCAN: " + err.Error()}
		}
		keys = append(keys, found...)
	}
	keys = keys[:min(len(keys), ttlKeys)]
	p := c.rdb.Pipeline()
	ttls := make([]*redis.DurationCmd, len(keys))
	for i, key := range keys {
		ttls[i] = p.PTTL(c.ctx, key)
	}
	if _, err := p.Exec(c.ctx); err != nil && !errors.Is(err, redis.Nil) {
		return check{"ttl", "fail", "PTTL: " + err.Error()}
	}
	cfg := ttls[0].Val()
	if cfg == -2*time.Nanosecond || cfg == -2 {
		return check{"ttl", "warn", "the limiter's config hash does not exist"}
	}
	var without []string
	clients := 0 // PER_CLIENT keys without a TTL
	for i := 1; i < len(keys); i++ {
		if d := ttls[i].Val(); d == -1 || d == -1*time.Nanosecond {
			without = append(without, keys[i])
			if i >= 3 {
				clients++
			}
		}
	}
	switch {
	case cfg > 0 && len(without) > 0:
		return check{"ttl", "warn", fmt.Sprintf("the config expires in %v but %d state keys have no TTL: %s", cfg.Round(time.Millisecond), len(without), listSome(without, 3))}
	case cfg > 0:
		return check{"ttl", "ok", fmt.Sprintf("every key expires (config in %v)", cfg.Round(time.Millisecond))}
	case clients > manyClients:
		return check{"ttl", "warn", fmt.Sprintf("%d PER_CLIENT keys of client ids never expire (the config has no TTL): each process with a fresh client id leaves its budget behind; set a keep-alive or fixed client ids", clients)}
	}
	return check{"ttl", "ok", "the config has no TTL"}
}

// doctorNames warns when another configured limiter shares NAME's value
// and permits keys ("api" and "{api}", shared.go).
func (c *cli) doctorNames() check {
	key := c.g.mapName(c.name)
	others, err := configuredOthers(c.ctx, c.rdb, []string{key})
	switch other, ok := sharesKeysWith(key); {
	case err != nil:
		return check{"names", "fail", "HMGET: " + err.Error()}
	case others[0] != "":
		return check{"names", "warn", sharedKeysWarning(key, others[0])}
	case ok:
		return check{"names", "ok", fmt.Sprintf("the limiter whose config key is %s would share its keys, and is not configured", shown(other))}
	}
	return check{"names", "ok", "no other name maps to its value and permits keys"}
}

const (
	// ttlScans and ttlKeys bound the TTL check: SCAN calls per pattern,
	// keys whose TTL is read.
	ttlScans = 100
	ttlKeys  = 10000
	// manyClients: more PER_CLIENT keys than this that never expire is a
	// leak worth a warning, not a few fixed client ids.
	manyClients = 100
)

// listSome lists the first n of keys, quoted, and how many more.
func listSome(keys []string, n int) string {
	shown := shownAll(keys[:min(n, len(keys))])
	text := strings.Join(shown, ", ")
	if len(keys) > n {
		text += fmt.Sprintf(" and %d more", len(keys)-n)
	}
	return text
}

func (c *cli) doctorSlots(cc *redis.ClusterClient) check {
	slots, err := cc.ClusterSlots(c.ctx).Result()
	if err != nil {
		return check{"slots", "fail", "CLUSTER SLOTS: " + err.Error()}
	}
	covered := 0
	for _, s := range slots {
		covered += int(s.End-s.Start) + 1
	}
	if covered != 16384 {
		return check{"slots", "fail", fmt.Sprintf("%d of 16384 slots served", covered)}
	}
	return check{"slots", "ok", fmt.Sprintf("16384 slots served by %d ranges", len(slots))}
}

// infoFields reads INFO's "key:value" lines.
func infoFields(info string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}
