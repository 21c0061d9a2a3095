package script

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/engine"
)

// Script calls for different limiters share writes to Redis (docs/
// combining.md, "Many limiters"). Combining (internal/engine) joins the
// calls of one limiter; with many limiters, each seldom hit twice at
// once, it never engages, and every decision cost Redis a read and a
// write of its own. So a Conn on one server (a redis.Client, Sentinel's
// too) lets at most pipeFlights acquire calls be in flight at once: a
// call that finds fewer is sent at once, as go-redis would send it; a
// call that finds them all out waits, and when a flight lands every call
// that waited goes out in one go-redis pipeline. Nothing waits while
// Redis has little to do, and under load Redis reads many calls in one
// read and answers them in one write. A Cluster or Ring client sends each
// call on its own: their pipelines end when the slowest node answers, so
// one stalled node would hold up calls to the others.
//
// go-redis 9.23 has an automatic pipeliner (AutoPipeliner), but it is a
// mode of the user's client, and the library supports go-redis from 9.17.
const (
	// pipeFlights is how many acquire calls or pipelines may be in
	// flight at once on a Conn.
	pipeFlights = 4
	// pipeMost bounds the calls in one pipeline.
	pipeMost = 128
	// pipeStale is how long a call waits for a flight before it goes
	// on its own: far longer than a loaded server's pipeline takes, far
	// shorter than go-redis's timeouts on a stalled one.
	pipeStale = 50 * time.Millisecond
)

// pipe is a Conn's gate for acquire calls.
type pipe struct {
	mu      sync.Mutex
	flights int
	queue   []*pipedCall
	many    manyStates // whether the server has each many script (many.go)
}

// pipedCall is a call waiting for a flight.
type pipedCall struct {
	ctx    context.Context
	cmd    *redis.Cmd
	script *redis.Script // the script cmd runs, with its keys and args
	keys   []string
	args   []any
	sent   bool          // taken into a pipeline (guarded by pipe.mu)
	done   chan struct{} // closed when cmd has its reply or error
}

// evalSha runs EVALSHA of s on keys through the pipe and returns its
// command, done: as s.EvalSha would, but sharing writes under load.
func (c *Conn) evalSha(ctx context.Context, s *redis.Script, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3) // a Cluster routes by the first key
	if _, single := c.rdb.(*redis.Client); !single {
		// A Cluster or Ring pipeline ends when its slowest node answers:
		// one node stalled would hold up calls to the others.
		_ = c.rdb.Process(ctx, cmd)
		return cmd
	}
	c.pipe.do(c.rdb, ctx, cmd, s, keys, args)
	return cmd
}

// do sends cmd on rdb: at once when a flight is free, else in the next
// pipeline. A call that waited pipeStale unsent is sent at once beside
// the flights (they are stuck: a stalled server, a slow dial). A call
// whose context ends before it is sent fails with the context's error,
// unsent; one sent waits for its reply, as go-redis's own calls do (the
// engine bounds its callers' waits).
func (p *pipe) do(rdb redis.UniversalClient, ctx context.Context, cmd *redis.Cmd, s *redis.Script, keys []string, args []any) {
	p.mu.Lock()
	if p.flights < pipeFlights {
		p.flights++
		p.mu.Unlock()
		p.send(rdb, ctx, cmd)
		return
	}
	// Only a call that waits is a pipedCall (made here, not above: a
	// lone caller's call allocates none).
	p.wait(rdb, &pipedCall{ctx: ctx, cmd: cmd, script: s, keys: keys, args: args, done: make(chan struct{})})
}

// wait queues q, with p.mu held, and waits until it is sent and answered,
// its context ends unsent, or it waited pipeStale and goes on its own.
func (p *pipe) wait(rdb redis.UniversalClient, q *pipedCall) {
	ctx, cmd := q.ctx, q.cmd
	p.queue = append(p.queue, q)
	p.mu.Unlock()
	stale := staleTimer()
	defer putStaleTimer(stale)
	var err error
	select {
	case <-q.done:
		return
	case <-ctx.Done():
		err = ctx.Err()
	case <-stale.C:
	}
	if !p.unqueue(q) {
		<-q.done // sent meanwhile
		return
	}
	if err != nil {
		cmd.SetErr(notSent(err))
		return
	}
	p.mu.Lock()
	p.flights++
	p.mu.Unlock()
	p.send(rdb, ctx, cmd)
}

