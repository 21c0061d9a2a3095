package script

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// echo replies with its key and argument, so that a reply that reached the
// wrong caller shows.
var echo = redis.NewScript(`return KEYS[1] .. '/' .. ARGV[1]`)

// pipeHook counts what go-redis sends: single commands by first key,
// pipelines of script calls by size; a single command whose key is in stuck waits until
// release is closed (a flight that does not come back).
type pipeHook struct {
	mu        sync.Mutex
	singles   map[string]int
	pipelines []int
	names     [][]string // each counted pipeline's commands: evalsha, or eval (many.go)
	stuck     map[string]bool
	release   chan struct{}
}

func newPipeHook() *pipeHook {
	return &pipeHook{singles: map[string]int{}, stuck: map[string]bool{}, release: make(chan struct{})}
}

func (h *pipeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		key := ""
		if a := cmd.Args(); len(a) > 3 {
			key = fmt.Sprint(a[3])
		}
		h.mu.Lock()
		h.singles[key]++
		stuck, release := h.stuck[key], h.release
		h.mu.Unlock()
		if stuck {
			<-release
		}
		return next(ctx, cmd)
	}
}

func (h *pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && (cmds[0].Name() == "evalsha" || cmds[0].Name() == "eval") { // not a new connection's handshake
			var names []string
			for _, c := range cmds {
				names = append(names, c.Name())
			}
			h.mu.Lock()
			h.pipelines = append(h.pipelines, len(cmds))
			h.names = append(h.names, names)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func (h *pipeHook) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.singles[key]
}

// queued returns the calls waiting for a flight.
func (p *pipe) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// pipeConn starts a redis-server and returns a Conn on it with h as a hook.
func pipeConn(t *testing.T, h *pipeHook) (*Conn, context.Context) {
	t.Helper()
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	srv, err := redistest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if err := echo.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(h)
	return New(rdb, Options{}), ctx
}

// waitFlights waits until every flight is out.
func waitFlights(t *testing.T, c *Conn) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.pipe.mu.Lock()
		out := c.pipe.flights
		c.pipe.mu.Unlock()
		if out == pipeFlights {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d flights out", out, pipeFlights)
		}
	}
}

// waitQueued waits until n calls wait for a flight.
func waitQueued(t *testing.T, c *Conn, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); c.pipe.queued() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d calls queued, want %d", c.pipe.queued(), n)
		}
	}
}

// A lone caller's calls go out one by one, at once; while pipeFlights are
// out, the calls that come wait and then go out together in one
// pipeline, each with its own reply.
func TestPipeSharesWrites(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	for i := range 3 {
		if v, err := c.evalSha(ctx, echo, []string{"lone"}, []any{i}).Text(); err != nil || v != fmt.Sprintf("lone/%d", i) {
			t.Fatalf("lone call %d: %q, %v", i, v, err)
		}
	}
	if n := h.count("lone"); n != 3 || len(h.pipelines) != 0 {
		t.Fatalf("a lone caller: %d single commands, pipelines %v; want 3 and none", n, h.pipelines)
	}

	for i := range pipeFlights {
		h.stuck[fmt.Sprintf("out%d", i)] = true
	}
	var wg sync.WaitGroup
	call := func(key string, arg int) {
		defer wg.Done()
		if v, err := c.evalSha(ctx, echo, []string{key}, []any{arg}).Text(); err != nil || v != fmt.Sprintf("%s/%d", key, arg) {
			t.Errorf("%s: %q, %v", key, v, err)
		}
	}
	for i := range pipeFlights {
		wg.Add(1)
		go call(fmt.Sprintf("out%d", i), i)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n := 0
		for i := range pipeFlights {
			n += h.count(fmt.Sprintf("out%d", i))
		}
		if n == pipeFlights {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d flights out", n, pipeFlights)
		}
	}
	const waiting = 20
	for i := range waiting {
		wg.Add(1)
		go call(fmt.Sprintf("k%d", i), i)
	}
	waitQueued(t, c, waiting)
	close(h.release)
	wg.Wait()
	if len(h.pipelines) != 1 || h.pipelines[0] != waiting {
		t.Errorf("pipelines %v, want one of %d", h.pipelines, waiting)
	}
	for i := range waiting {
		if n := h.count(fmt.Sprintf("k%d", i)); n != 0 {
			t.Errorf("k%d went out on its own %d times", i, n)
		}
	}
}

