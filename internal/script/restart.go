package script

import (
	"bufio"
	"context"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Restarts and replaced masters (docs/operations.md, "Restarts, failovers
// and clock steps"). A server restarted from a snapshot, or a replica
// promoted before it received the last writes, holds an older window
// than the one its clients spent, and a server whose clock jumped ahead
// sees records expire early: either way the permits granted in the last
// interval can be granted again. A Conn notices through the script cache:
// a restarted or promoted server holds none of the library's scripts, so
// its first EVALSHA answers NOSCRIPT before anything is granted. The Conn
// then reads that server's run_id and role (INFO); when they differ from
// what it saw serving those keys before, it records an event, and each
// limiter's next granting call through the Conn first runs lua/fill.lua
// for it: a record of the rate stamped at the event, so that nothing is
// granted for one interval after it, as after eviction. The record's
// bytes come from the new run_id, so every Go Client that sees the event
// writes the same record and ZADD NX keeps one.

// maxFilled bounds the limiters a Conn remembers as checked against the
// latest event; the set starts afresh when it is reached (a limiter
// checked again writes the same record, which ZADD NX leaves alone).
const maxFilled = 4096

// serverSeen is what identifies the process serving a key: a restart
// changes run_id; a promoted replica keeps its run_id but changes role.
type serverSeen struct{ runID, role string }

type restartEvent struct {
	at   time.Time // when the Conn saw it (monotonic)
	gen  int64
	seed uint64 // the fill record's random part
}

// restarts is what a Conn knows of the servers behind its keys.
type restarts struct {
	mu     sync.Mutex
	seen   map[string]serverSeen   // node address ("" for a single master) -> last seen
	events map[string]restartEvent // node address -> its latest event
	gen    atomic.Int64            // events so far; 0: none, the hot path
	filled sync.Map                // config key -> int64, the gen it was checked at
	nFill  atomic.Int64
}

// observe records that s serves addr and reports whether that is an
// event: a different run_id or role than last seen there, or, on a
// cluster, a node first met after the Conn's first reading of all nodes
// (a replica promoted that it never saw). A baseline reading records
// without an event: the servers as the Conn first finds them.
func (r *restarts) observe(addr string, s serverSeen, baseline bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.events = map[string]serverSeen{}, map[string]restartEvent{}
	}
	prev, known := r.seen[addr]
	r.seen[addr] = s
	if baseline || (known && prev == s) {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(addr + "\x00" + s.runID + "\x00" + s.role))
	r.record(addr, h.Sum64())
	return true
}

// stepped records an event on addr for a clock step (clockstep.go). No
// two Clients see a step at the same moment: the seed is the Client's
// own, and each one's fill holds the rate.
func (r *restarts) stepped(addr string, seed uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.events = map[string]serverSeen{}, map[string]restartEvent{}
	}
	r.record(addr, seed)
}

// record notes an event on addr now; the caller holds r.mu.
func (r *restarts) record(addr string, seed uint64) {
	r.events[addr] = restartEvent{at: time.Now(), gen: r.gen.Add(1), seed: seed}
}

// known reports whether any server has been recorded.
func (r *restarts) known() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen) > 0
}

// latest returns addr's latest event if it is newer than gen.
func (r *restarts) latest(addr string, gen int64) (restartEvent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.events[addr]
	return e, ok && e.gen > gen
}

// parseServer reads run_id and role from INFO's text ("" when absent).
func parseServer(info string) serverSeen {
	var s serverSeen
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		switch {
		case !ok:
		case k == "run_id":
			s.runID = v
		case k == "role":
			s.role = v
		}
	}
	return s
}

// nodeFor returns the client that serves key and its address: on a
// ClusterClient the key's master, elsewhere the Conn's client and ""
// (one master). ok is false on a Ring, whose shard for a key go-redis
// does not tell: restarts behind a Ring go unnoticed.
func (c *Conn) nodeFor(ctx context.Context, key string) (redis.UniversalClient, string, bool) {
	switch r := c.rdb.(type) {
	case *redis.ClusterClient:
		n, err := r.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", false
		}
		return n, n.Options().Addr, true
	case *redis.Ring:
		return nil, "", false
	}
	return c.rdb, "", true
}

