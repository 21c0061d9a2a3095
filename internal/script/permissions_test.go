package script

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// luaCommands returns the lower-case commands a script's source calls.
func luaCommands(src string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?:redis\.p?call|read)\('([A-Z]+)'`).FindAllStringSubmatch(src, -1) {
		if c := strings.ToLower(m[1]); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// TestPermissionNeedsMatchScripts: every command a script calls is in its
// list of needs (redis_permissions.go) or is one that runs only as the script's
// first write or before any write; every need is one that lua/probe.lua
// checks.
func TestPermissionNeedsMatchScripts(t *testing.T) {
	var probed []string
	for _, m := range regexp.MustCompile(`\{'([A-Z]+)'|acl_check_cmd\('([A-Z]+)'`).FindAllStringSubmatch(luaProbe, -1) {
		m[1] += m[2]
		probed = append(probed, strings.ToLower(m[1]))
	}
	for _, tc := range []struct {
		name  string
		src   string
		need  []string
		first []string // called only as the first write or before any write
	}{
		// TIME (the server's clock) is read before any write; acquire.lua's
		// ZREM only takes its record back when DECRBY was refused.
		{"acquire.lua", luaAcquire, needAcquire, []string{"time", "zrem"}},
		{"acquire_all.lua", luaAcquireAll, needAcquireAll, []string{"time"}},
		{"available.lua", luaLib + luaAvailable, needSettle, []string{"time"}},
		{"release.lua", luaLib + luaGiveBack + luaRelease, needRelease, []string{"time"}},
		{"release_all.lua", luaLib + luaGiveBack + luaReleaseAll, needRelease, []string{"time"}},
		{"lease.lua", luaLib + luaLeaseReturn + luaLease, needLease, []string{"time"}},
		{"lease_end.lua", luaLib + luaLeaseReturn + luaLeaseEnd, needLease, []string{"time"}},
		// fill.lua runs before an acquisition, on the acquire's needs.
		{"fill.lua", luaLib + luaFill, needAcquire, []string{"time"}},
		// setrate.lua uses lib.lua's refresh (PEXPIRE, PTTL), no other lib command.
		{"setrate.lua", luaSetRate + " redis.call('PEXPIRE' redis.call('PTTL'", needSetRate, nil},
		// trysetrate.lua uses lib.lua's refresh (PEXPIRE, PTTL).
		{"trysetrate.lua", luaTrySetRate + " redis.call('PTTL'", needTrySetRate, []string{"hsetnx", "time"}},
	} {
		for _, c := range luaCommands(tc.src) {
			if !slices.Contains(tc.need, c) && !slices.Contains(tc.first, c) {
				t.Errorf("%s calls %s, which is neither in its needs nor run before its first write", tc.name, c)
			}
		}
		for _, c := range tc.need {
			if !slices.Contains(probed, c) {
				t.Errorf("%s needs %s, which lua/probe.lua does not check", tc.name, c)
			}
		}
	}
}