// A call that waits pipeStale for a flight (every flight stuck: a stalled
// server, a slow dial) goes out on its own; a call whose context ends
// while it waits fails with the context's error and is never sent.
func TestPipeStaleAndCanceled(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	var wg sync.WaitGroup
	for i := range pipeFlights {
		h.stuck[fmt.Sprintf("out%d", i)] = true
	}
	for i := range pipeFlights {
		key := fmt.Sprintf("out%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.evalSha(ctx, echo, []string{key}, []any{i}).Err(); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}()
	}
	defer func() { close(h.release); wg.Wait() }()
	waitFlights(t, c)

	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { gone <- c.evalSha(cctx, echo, []string{"gone"}, []any{0}).Err() }()
	waitQueued(t, c, 1)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotSent) {
		t.Errorf("canceled while waiting: %v, want ErrNotSent and context.Canceled", err)
	}

	start := time.Now()
	v, err := c.evalSha(ctx, echo, []string{"late"}, []any{1}).Text()
	if err != nil || v != "late/1" {
		t.Errorf("a call behind stuck flights: %q, %v", v, err)
	}
	if waited := time.Since(start); waited < pipeStale {
		t.Errorf("went out on its own after %v, before pipeStale %v", waited, pipeStale)
	}
	if h.count("gone") != 0 || h.count("late") != 1 || len(h.pipelines) != 0 {
		t.Errorf("sent: gone %d, late %d on its own, pipelines %v; want 0, 1, none", h.count("gone"), h.count("late"), h.pipelines)
	}
}

// redisErr is an error reply, as go-redis reads one.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// A pipelined command left with no reply and no error (go-redis before
// 9.23, after a pipeline's retries on a connection error) gets the
// pipeline's error; one refused with an error go-redis retries for a
// single command (READONLY) is sent again on its own; any other error
// reply stays.
func TestPipeSettle(t *testing.T) {
	c, ctx := pipeConn(t, newPipeHook())
	lost := &pipedCall{ctx: ctx, cmd: redis.NewCmd(ctx, "evalsha", echo.Hash(), 1, "k", 1)}
	dial := errors.New("dial tcp: connection refused")
	settle(c.rdb, lost, dial)
	if !errors.Is(lost.cmd.Err(), dial) {
		t.Errorf("a command left empty: %v, want the pipeline's error", lost.cmd.Err())
	}
	empty := &pipedCall{ctx: ctx, cmd: redis.NewCmd(ctx, "evalsha", echo.Hash(), 1, "k", 1)}
	settle(c.rdb, empty, nil)
	if empty.cmd.Err() == nil {
		t.Error("a command left empty by a pipeline without an error: no error")
	}
	ro := &pipedCall{ctx: ctx, cmd: redis.NewCmd(ctx, "evalsha", echo.Hash(), 1, "again", 2)}
	ro.cmd.SetErr(redisErr("READONLY You can't write against a read only replica."))
	settle(c.rdb, ro, nil)
	if v, err := ro.cmd.Text(); err != nil || v != "again/2" {
		t.Errorf("READONLY in a pipeline: %q, %v; want it sent again on its own", v, err)
	}
	other := &pipedCall{ctx: ctx, cmd: redis.NewCmd(ctx, "evalsha", echo.Hash(), 1, "k", 3)}
	other.cmd.SetErr(redisErr("RLSTATE corrupt"))
	settle(c.rdb, other, nil)
	if !redis.HasErrorPrefix(other.cmd.Err(), "RLSTATE") {
		t.Errorf("another error reply: %v, want it kept", other.cmd.Err())
	}
}

// A Cluster client's calls never go through the pipe: each is sent on its
// own.
func TestPipeNotOnCluster(t *testing.T) {
	redistest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newPipeHook()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, MaxRedirects: 0})
	defer rdb.Close()
	rdb.AddHook(h)
	c := New(rdb, Options{})
	c.pipe.flights = pipeFlights // as if every flight were out
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	// Through the pipe, this call would wait for a flight, and its
	// context's end would leave it unsent (ErrNotSent).
	if err := c.evalSha(gone, echo, []string{"k"}, []any{1}).Err(); errors.Is(err, ErrNotSent) {
		t.Errorf("a Cluster client's call waited for a flight: %v", err)
	}
	c.pipe.mu.Lock()
	flights, queued := c.pipe.flights-pipeFlights, len(c.pipe.queue)
	c.pipe.mu.Unlock()
	if flights != 0 || queued != 0 || len(h.pipelines) != 0 {
		t.Errorf("a Cluster client's call: %d flights, %d queued, pipelines %v; want none", flights, queued, h.pipelines)
	}
}
