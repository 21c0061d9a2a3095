package main_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 39, item 9: the limiters "x" and "{x}" share their value and
// permits keys ({x}:value, {x}:permits). set-rate, try-set-rate and
// update-rate warn on stderr before they write when the other one is
// configured (and say so in -o json); plan and apply warn about it, and
// about both names in one file; doctor warns. A name whose other is not
// configured gets no warning.
func TestSharedKeysWarned(t *testing.T) {
	base := uniqueName(t)
	plain, tagged := base, "{"+base+"}"
	ok(t, cli(t, "set-rate", plain, "--rate", "10", "--interval", "1m"))
	ok(t, cli(t, "acquire", plain))

	for _, args := range [][]string{
		{"set-rate", tagged, "--rate", "10", "--interval", "1m"},
		{"update-rate", plain, "--rate", "10", "--interval", "1m", "--keep-state"},
		{"try-set-rate", plain, "--rate", "10", "--interval", "1m"},
	} {
		r := cli(t, args...)
		require.NotEqual(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "warning", args)
		require.Contains(t, r.stderr, "{"+base+"}:value", args)
	}
	r := cli(t, "set-rate", tagged, "--rate", "10", "--interval", "1m", "-o", "json")
	require.Contains(t, r.stdout, `"shares_keys_with":"`+plain+`"`)

	d := doctorReport(t, cli(t, "doctor", plain, "-o", "json"))
	require.True(t, strings.HasPrefix(d.status("names"), "warn: "), d.status("names"))
	require.Contains(t, d.status("names"), tagged)
	other := base + "-alone"
	ok(t, cli(t, "set-rate", other, "--rate", "10", "--interval", "1m"))
	d = doctorReport(t, ok(t, cli(t, "doctor", other, "-o", "json")))
	require.True(t, strings.HasPrefix(d.status("names"), "ok: "), d.status("names"))

	for _, cmd := range []string{"plan", "apply"} {
		r = cli(t, cmd, "-f", limitsFile(t, "limits:\n  - name: '"+tagged+"'\n    rate: 20\n    interval: 1m\n"))
		require.NotEqual(t, 2, r.code, r.stderr)
		require.Contains(t, r.stderr, "warning", cmd)
		require.Contains(t, r.stderr, plain, cmd)
	}
	fresh := base + "-new"
	r = cli(t, "plan", "-f", limitsFile(t, "limits:\n  - name: "+fresh+"\n    rate: 10\n    interval: 1m\n"+
		"  - name: '{"+fresh+"}'\n    rate: 5\n    interval: 1m\n"))
	require.Equal(t, 3, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stderr, "warning"), r.stderr)
	require.Contains(t, r.stderr, "this file")
}