// send sends cmd on its own, as a flight, and lands it.
func (p *pipe) send(rdb redis.UniversalClient, ctx context.Context, cmd *redis.Cmd) {
	_ = rdb.Process(ctx, cmd)
	p.land(rdb)
}

// staleTimers keeps the timers of calls that waited for a flight: under
// load most calls wait, and a timer each was three allocations a call.
var staleTimers = sync.Pool{New: func() any {
	t := time.NewTimer(pipeStale)
	t.Stop()
	return t
}}

// staleTimer returns a timer that fires pipeStale from now.
func staleTimer() *time.Timer {
	t := staleTimers.Get().(*time.Timer)
	t.Reset(pipeStale)
	return t
}

// putStaleTimer stops t, drains a tick it may hold (a program whose
// go.mod predates Go 1.23 keeps the buffered timer channels), and keeps
// it for the next call.
func putStaleTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	staleTimers.Put(t)
}

// unqueue takes q out of the queue and reports whether it was still
// there (not sent).
func (p *pipe) unqueue(q *pipedCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q.sent {
		return false
	}
	for i, x := range p.queue {
		if x == q {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			break
		}
	}
	return true
}

// land ends a flight: the calls that waited, if any, fly next.
func (p *pipe) land(rdb redis.UniversalClient) {
	if batch := p.next(); batch != nil {
		go p.fly(rdb, batch)
	}
}

// next takes the calls that waited, up to pipeMost, and keeps the
// flight; with none, it ends the flight and returns nil. A call whose
// context has ended is answered unsent (ErrNotSent), not sent.
func (p *pipe) next() []*pipedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var batch []*pipedCall
	for len(p.queue) > 0 && len(batch) < pipeMost {
		q := p.queue[0]
		p.queue = p.queue[1:]
		q.sent = true
		if err := q.ctx.Err(); err != nil {
			q.cmd.SetErr(notSent(err))
			close(q.done)
			continue
		}
		batch = append(batch, q)
	}
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	if len(batch) == 0 {
		p.flights--
		return nil
	}
	return batch
}

// fly sends batch in one pipeline, answers its calls, and goes on with
// the calls that waited meanwhile. Consecutive calls of one acquire
// script go as one script call (many.go).
func (p *pipe) fly(rdb redis.UniversalClient, batch []*pipedCall) {
	for batch != nil {
		ctx, cancel := pipeContext(batch)
		fs := p.commands(batch)
		pl := rdb.Pipeline()
		for _, f := range fs {
			if f.many != nil {
				_ = pl.Process(ctx, f.many.cmd)
			} else {
				_ = pl.Process(f.one.ctx, f.one.cmd)
			}
		}
		_, err := pl.Exec(ctx)
		for _, f := range fs {
			if f.many != nil {
				p.answer(rdb, f.many, err)
			}
		}
		cancel()
		for _, q := range batch {
			settle(rdb, q, err)
			close(q.done)
		}
		batch = p.next()
	}
}

// settle leaves q's command as a call of its own would have ended.
// go-redis before 9.23 sets no command's error when a pipeline gives up
// after its retries on a connection error: such a command gets the
// pipeline's error. A command that failed with an error go-redis retries
// for a single command (a replica promoted, a server loading) is sent
// again on its own, as go-redis would have retried it: in a pipeline
// only the first command's error decides a retry.
func settle(rdb redis.UniversalClient, q *pipedCall, err error) {
	cerr := q.cmd.Err()
	switch {
	case cerr == nil && q.cmd.Val() == nil:
		if err == nil {
			err = errors.New("ratelimiter: no reply in the pipeline")
		}
		q.cmd.SetErr(err)
	case cerr != nil && retryable(cerr) && q.ctx.Err() == nil:
		q.cmd.SetErr(nil)
		_ = rdb.Process(q.ctx, q.cmd)
	}
}

// retryable reports whether go-redis retries a single command that
// failed with err, a Redis error reply: READONLY (a failover), LOADING,
// MASTERDOWN, TRYAGAIN and CLUSTERDOWN.
func retryable(err error) bool {
	for _, p := range []string{"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// pipeContext is a pipeline's context (engine.SharedContext): a caller
// that leaves does not end the others' calls.
func pipeContext(batch []*pipedCall) (context.Context, context.CancelFunc) {
	return engine.SharedContext(batch, func(q *pipedCall) context.Context { return q.ctx })
}

// notSent returns the error of a call that was not sent because its
// context ended (err) while it waited for a flight.
func notSent(err error) error { return fmt.Errorf("%w: %w", ErrNotSent, err) }
