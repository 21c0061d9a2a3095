package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMasterName is the master name the Sentinel setup monitors.
const SentinelMasterName = "mymaster"

// Sentinel is a running Sentinel setup started by topologies/redis-sentinel.sh:
// one master, two replicas, three sentinels (quorum 2,
// down-after-milliseconds 1000, failover-timeout 3000).
type Sentinel struct {
	ps    *procSet
	proxy *linkProxy // nil unless StartSentinelBehindProxy
}

// StartSentinel starts the setup and registers its stop with t.Cleanup. It
// returns when both replicas are in sync and every sentinel knows the master,
// both replicas and the two other sentinels. A missing binary skips t, or
// fails it under CI; -short skips it, and so does a test binary whose Main
// started no server (Need).
func StartSentinel(ctx context.Context, t testing.TB) *Sentinel {
	t.Helper()
	SkipIfShort(t, "Sentinel")
	Need(t)
	needBinaries(t, "redis-server", "redis-sentinel", "redis-cli", "paste")
	return &Sentinel{ps: startProcSet(ctx, t, "redis-sentinel.sh", "", "SENTINEL_MASTER_NAME="+SentinelMasterName)}
}

// StartSentinelBehindProxy is StartSentinel with the first master behind
// a TCP proxy of the harness: replicas, sentinels and clients reach it only
// through the proxy, so that FreezeReplication can make the replicas fall
// behind. Kill of that master also closes the proxy, dropping what it held
// back. Replicas promoted later are reached directly.
func StartSentinelBehindProxy(ctx context.Context, t testing.TB) *Sentinel {
	t.Helper()
	SkipIfShort(t, "Sentinel")
	Need(t)
	needBinaries(t, "redis-server", "redis-sentinel", "redis-cli", "paste")
	dir := t.TempDir()
	p, err := newLinkProxy(masterPortFile(filepath.Join(dir, "master", "port")))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(p.close) // after the stop below (cleanups run last-in first-out)
	ps := startProcSet(ctx, t, "redis-sentinel.sh", dir,
		"SENTINEL_MASTER_NAME="+SentinelMasterName, "SENTINEL_MASTER_VIA="+strconv.Itoa(p.port()))
	return &Sentinel{ps: ps, proxy: p}
}

// FreezeReplication holds back, from now on, everything the proxied master
// sends to its replicas; clients are still served. It needs
// StartSentinelBehindProxy.
func (s *Sentinel) FreezeReplication() error {
	if s.proxy == nil {
		return errors.New("redistest: FreezeReplication needs StartSentinelBehindProxy")
	}
	s.proxy.freeze()
	return nil
}

// HeldBackBytes returns how much of the replication stream the proxy held
// back since FreezeReplication.
func (s *Sentinel) HeldBackBytes() int {
	if s.proxy == nil {
		return 0
	}
	return s.proxy.heldBytes()
}

// MasterName is the name to put in redis.FailoverOptions.MasterName.
func (s *Sentinel) MasterName() string { return SentinelMasterName }

// Dir is the directory holding the processes' files (configs, logs).
func (s *Sentinel) Dir() string { return s.ps.dir }

// Stop stops every process. Tests need not call it (t.Cleanup does).
func (s *Sentinel) Stop() { s.ps.stop() }

// Kill sends SIGKILL to the process and waits until its port is closed.
// Killing the proxied master also closes the proxy.
func (s *Sentinel) Kill(n Node) error {
	err := s.ps.kill(n)
	if s.proxy != nil && n.Role == "master" {
		s.proxy.close()
	}
	return err
}

// SentinelAddrs returns the sentinels' addresses, for
// redis.FailoverOptions.SentinelAddrs.
func (s *Sentinel) SentinelAddrs() []string {
	var a []string
	for _, n := range s.ps.list() {
		if n.Role == "sentinel" {
			a = append(a, n.Addr)
		}
	}
	return a
}

