package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/goredisson/ratelimiter/internal/redisproc"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Shell-started topologies (topologies/*.sh): a set of redis-server and
// redis-sentinel processes that the tests start, kill, restart and stop.

// Node is one process started by topologies/redis-cluster.sh or
// topologies/redis-sentinel.sh.
type Node struct {
	Addr string // 127.0.0.1:port
	Port int
	PID  int
	Role string // role at start: master, replica or sentinel
}

// scriptPath returns the absolute path of topologies/NAME in this repository.
func scriptPath(name string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("redistest: cannot locate source directory")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "topologies", name)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// needBinaries skips t (or fails it under CI, see Required) when one of the
// binaries is missing.
func needBinaries(t testing.TB, bins ...string) {
	t.Helper()
	for _, b := range append([]string{"bash", "timeout"}, bins...) {
		if _, err := exec.LookPath(b); err != nil {
			msg := fmt.Sprintf("redistest: %s not found on PATH (apt-get install -y redis-server redis-sentinel redis-tools)", b)
			if Required() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// procSet runs a start/stop script on a directory and owns the processes it
// started.
type procSet struct {
	script string
	dir    string
	nodes  []Node

	mu     sync.Mutex
	killed map[int]bool // pid -> killed by Kill

	stopOnce sync.Once
}

// startProcSet runs script's start on dir (a fresh t.TempDir() when empty).
func startProcSet(ctx context.Context, t testing.TB, script, dir string, env ...string) *procSet {
	t.Helper()
	path, err := scriptPath(script)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	becomeSubreaper()
	if dir == "" {
		dir = t.TempDir()
	}
	ps := &procSet{script: path, dir: dir, killed: map[int]bool{}}
	// Register the stop before starting: a start that fails half-way has
	// already cleaned up after itself, and stop is harmless then.
	t.Cleanup(ps.stop)
	// Runs before the stop: on failure, show what the servers logged.
	t.Cleanup(func() {
		if t.Failed() {
			ps.dumpLogs(t)
		}
	})
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		cmd := exec.CommandContext(ctx, "bash", path, "start", dir)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			lastErr = fmt.Errorf("%s start: %v\n%s%s", script, err, out.String(), errb.String())
			ps.runStop()
			if ctx.Err() != nil {
				break
			}
			continue
		}
		nodes, err := parseNodes(filepath.Join(dir, "nodes"))
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		ps.nodes = nodes
		return ps
	}
	t.Fatalf("redistest: %v", lastErr)
	return nil
}

func parseNodes(path string) ([]Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var nodes []Node
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		port, err1 := strconv.Atoi(fields[0])
		pid, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("redistest: bad line %q in %s", sc.Text(), path)
		}
		nodes = append(nodes, Node{
			Addr: net.JoinHostPort("127.0.0.1", fields[0]),
			Port: port,
			PID:  pid,
			Role: fields[2],
		})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("redistest: no nodes in %s", path)
	}
	return nodes, nil
}

// stop runs the script's stop command (SIGTERM, then SIGKILL after 3 s, by
// pidfile) and collects the processes.
func (ps *procSet) stop() { ps.stopOnce.Do(ps.runStop) }

func (ps *procSet) runStop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", ps.script, "stop", ps.dir)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "redistest: %s stop %s: %v\n%s", filepath.Base(ps.script), ps.dir, err, out)
		// Last resort: never leave a process behind.
		for _, n := range ps.list() {
			if isOurProcess(n) {
				_ = syscall.Kill(n.PID, syscall.SIGKILL)
			}
		}
	}
	for _, n := range ps.list() {
		reap(n.PID, time.Second)
	}
}

// dumpLogs logs the last lines of every process's log file.
func (ps *procSet) dumpLogs(t testing.TB) {
	logs, _ := filepath.Glob(filepath.Join(ps.dir, "*", "redis.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- %s (last %d lines)\n%s", f, len(lines), strings.Join(lines, "\n"))
	}
}

// isOurProcess reports whether n.PID is still the redis process serving
// n.Port (guards against a reused pid).
func isOurProcess(n Node) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n.PID))
	if err != nil {
		return false
	}
	s := string(b)
	named := strings.Contains(s, "redis") || strings.Contains(s, "valkey") ||
		strings.Contains(s, filepath.Base(redisproc.Binary()))
	return named && strings.Contains(s, ":"+strconv.Itoa(n.Port))
}

// kill sends SIGKILL to n (a crash: no SHUTDOWN, no final sync to the
// replicas) and waits until its port refuses connections.
func (ps *procSet) kill(n Node) error {
	if !isOurProcess(n) {
		return fmt.Errorf("redistest: pid %d is not the redis process on port %d", n.PID, n.Port)
	}
	if err := syscall.Kill(n.PID, syscall.SIGKILL); err != nil {
		return err
	}
	ps.mu.Lock()
	ps.killed[n.PID] = true
	ps.mu.Unlock()
	reap(n.PID, 2*time.Second)
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", n.Addr, 100*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redistest: %s still accepts connections after SIGKILL", n.Addr)
}

func (ps *procSet) list() []Node {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]Node(nil), ps.nodes...)
}

func (ps *procSet) isKilled(n Node) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.killed[n.PID]
}

// restart starts again, with its own config file and on its own port, a
// redis process that Kill crashed, as a supervisor would. Its data is gone
// (persistence is off); a cluster node keeps its identity (nodes.conf) and
// rejoins as a replica when a replica took over its slots meanwhile.
func (ps *procSet) restart(ctx context.Context, n Node) (Node, error) {
	if !ps.isKilled(n) {
		return Node{}, fmt.Errorf("redistest: %s was not killed", n.Addr)
	}
	dirs, _ := filepath.Glob(filepath.Join(ps.dir, "*", "port"))
	var dir string
	for _, f := range dirs {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(n.Port) {
			dir = filepath.Dir(f)
		}
	}
	if dir == "" {
		return Node{}, fmt.Errorf("redistest: no directory for %s", n.Addr)
	}
	bin := "redis-server"
	if n.Role == "sentinel" {
		bin = "redis-sentinel"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return Node{}, err
	}
	log, err := os.OpenFile(filepath.Join(dir, "redis.log.stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Node{}, err
	}
	defer log.Close()
	cmd := exec.Command(path, filepath.Join(dir, "redis.conf"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return Node{}, err
	}
	go func() { _ = cmd.Wait() }() // reaps it once the stop script has killed it
	n.PID = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(n.PID)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return Node{}, err
	}
	ps.mu.Lock()
	for i := range ps.nodes {
		if ps.nodes[i].Addr == n.Addr {
			ps.nodes[i].PID = n.PID
		}
	}
	ps.mu.Unlock()
	for i := 0; ; i++ {
		if err := Ping(ctx, n.Addr); err == nil {
			return n, nil
		}
		if i >= 500 {
			return n, fmt.Errorf("redistest: restarted %s does not answer PING", n.Addr)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
