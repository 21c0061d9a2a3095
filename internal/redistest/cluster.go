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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	return strings.Contains(s, "redis") && strings.Contains(s, ":"+strconv.Itoa(n.Port))
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

// Cluster is a running 6-node Redis Cluster (3 masters, 3 replicas,
// cluster-node-timeout 1000 ms) started by topologies/redis-cluster.sh.
type Cluster struct {
	ps *procSet
}

// StartCluster starts a cluster and registers its stop with t.Cleanup. It
// returns only when the cluster is healthy: cluster_state:ok everywhere and
// every replica in sync with its master. A missing binary skips t, or fails
// it under CI; so does -short, the contributors' quick loop.
func StartCluster(ctx context.Context, t testing.TB) *Cluster {
	t.Helper()
	SkipIfShort(t, "Redis Cluster")
	needBinaries(t, "redis-server", "redis-cli")
	return &Cluster{ps: startProcSet(ctx, t, "redis-cluster.sh", "")}
}

// Dir is the directory holding the nodes' files (configs, logs).
func (c *Cluster) Dir() string { return c.ps.dir }

// Nodes returns every node (roles at start).
func (c *Cluster) Nodes() []Node { return c.ps.list() }

// Addrs returns the address of every node, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.ps.list() {
		a = append(a, n.Addr)
	}
	return a
}

// Stop stops every node. Tests need not call it (t.Cleanup does).
func (c *Cluster) Stop() { c.ps.stop() }

// Kill sends SIGKILL to the node and waits until its port is closed.
func (c *Cluster) Kill(n Node) error { return c.ps.kill(n) }

// Alive returns the nodes not killed by Kill.
func (c *Cluster) Alive() []Node {
	var a []Node
	for _, n := range c.ps.list() {
		if !c.ps.isKilled(n) {
			a = append(a, n)
		}
	}
	return a
}

// NodeByAddr finds a node by host:port.
func (c *Cluster) NodeByAddr(addr string) (Node, bool) {
	for _, n := range c.ps.list() {
		if n.Addr == addr {
			return n, true
		}
	}
	return Node{}, false
}

// nodeClient runs fn with a single-node client for n.
func nodeClient(ctx context.Context, n Node, fn func(*redis.Client) error) error {
	rdb := redis.NewClient(&redis.Options{
		Addr:        n.Addr,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: -1, PoolSize: 1,
	})
	defer rdb.Close()
	return fn(rdb)
}

// anyAlive runs fn on the first living node for which it succeeds.
func (c *Cluster) anyAlive(ctx context.Context, fn func(*redis.Client) error) error {
	var first error
	for _, n := range c.Alive() {
		err := nodeClient(ctx, n, fn)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("redistest: no living node")
	}
	return first
}

// KeySlot asks the cluster (CLUSTER KEYSLOT) for the hash slot of key.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	var slot int64
	err := c.anyAlive(ctx, func(r *redis.Client) error {
		var err error
		slot, err = r.ClusterKeySlot(ctx, key).Result()
		return err
	})
	return int(slot), err
}

// MasterForSlot returns the node that a living node's CLUSTER SLOTS names as
// the master of slot. Right after a failover nodes may disagree for a moment;
// WaitHealthy first.
func (c *Cluster) MasterForSlot(ctx context.Context, slot int) (Node, error) {
	var addr string
	err := c.anyAlive(ctx, func(r *redis.Client) error {
		slots, err := r.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
				addr = s.Nodes[0].Addr
				return nil
			}
		}
		return fmt.Errorf("redistest: slot %d not served", slot)
	})
	if err != nil {
		return Node{}, err
	}
	n, ok := c.NodeByAddr(addr)
	if !ok {
		return Node{}, fmt.Errorf("redistest: unknown node %s", addr)
	}
	return n, nil
}

// MasterForKey returns the master that owns key's slot.
func (c *Cluster) MasterForKey(ctx context.Context, key string) (Node, error) {
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return Node{}, err
	}
	return c.MasterForSlot(ctx, slot)
}

// Masters returns the current masters as the living nodes report them
// (ROLE on each).
func (c *Cluster) Masters(ctx context.Context) ([]Node, error) {
	var ms []Node
	for _, n := range c.Alive() {
		var role string
		err := nodeClient(ctx, n, func(r *redis.Client) error {
			v, err := r.Do(ctx, "ROLE").Slice()
			if err != nil {
				return err
			}
			if len(v) == 0 {
				return errors.New("redistest: empty ROLE reply")
			}
			role, _ = v[0].(string)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if role == "master" {
			ms = append(ms, n)
		}
	}
	return ms, nil
}

// ReplicaOf returns the living replica whose master is m.
func (c *Cluster) ReplicaOf(ctx context.Context, m Node) (Node, error) {
	for _, n := range c.Alive() {
		if n.Addr == m.Addr {
			continue
		}
		var host string
		var port int64
		err := nodeClient(ctx, n, func(r *redis.Client) error {
			v, err := r.Do(ctx, "ROLE").Slice()
			if err != nil {
				return err
			}
			if len(v) >= 3 && v[0] == "slave" {
				host, _ = v[1].(string)
				port, _ = v[2].(int64)
			}
			return nil
		})
		if err != nil {
			return Node{}, err
		}
		if net.JoinHostPort(host, strconv.FormatInt(port, 10)) == m.Addr {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("redistest: no replica of %s", m.Addr)
}

// WaitHealthy polls (every 50 ms, until ctx is done) until every living node
// reports cluster_state:ok with all 16384 slots served and every slot's
// master, as each living node sees it, is a living node.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not healthy: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	alive := map[string]bool{}
	for _, n := range c.Alive() {
		alive[n.Addr] = true
	}
	for _, n := range c.Alive() {
		err := nodeClient(ctx, n, func(r *redis.Client) error {
			info, err := r.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return fmt.Errorf("%s: cluster_state not ok", n.Addr)
			}
			slots, err := r.ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			for _, s := range slots {
				if len(s.Nodes) == 0 || !alive[s.Nodes[0].Addr] {
					return fmt.Errorf("%s: slots %d-%d still on a dead master", n.Addr, s.Start, s.End)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
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

// Restart starts a node that Kill crashed again (same port, same
// nodes.conf, empty data). Once a replica has taken over its slots, the
// node rejoins as that replica's replica. Use WaitHealthy and
// WaitReplicasSynced afterwards.
func (c *Cluster) Restart(ctx context.Context, n Node) (Node, error) { return c.ps.restart(ctx, n) }

// WaitReplicasSynced polls (every 50 ms, until ctx is done) until every
// living master has at least one connected replica and every living
// replica reports master_link_status:up.
func (c *Cluster) WaitReplicasSynced(ctx context.Context) error {
	var last error
	for {
		if last = c.replicasSynced(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: replicas not in sync: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) replicasSynced(ctx context.Context) error {
	for _, n := range c.Alive() {
		err := nodeClient(ctx, n, func(r *redis.Client) error {
			info, err := r.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			switch {
			case strings.Contains(info, "role:master"):
				if strings.Contains(info, "connected_slaves:0") {
					return fmt.Errorf("%s: master without replica", n.Addr)
				}
			case !strings.Contains(info, "master_link_status:up"):
				return fmt.Errorf("%s: replica link not up", n.Addr)
			case !strings.Contains(info, "master_sync_in_progress:0"):
				return fmt.Errorf("%s: replica still syncing", n.Addr)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