// noteServer records what a plain INFO of the Conn's server said (the
// eviction read's, eviction.go): on a single master the first sighting,
// and on every later read a change of process; on a cluster, the first
// read takes every node's (baseline).
func (c *Conn) noteServer(ctx context.Context, info string) {
	switch r := c.rdb.(type) {
	case *redis.Client:
		c.restart.observe("", parseServer(info), !c.restart.known())
	case *redis.ClusterClient:
		if !c.restart.known() {
			c.baseline(ctx, r)
		}
	}
}

// baseline records every node of cluster cc as it serves now.
func (c *Conn) baseline(ctx context.Context, cc *redis.ClusterClient) {
	_ = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
		if info, err := n.Info(ctx).Result(); err == nil {
			c.restart.observe(n.Options().Addr, parseServer(info), true)
		}
		return nil
	})
}

// noticeNoScript is called when a script call for key answered NOSCRIPT:
// it reads the server's run_id and role and records an event when they
// changed. On a cluster, the first look reads every node first, so that
// a node met later counts as new only when it is. An INFO that fails
// (the user lacks +info) records nothing: restarts then go unnoticed.
func (c *Conn) noticeNoScript(ctx context.Context, key string) {
	node, addr, ok := c.nodeFor(ctx, key)
	if !ok {
		return
	}
	baseline := !c.restart.known()
	if cc, isCluster := c.rdb.(*redis.ClusterClient); isCluster && baseline {
		c.baseline(ctx, cc)
	}
	info, err := node.Info(ctx).Result() // plain INFO: Redis 6.2 refuses several sections in one call
	if err != nil {
		return
	}
	if c.restart.observe(addr, parseServer(info), baseline) {
		c.watch.last.Store(nil) // another server: its clock is read anew (clockstep.go)
	}
}

// fillDue runs lua/fill.lua for each limiter (K1..K5) whose server had an
// event since the limiter was last checked. It costs one atomic load
// while no event happened.
func (c *Conn) fillDue(ctx context.Context, limiters [][]string) error {
	g := c.restart.gen.Load()
	if g == 0 {
		return nil
	}
	for _, k := range limiters {
		checked, _ := c.restart.filled.Load(k[0])
		at, _ := checked.(int64)
		if at == g {
			continue
		}
		_, addr, ok := c.nodeFor(ctx, k[0])
		if !ok {
			continue
		}
		if e, ok := c.restart.latest(addr, at); ok {
			rec := wire.NewSeeded(c.format, wire.FillTag, e.seed, 0)
			since := time.Since(e.at).Milliseconds()
			if err := scriptFill.Run(ctx, c.rdb, k, c.Stamp(), rec[:len(rec)-4], since).Err(); err != nil {
				return err
			}
		}
		if c.restart.nFill.Add(1) > maxFilled {
			c.restart.filled.Clear()
			c.restart.nFill.Store(1)
		}
		c.restart.filled.Store(k[0], g)
	}
	return nil
}

// runGranting runs s, a script that may grant permits of limiters (each
// K1..K5), on keys: EVALSHA, and on NOSCRIPT (an empty script cache: a
// restart, a promoted replica, SCRIPT FLUSH) a look at the server and the
// fills that calls for, then EVAL.
func (c *Conn) runGranting(ctx context.Context, s *redis.Script, keys []string, args []any, limiters [][]string) (any, error) {
	if err := c.fillDue(ctx, limiters); err != nil {
		return nil, err
	}
	v, err := c.evalSha(ctx, s, keys, args).Result()
	if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return v, err
	}
	if err := c.afterNoScript(ctx, keys[0], limiters); err != nil {
		return nil, err
	}
	v, err = s.Eval(ctx, c.rdb, keys, args...).Result()
	if err == nil {
		c.pipe.reloaded(s) // the restart checks are done: batches may go again
	}
	return v, err
}

// afterNoScript looks at the server of key after a NOSCRIPT and fills
// the limiters due.
func (c *Conn) afterNoScript(ctx context.Context, key string, limiters [][]string) error {
	c.noticeNoScript(ctx, key)
	return c.fillDue(ctx, limiters)
}

// parts splits keys, K1..K5 of each limiter in turn, into limiters.
func parts(keys []string) [][]string {
	out := make([][]string, 0, len(keys)/5)
	for i := 0; i+5 <= len(keys); i += 5 {
		out = append(out, keys[i:i+5])
	}
	return out
}
