package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// monitor reads a server's MONITOR feed.
type monitor struct {
	conn net.Conn
	r    *bufio.Reader
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	m := &monitor{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	line, err := m.r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", line)
	return m
}

// until returns the feed's lines up to the one that holds marker.
func (m *monitor) until(t *testing.T, marker string) []string {
	t.Helper()
	var lines []string
	require.NoError(t, m.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	for {
		line, err := m.r.ReadString('\n')
		require.NoError(t, err, "waiting for %s", marker)
		if strings.Contains(line, `"`+marker+`"`) {
			return lines
		}
		lines = append(lines, strings.TrimSpace(line))
	}
}

var monitorLine = regexp.MustCompile(`^\+[0-9.]+ \[\d+ ([^\]]+)\] "([^"]*)"(?: "([^"]*)")?`)

// commandsOf returns the commands of MONITOR lines, lower case, with the
// subcommand of a container command ("client|setinfo"): those sent by
// clients, and those run by scripts.
func commandsOf(lines []string) (direct, lua map[string]bool) {
	direct, lua = map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		m := monitorLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		cmd := strings.ToLower(m[2])
		switch cmd {
		case "client", "cluster", "acl", "config", "command", "object", "memory", "script", "function":
			cmd += "|" + strings.ToLower(m[3])
		}
		if m[1] == "lua" {
			lua[cmd] = true
		} else {
			direct[cmd] = true
		}
	}
	return direct, lua
}

// invocation is one run of the CLI: a command and its arguments, and its
// exit status with every permission.
type invocation struct {
	args []string
	code int
}

// tool is the CLI command an invocation runs.
func (inv invocation) tool() string {
	for i := 0; i < len(inv.args); i++ {
		if a := inv.args[i]; strings.HasPrefix(a, "-") {
			i++ // --client-id ID
			continue
		}
		return inv.args[i]
	}
	return ""
}

// toolCommandJSON is an entry of doctor -o json's tool_commands.
type toolCommandJSON struct {
	Command  string   `json:"command"`
	NeededBy []string `json:"needed_by"`
	Allowed  bool     `json:"allowed"`
}

// Issue 39, item 3: the README's ACL lines, doctor's list of the commands
// the CLI and the exporter send themselves, and what they send agree,
// and a command the user lacks is always reported.
//
// On a server of its own, every CLI command and the exporter run as a
// user allowed everything while MONITOR records what they send: the
// commands each sends itself must be those doctor lists for it, or the
// library's (in the README's first line), every one doctor lists must be
// sent,
// and every command sent, by a client or a script, must be in the
// README's lines. Then each runs as the README's user without, in turn,
// each command doctor lists for it (and sweep --apply without each
// command of its script): it must fail (exit 2; the exporter: up 0, an
// INFO error counted or /-/ready 503) and name the command; and doctor,
// as that user, must warn or fail naming it.
func TestACLMatchesCommands(t *testing.T) {
	srv := startOwnServer(t)
	ctx := context.Background()
	admin := newRedisAt(t, srv.Addr())
	base := "aclcmd"
	n, n2, pc, idle, idlePC, m1, bad := base+"-n", base+"-n2", base+"-pc", base+"-idle", base+"-idlepc", base+"-m1", base+"-bad"
	old := time.Now().Add(-10 * 24 * time.Hour).UnixMilli()
	record := "\x10" + strings.Repeat("r", 16) + "\x01\x00\x00\x00"
	prepare := func() {
		t.Helper()
		keys, err := admin.Keys(ctx, "*"+base+"*").Result()
		require.NoError(t, err)
		if len(keys) > 0 {
			require.NoError(t, admin.Del(ctx, keys...).Err())
		}
		p := admin.Pipeline()
		for _, l := range []struct {
			name, typ, client string
			at                int64
		}{{n, "0", "", time.Now().UnixMilli()}, {n2, "0", "", 0}, {m1, "0", "", 0}, {pc, "1", "c1", time.Now().UnixMilli()},
			{idle, "0", "", old}, {idlePC, "1", "w1", old}} {
			p.HSet(ctx, l.name, "rate", "5", "interval", "60000", "type", l.typ)
			suffix := ""
			if l.client != "" {
				suffix = ":" + l.client
			}
			if l.at > 0 {
				p.Set(ctx, "{"+l.name+"}:value"+suffix, "4", 0)
				p.ZAdd(ctx, "{"+l.name+"}:permits"+suffix, redis.Z{Score: float64(l.at), Member: record})
			}
		}
		p.Set(ctx, bad, "not a hash", 0)
		_, err = p.Exec(ctx)
		require.NoError(t, err)
	}
	limits := limitsFile(t, "limits:\n  - name: "+n+"\n    rate: 5\n    interval: 1m\n"+
		"  - name: "+base+"-n3\n    rate: 5\n    interval: 1m\n"+
		"  - name: "+bad+"\n    rate: 5\n    interval: 1m\n"+
		"  - match: "+base+"-m*\n    rate: 5\n    interval: 1m\n")
	invocations := []invocation{
		{[]string{"set-rate", n, "--rate", "5", "--interval", "1m"}, 0},
		{[]string{"try-set-rate", n, "--rate", "5", "--interval", "1m"}, 1},
		{[]string{"update-rate", n, "--rate", "6", "--interval", "1m", "--keep-state"}, 0},
		{[]string{"config", n}, 0}, {[]string{"available", n}, 0}, {[]string{"acquire", n}, 0},
		{[]string{"release", n}, 0}, {[]string{"ttl", n}, 0}, {[]string{"exists", n}, 0},
		{[]string{"expire", n, "--ttl", "1h"}, 0}, {[]string{"expire", n, "--at", fmt.Sprint(time.Now().Add(24 * time.Hour).UnixMilli())}, 0},
		{[]string{"persist", n}, 1}, {[]string{"delete", n2}, 0},
		{[]string{"inspect", n}, 0}, {[]string{"watch", n, "--count", "1"}, 0}, {[]string{"explain", n, "-n", "1"}, 0},
		{[]string{"--client-id", "c1", "acquire", pc}, 0}, {[]string{"inspect", pc}, 0},
		{[]string{"plan", "-f", limits}, 1}, {[]string{"apply", "-f", limits}, 1},
		{[]string{"sweep", "--match", base + "-idle*", "--idle", "24h"}, 0},
		{[]string{"sweep", "--match", base + "-idle*", "--idle", "24h", "--apply", "--delete"}, 0},
		{[]string{"sweep", "--match", base + "-idle*", "--idle", "24h", "--apply", "--ttl", "1h"}, 0},
		{[]string{"exporter", "--match", base + "*"}, 0},
		{[]string{"doctor", n}, 0},
	}
	run := func(url string, inv invocation) result {
		t.Helper()
		if inv.tool() == "exporter" {
			return exporterOnce(t, url, inv.args[1:]...)
		}
		return cliEnv(t, []string{"REDIS_URL=" + url}, inv.args...)
	}

	// What each sends, as a user allowed everything.
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "acl-all", "reset", "on", ">pw", "~*", "&*", "+@all").Err())
	allURL := "redis://acl-all:pw@" + srv.Addr() + "/0"
	mon := startMonitor(t, srv.Addr())
	direct := make([]map[string]bool, len(invocations))
	seenBy := map[string]map[string]bool{}
	everything := map[string]bool{}
	var doctorList []toolCommandJSON
	for i, inv := range invocations {
		prepare()
		require.NoError(t, admin.Echo(ctx, fmt.Sprintf("begin-%d", i)).Err())
		r := run(allURL, inv)
		require.NoError(t, admin.Echo(ctx, fmt.Sprintf("end-%d", i)).Err())
		require.Equal(t, inv.code, r.code, "%v: stdout %q stderr %q", inv.args, r.stdout, r.stderr)
		mon.until(t, fmt.Sprintf("begin-%d", i))
		d, lua := commandsOf(mon.until(t, fmt.Sprintf("end-%d", i)))
		direct[i] = d
		if seenBy[inv.tool()] == nil {
			seenBy[inv.tool()] = map[string]bool{}
		}
		for c := range d {
			seenBy[inv.tool()][c] = true
			everything[c] = true
		}
		for c := range lua {
			everything[c] = true
		}
		if inv.tool() == "doctor" {
			r = cliEnv(t, []string{"REDIS_URL=" + allURL}, "doctor", n, "-o", "json")
			var out struct {
				ToolCommands []toolCommandJSON `json:"tool_commands"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
			doctorList = out.ToolCommands
		}
	}
	require.NotEmpty(t, doctorList)
	declared := map[string]map[string]bool{} // tool -> commands doctor lists for it
	listed := map[string]bool{}
	for _, tc := range doctorList {
		listed[tc.Command] = true
		require.True(t, tc.Allowed, "%s allowed to a user allowed everything", tc.Command)
		for _, tool := range tc.NeededBy {
			if declared[tool] == nil {
				declared[tool] = map[string]bool{}
			}
			declared[tool][tc.Command] = true
		}
	}
	// The commands the library sends outside its scripts (Exists,
	// Config, RemainTimeToLive, Delete, its clock check and eviction
	// read) are in the README's first line, which TestLeastPrivilegeACL
	// and the library's own tests hold; info is optional to it. go-redis
	// sets up connections with hello (or auth) and client setinfo.
	library := map[string]bool{"info": true, "hello": true, "auth": true, "client|setinfo": true}
	for _, w := range aclLinesFromREADME(t)[0] {
		if c, ok := strings.CutPrefix(w, "+"); ok {
			library[c] = true
		}
	}
	for i, inv := range invocations {
		tool := inv.tool()
		for c := range direct[i] {
			if tool == "doctor" {
				require.True(t, listed[c] || library[c], "doctor sends %s, which its list lacks", c)
				continue
			}
			require.True(t, declared[tool][c] || declared["every command"][c] || library[c],
				"%v sends %s, which doctor does not list for %s", inv.args, c, tool)
		}
	}
	for tool, cmds := range declared {
		if tool == "every command" {
			continue
		}
		require.NotNil(t, seenBy[tool], "doctor lists commands for %s, which this test does not run", tool)
		for c := range cmds {
			require.True(t, seenBy[tool][c], "doctor lists %s for %s, which does not send it", c, tool)
		}
	}
	readme := map[string]bool{}
	for _, words := range aclLinesFromREADME(t) {
		for _, w := range words {
			if c, ok := strings.CutPrefix(w, "+"); ok {
				readme[c] = true
			}
		}
	}
	connection := map[string]bool{"hello": true, "auth": true, "client|setinfo": true}
	var missing, unused []string
	for c := range everything {
		if !readme[c] && !connection[c] {
			missing = append(missing, c)
		}
	}
	for c := range readme {
		if !everything[c] && c != "select" { // select: a database other than 0
			unused = append(unused, c)
		}
	}
	sort.Strings(missing)
	sort.Strings(unused)
	require.Empty(t, missing, "sent, and not in the README's ACL lines")
	require.Empty(t, unused, "in the README's ACL lines, and sent by none of the commands run")
	for c := range listed {
		require.True(t, readme[c], "doctor lists %s, which the README's ACL lines lack", c)
	}

	// Everything works as the README's user.
	readmeURL := readmeUser(t, srv.Addr(), "acl-readme")
	for _, inv := range invocations {
		prepare()
		r := run(readmeURL, inv)
		require.Equal(t, inv.code, r.code, "%v as the README's user: stdout %q stderr %q", inv.args, r.stdout, r.stderr)
	}

	// Each command taken away is reported, by the commands that send it
	// and by doctor.
	mentions := func(r result, c string) bool {
		return strings.Contains(strings.ToLower(r.stdout+r.stderr), c)
	}
	failed := func(inv invocation, r result) bool {
		if inv.tool() == "doctor" || inv.tool() == "exporter" {
			return r.code != 0
		}
		return r.code == 2
	}
	checks := 0
	for i, inv := range invocations {
		tool := inv.tool()
		var without []string
		for c := range direct[i] {
			if declared[tool][c] || declared["every command"][c] && tool != "doctor" {
				without = append(without, c)
			}
		}
		if strings.Contains(strings.Join(inv.args, " "), "--apply") && tool == "sweep" {
			write := "pexpire"
			if strings.Contains(strings.Join(inv.args, " "), "--delete") {
				write = "del"
			}
			without = append(without, write) // run by sweep's script
		}
		if tool == "doctor" {
			without = nil
			for c := range listed {
				without = append(without, c)
			}
		}
		sort.Strings(without)
		for _, c := range without {
			url := readmeUser(t, srv.Addr(), "acl-no-"+strings.ReplaceAll(c, "|", "-"), "-"+c)
			prepare()
			r := run(url, inv)
			require.True(t, failed(inv, r) && mentions(r, c), "%v without %s: exit %d, stdout %q stderr %q", inv.args, c, r.code, clip(r.stdout), clip(r.stderr))
			checks++
			if tool == "sweep" {
				require.Equal(t, int64(2), admin.Exists(ctx, idle, idlePC).Val(), "%v without %s acted", inv.args, c)
			}
		}
	}
	t.Logf("%d commands sent in all, %d listed by doctor; %d runs without one of them, each reported", len(everything), len(listed), checks)
}

// exporterOnce runs the exporter with --url redisURL and args, scrapes it
// once and asks /-/ready, then stops it. Its result holds the page and
// the readiness answer on stdout, its stderr, and code 0 when the reading
// succeeded with INFO, and Redis answered PING; else 1.
func exporterOnce(t *testing.T, redisURL string, args ...string) result {
	t.Helper()
	var stderr redisproc.SyncBuffer
	cmd := exec.Command(bin, append([]string{"exporter", "--url", redisURL, "--web.listen-address", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "stderr %q", stderr.String())
	metrics, ok := strings.CutPrefix(strings.TrimSpace(line), "serving ")
	require.True(t, ok, "first line %q", line)
	get := func(url string) (int, []byte) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	_, page := get(metrics)
	status, ready := get(strings.TrimSuffix(metrics, "/metrics") + "/-/ready")
	got := samples(t, page)
	code := 0
	if got["ratelimiter_exporter_up"] != 1 || got["ratelimiter_exporter_info_errors_total"] != 0 || status != http.StatusOK {
		code = 1
	}
	return result{stdout: string(page) + string(ready), stderr: stderr.String(), code: code}
}

// clip shortens s for a failure message.
func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + " ... " + s[len(s)-300:]
	}
	return s
}
