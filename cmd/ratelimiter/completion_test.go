package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 37, item 3: "ratelimiter completion bash|zsh|fish" prints a
// script that holds every command and every flag each command's -h lists;
// anything else is a usage error.
func TestCompletionCoversEveryCommandAndFlag(t *testing.T) {
	names := commandList(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		script := ok(t, cliOffline(t, "completion", shell)).stdout
		for _, name := range names {
			switch shell {
			case "fish":
				assert.Contains(t, script, " -a "+name+" ", "%s: command %s", shell, name)
			case "zsh":
				assert.Contains(t, script, "'"+name+":", "%s: command %s", shell, name)
			default:
				assert.Contains(t, script, "\t"+name+") flags=", "%s: command %s", shell, name)
			}
			var section string
			for _, line := range strings.Split(script, "\n") {
				if shell == "fish" && strings.Contains(line, "'__ratelimiter_using "+name+"'") ||
					shell != "fish" && (strings.HasPrefix(line, "\t"+name+") ") || strings.HasPrefix(line, "\t("+name+") ")) {
					section += line + "\n"
				}
			}
			for _, flags := range helpSections(t, ok(t, cliOffline(t, name, "-h")).stdout) {
				for _, f := range flags {
					want := "--" + f + " "
					switch shell {
					case "fish":
						want = " -l " + f + " "
					case "zsh":
						want = "'--" + f + ":"
					}
					assert.Contains(t, section, want, "%s: %s's flag %s", shell, name, f)
				}
			}
		}
	}
	failsWith(t, 2, cliOffline(t, "completion"))
	failsWith(t, 2, cliOffline(t, "completion", "tcsh"))
	failsWith(t, 2, cliOffline(t, "completion", "bash", "zsh"))
}

// The bash script loads (bash -n, then source) and completes: a command
// prefix, after global flags and their values (one with ':' in it); a
// command's flags; the shells after "completion"; file names after a flag
// that takes a value.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed to check the bash completion")
	dir := t.TempDir()
	script := filepath.Join(dir, "ratelimiter.bash")
	require.NoError(t, os.WriteFile(script, []byte(ok(t, cliOffline(t, "completion", "bash")).stdout), 0o600))
	out, err := exec.Command(bash, "-n", script).CombinedOutput()
	require.NoError(t, err, "bash -n: %s", out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.yaml"), nil, 0o600))
	cases := []struct{ line, want string }{
		{"ratelimiter ac", "acquire"},
		{"ratelimiter ", strings.Join(commandList(t), " ")},
		{"ratelimiter --url redis://h:6379/0 ex", "exists expire explain exporter"},
		{"ratelimiter -url=redis://h:6379 --insecure-skip-verify --o json ex", "exists expire explain exporter"},
		{"ratelimiter acquire api --ti", "--timeout"},
		{"ratelimiter sweep --ap", "--apply"},
		{"ratelimiter --ver", "--version"},
		{"ratelimiter completion ", "bash zsh fish"},
		{"ratelimiter plan --file " + dir + "/lim", dir + "/limits.yaml"},
		{"ratelimiter acquire api ", ""},
	}
	test := "source " + script + "\n" +
		`t() { COMP_LINE=$1; COMP_POINT=${#1}; COMPREPLY=(); _ratelimiter; echo "${COMPREPLY[*]}"; }` + "\n"
	for _, c := range cases {
		test += "t '" + c.line + "'\n"
	}
	out, err = exec.Command(bash, "-c", test).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, got, len(cases), "%s", out)
	for i, c := range cases {
		assert.Equal(t, c.want, got[i], "%q", c.line)
	}
}
