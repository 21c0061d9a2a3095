package main_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandList returns the commands "ratelimiter help" lists.
func commandList(t *testing.T) []string {
	t.Helper()
	out := ok(t, cliOffline(t, "help")).stdout
	_, list, found := strings.Cut(out, "\nCommands:\n")
	require.True(t, found, out)
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for _, line := range strings.Split(list, "\n") {
		names = append(names, strings.Fields(line)[0])
	}
	require.Contains(t, names, "completion")
	return names
}

// helpSections returns the flags that help text lists under each heading
// ("Flags", "Connection flags", "Client flags"), every name of each
// ("--output, --o" gives output and o).
func helpSections(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	heading := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "Flags:" || line == "Connection flags:" || line == "Client flags:":
			heading = strings.TrimSuffix(line, ":")
		case strings.HasPrefix(line, "  --"):
			require.NotEmpty(t, heading, "a flag before any heading: %q", line)
			for _, tok := range strings.Fields(line) {
				if !strings.HasPrefix(tok, "--") {
					break
				}
				out[heading] = append(out[heading], strings.TrimSuffix(strings.TrimPrefix(tok, "--"), ","))
			}
		case strings.HasPrefix(line, "  -"):
			t.Errorf("a flag with one dash: %q", line)
		}
	}
	return out
}

// Issue 37, item 3: every command's -h prints its usage line, its own
// flags under "Flags", then the shared ones under "Connection flags" and
// "Client flags", every flag with two dashes (the usage line too).
func TestHelpGroupsFlags(t *testing.T) {
	oneDash := regexp.MustCompile(`(^|[\s\[|(])-[a-z]`)
	for _, name := range commandList(t) {
		r := ok(t, cliOffline(t, name, "-h"))
		usage, _, _ := strings.Cut(r.stdout, "\n")
		assert.True(t, strings.HasPrefix(usage, "usage: ratelimiter "+name), "%s: %q", name, usage)
		assert.False(t, oneDash.MatchString(usage), "%s: a flag with one dash in %q", name, usage)
		got := helpSections(t, r.stdout)
		if name != "completion" {
			assert.Contains(t, got["Connection flags"], "url", name)
		}
		for _, f := range got["Flags"] {
			assert.NotContains(t, []string{"url", "cluster", "sentinel", "redis-timeout", "ca", "insecure-skip-verify", "client-id", "name-prefix", "format"}, f,
				"%s: a shared flag among its own", name)
		}
	}
	r := ok(t, cliOffline(t, "acquire", "--help"))
	got := helpSections(t, r.stdout)
	assert.Equal(t, []string{"n", "output", "o", "timeout"}, got["Flags"])
	assert.Equal(t, []string{"ca", "cluster", "insecure-skip-verify", "redis-timeout", "sentinel", "url"}, got["Connection flags"])
	assert.Equal(t, []string{"client-id", "format", "name-prefix"}, got["Client flags"])
	assert.Less(t, strings.Index(r.stdout, "--timeout"), strings.Index(r.stdout, "Connection flags:"), "own flags first")
	// The exporter takes the connection flags only.
	got = helpSections(t, ok(t, cliOffline(t, "exporter", "-h")).stdout)
	assert.Empty(t, got["Client flags"])
	assert.Contains(t, got["Flags"], "web.listen-address")
	// The demo's -h is help too (it exited 2 before).
	got = helpSections(t, ok(t, cliOffline(t, "demo", "-h")).stdout)
	assert.Equal(t, []string{"url"}, got["Connection flags"])
	// The top-level help groups the flags that may come before a command.
	got = helpSections(t, ok(t, cliOffline(t, "--help")).stdout)
	assert.Equal(t, []string{"output", "o", "version"}, got["Flags"])
	assert.Contains(t, got["Connection flags"], "url")
	// Both spellings parse.
	for _, args := range [][]string{{"--version"}, {"-version"}} {
		ok(t, cliOffline(t, args...))
	}
	r = failsWith(t, 2, cliOffline(t, "acquire", "x", "--bogus"))
	assert.Contains(t, r.stderr, "see ratelimiter acquire --help")
}