// Servers returns the redis-server processes (master and replicas, roles at
// start).
func (s *Sentinel) Servers() []Node {
	var a []Node
	for _, n := range s.ps.list() {
		if n.Role != "sentinel" {
			a = append(a, n)
		}
	}
	return a
}

// NodeByAddr finds a process by host:port (the proxy's address names the
// master behind it).
func (s *Sentinel) NodeByAddr(addr string) (Node, bool) {
	if s.proxy != nil && addr == s.proxy.addr() {
		for _, n := range s.ps.list() {
			if n.Role == "master" {
				return n, true
			}
		}
	}
	for _, n := range s.ps.list() {
		if n.Addr == addr {
			return n, true
		}
	}
	return Node{}, false
}

// Master returns the master as a living sentinel reports it
// (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *Sentinel) Master(ctx context.Context) (Node, error) {
	var first error
	for _, n := range s.ps.list() {
		if n.Role != "sentinel" || s.ps.isKilled(n) {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMasterName).Result()
		sc.Close()
		if err != nil || len(addr) != 2 {
			if first == nil {
				first = fmt.Errorf("sentinel %s: %v %v", n.Addr, addr, err)
			}
			continue
		}
		m, ok := s.NodeByAddr(net.JoinHostPort(addr[0], addr[1]))
		if !ok {
			return Node{}, fmt.Errorf("redistest: sentinel names unknown master %s:%s", addr[0], addr[1])
		}
		return m, nil
	}
	if first == nil {
		first = errors.New("redistest: no living sentinel")
	}
	return Node{}, first
}

// WaitFailover polls (every 50 ms, until ctx is done) until every living
// sentinel names a master other than old, that master answers ROLE as master,
// and at least one replica is connected to it.
func (s *Sentinel) WaitFailover(ctx context.Context, old Node) (Node, error) {
	var last error
	for {
		m, err := s.newMaster(ctx, old)
		if err == nil {
			return m, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return Node{}, fmt.Errorf("redistest: no failover: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Sentinel) newMaster(ctx context.Context, old Node) (Node, error) {
	var m Node
	for _, n := range s.ps.list() {
		if n.Role != "sentinel" || s.ps.isKilled(n) {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMasterName).Result()
		sc.Close()
		if err != nil {
			return Node{}, err
		}
		a := net.JoinHostPort(addr[0], addr[1])
		if o, ok := s.NodeByAddr(a); ok && o.Addr == old.Addr {
			return Node{}, fmt.Errorf("sentinel %s still names %s", n.Addr, a)
		}
		if m.Addr != "" && m.Addr != a {
			return Node{}, fmt.Errorf("sentinels disagree: %s vs %s", m.Addr, a)
		}
		var ok bool
		if m, ok = s.NodeByAddr(a); !ok {
			return Node{}, fmt.Errorf("unknown master %s", a)
		}
	}
	err := nodeClient(ctx, m, func(r *redis.Client) error {
		v, err := r.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(v) < 3 || v[0] != "master" {
			return fmt.Errorf("%s is not master yet", m.Addr)
		}
		if reps, _ := v[2].([]interface{}); len(reps) == 0 {
			return fmt.Errorf("%s has no replica yet", m.Addr)
		}
		return nil
	})
	return m, err
}

// ReplicaPorts returns the ports of the servers that are currently replicas
// of m (from ROLE on m).
func (s *Sentinel) ReplicaPorts(ctx context.Context, m Node) ([]int, error) {
	var ports []int
	err := nodeClient(ctx, m, func(r *redis.Client) error {
		v, err := r.Do(ctx, "ROLE").Slice()
		if err != nil {
			return err
		}
		if len(v) < 3 {
			return errors.New("redistest: short ROLE reply")
		}
		reps, _ := v[2].([]interface{})
		for _, e := range reps {
			f, _ := e.([]interface{})
			if len(f) >= 2 {
				p, _ := strconv.Atoi(fmt.Sprint(f[1]))
				ports = append(ports, p)
			}
		}
		return nil
	})
	return ports, err
}
