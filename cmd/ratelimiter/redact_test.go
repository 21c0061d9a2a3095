package main_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A password holding / ? # " \ @ % or a space, in --url or REDIS_URL,
// never shows in what the CLI prints: parse errors, connection errors,
// -h defaults (demo's too).
func TestPasswordNeverPrinted(t *testing.T) {
	name := uniqueName(t)
	for _, pw := range []string{"Sec/ret9", "Sec?ret9", "Sec#ret9", `Sec"ret9`, `Sec\ret9`, "Sec@ret9", "Sec%ret9", "Sec ret9",
		"Sec:ret9", "Sec/ret9:1234", "Sec\x01ret9", "Sec\xffret9"} {
		url := fmt.Sprintf("redis://cli-user:%s@%s/0", pw, redisAddr)
		env := []string{"REDIS_URL=" + url}
		for _, args := range [][]string{
			{"config", name},
			{"config", name, "--url", url},
			{"config", name, "--cluster", redisAddr},
			{"config", "-h"},
			{"demo", "-h"},
			{"demo", "--duration", "1ms", "--name", name},
		} {
			r := cliEnv(t, env, args...)
			for _, part := range []string{"Sec", "ret9"} {
				assert.NotContains(t, r.stderr, part, "%q %v", pw, args)
				assert.NotContains(t, r.stdout, part, "%q %v", pw, args)
			}
		}
	}
}
