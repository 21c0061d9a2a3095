package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a running 6-node Redis Cluster (3 masters, 3 replicas,
// cluster-node-timeout 1000 ms) started by topologies/redis-cluster.sh.
type Cluster struct {
	ps *procSet
}

// StartCluster starts a cluster and registers its stop with t.Cleanup. It
// returns only when the cluster is healthy: cluster_state:ok everywhere and
// every replica in sync with its master. A missing binary skips t, or fails
// it under CI; -short (the contributors' quick loop) skips it, and so does a
// test binary whose Main started no server (Need).
func StartCluster(ctx context.Context, t testing.TB) *Cluster {
	t.Helper()
	SkipIfShort(t, "Redis Cluster")
	Need(t)
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
