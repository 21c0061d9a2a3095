package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// toolCommand is a Redis command that CLI commands or the exporter send
// themselves, outside the library's scripts.
type toolCommand struct {
	Command string `json:"command"`
	// NeededBy names the CLI commands that send it ("exporter" among
	// them).
	NeededBy []string `json:"needed_by"`
	// Allowed is doctor's finding: the user may run it (always true
	// outside doctor's report).
	Allowed bool `json:"allowed"`
}

// toolCommands lists what the CLI commands and the exporter send
// themselves: the library's calls (and sweep --apply's script, which runs
// time, pttl, zrevrange and del or pexpire) need the README's first ACL
// line, checked by doctor's permissions check; these need the README's
// lines together. doctor checks every one of them;
// TestACLMatchesCommands holds this list to what the commands send,
// read with MONITOR, and runs each command under a user without each of
// its commands in turn.
var toolCommands = []toolCommand{
	{Command: "ping", NeededBy: []string{"every command", "exporter"}},
	{Command: "time", NeededBy: []string{"exporter", "sweep", "inspect"}},
	{Command: "scan", NeededBy: []string{"exporter", "sweep", "inspect", "watch", "explain", "plan", "apply", "doctor"}},
	{Command: "hmget", NeededBy: []string{"exporter", "sweep", "set-rate", "try-set-rate", "update-rate", "plan", "apply", "doctor"}},
	{Command: "hgetall", NeededBy: []string{"inspect", "watch", "explain", "plan", "apply"}},
	{Command: "get", NeededBy: []string{"exporter", "inspect", "watch", "explain"}},
	{Command: "pttl", NeededBy: []string{"exporter", "sweep", "inspect", "watch", "explain", "doctor"}},
	{Command: "type", NeededBy: []string{"inspect", "watch", "explain", "plan", "apply"}},
	{Command: "zrange", NeededBy: []string{"inspect", "watch", "explain"}},
	{Command: "zrangebyscore", NeededBy: []string{"exporter"}},
	{Command: "zcount", NeededBy: []string{"exporter"}},
	{Command: "zrevrange", NeededBy: []string{"exporter", "sweep"}},
	{Command: "info", NeededBy: []string{"exporter", "doctor"}},
}

// probeToolCommands sends each command of toolCommands but ping (which
// connecting ran) once, in a form that reads only the limiter's own keys
// k and changes nothing, and returns the list with Allowed set: false
// for a command Redis refused with NOPERM. Other refusals (a key of
// another type) say the command may run. It fails when a reply is not
// Redis's (the connection lost, ctx done).
func probeToolCommands(ctx context.Context, rdb redis.UniversalClient, k wire.Keys) ([]toolCommand, error) {
	out := make([]toolCommand, len(toolCommands))
	cmds := make([]redis.Cmder, len(toolCommands))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, tc := range toolCommands {
			out[i] = tc
			out[i].Allowed = true
			switch tc.Command {
			case "time":
				cmds[i] = p.Time(ctx)
			case "scan":
				cmds[i] = p.ScanType(ctx, 0, escapeGlob(k.Config), 1, "hash")
			case "hmget":
				cmds[i] = p.HMGet(ctx, k.Config, "rate")
			case "hgetall":
				cmds[i] = p.HGetAll(ctx, k.Config)
			case "get":
				cmds[i] = p.Get(ctx, k.Value)
			case "pttl":
				cmds[i] = p.PTTL(ctx, k.Config)
			case "type":
				cmds[i] = p.Type(ctx, k.Config)
			case "zrange":
				cmds[i] = p.ZRange(ctx, k.Permits, 0, 0)
			case "zrangebyscore":
				cmds[i] = p.ZRangeByScore(ctx, k.Permits, &redis.ZRangeBy{Min: "+inf", Max: "+inf", Count: 1})
			case "zcount":
				cmds[i] = p.ZCount(ctx, k.Permits, "+inf", "+inf")
			case "zrevrange":
				cmds[i] = p.ZRevRange(ctx, k.Permits, 0, 0)
			case "info":
				cmds[i] = p.Info(ctx, "server")
			}
		}
		return nil
	})
	for i, c := range cmds {
		if c == nil {
			continue
		}
		switch err := c.Err(); {
		case err == nil || isReply(err) && !isNoPerm(err):
		case isNoPerm(err):
			out[i].Allowed = false
		default:
			return nil, err
		}
	}
	return out, nil
}

// isNoPerm reports whether err is Redis's refusal of a command the user
// may not run.
func isNoPerm(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOPERM") }

// missingByTool says which commands each CLI command lacks, from
// probeToolCommands' list: "exporter needs zcount, zrevrange; sweep needs
// zrevrange"; "" when none is missing.
func missingByTool(list []toolCommand) string {
	by := map[string][]string{}
	for _, tc := range list {
		if !tc.Allowed {
			for _, tool := range tc.NeededBy {
				by[tool] = append(by[tool], tc.Command)
			}
		}
	}
	parts := make([]string, 0, len(by))
	for tool, cmds := range by {
		parts = append(parts, fmt.Sprintf("%s needs %s", tool, strings.Join(cmds, ", ")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
