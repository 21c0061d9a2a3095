package script

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goredisson/ratelimiter/internal/engine"
	"github.com/goredisson/ratelimiter/wire"
)

// holdFlights sends pipeFlights calls that h keeps from coming back, so
// that the calls after them queue; release lets them land.
func holdFlights(t *testing.T, c *Conn, h *pipeHook, ctx context.Context) (release func()) {
	t.Helper()
	var wg sync.WaitGroup
	h.mu.Lock()
	h.stuck, h.release = map[string]bool{}, make(chan struct{})
	rel := h.release
	h.mu.Unlock()
	for i := range pipeFlights {
		key := fmt.Sprintf("out%d", i)
		h.mu.Lock()
		h.stuck[key] = true
		h.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.evalSha(ctx, echo, []string{key}, []any{i}).Err(); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}()
	}
	waitFlights(t, c)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(rel)
			wg.Wait()
		})
	}
}

// manyCase is one queued acquire call and what it must get back.
type manyCase struct {
	name    string
	permits int64
	left    int64 // permits left after a grant
	err     error // or this error
}

// Acquire calls of different limiters that queued for a flight are
// decided in one script call: the first with EVAL (the server does not
// have it yet), the next with EVALSHA. Each call gets what it would have
// got alone: grants with their permits left, and the errors of a limiter
// never initialised and of a request over the rate, beside the others.
func TestManyDecidesQueuedCallsInOneScriptCall(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	rdb := c.rdb
	var cases []manyCase
	for i := range 12 {
		name := fmt.Sprintf("many%d", i)
		if err := rdb.HSet(ctx, name, "rate", 10+i, "interval", 60000, "type", 0).Err(); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, manyCase{name: name, permits: int64(1 + i%3), left: int64(10 + i - 1 - i%3)})
	}
	cases = append(cases,
		manyCase{name: "never-set", permits: 1, err: ErrNotInitialized},
		manyCase{name: "many0", permits: 11, err: ErrPermitsExceedRate})

	names, permits := make([]string, len(cases)), make([]int64, len(cases))
	for i, k := range cases {
		names[i], permits[i] = k.name, k.permits
	}
	for round, want := range []string{"eval", "evalsha"} {
		got, pipelines := queueAcquires(t, c, h, ctx, names, permits)
		if len(pipelines) != 1 || !slices.Equal(pipelines[0], []string{want}) {
			t.Fatalf("round %d: pipelines %v, want one of a single %s", round, pipelines, want)
		}
		for i, k := range cases {
			r := got[i]
			err := r.Err
			if err == nil && len(r.Verdicts) == 1 {
				err = r.Verdicts[0].Err
			}
			if k.err != nil {
				if !errors.Is(err, k.err) {
					t.Errorf("round %d, %s: %v, want %v", round, k.name, err, k.err)
				}
				continue
			}
			if err != nil || len(r.Verdicts) != 1 || !r.Verdicts[0].Res.Granted || r.Verdicts[0].Res.Remaining != k.left-int64(round)*k.permits {
				t.Errorf("round %d, %s: %+v, %v; want granted with %d left", round, k.name, r.Verdicts, err, k.left-int64(round)*k.permits)
			}
		}
	}
}

// queueAcquires sends one single-request acquire call for each of names
// (of permits[i] permits, or 1 when permits is nil) while the flights are
// held, so that they queue and fly together, and returns each reply and
// the pipelines h saw.
func queueAcquires(t *testing.T, c *Conn, h *pipeHook, ctx context.Context, names []string, permits []int64) ([]engine.Reply, [][]string) {
	t.Helper()
	release := holdFlights(t, c, h, ctx)
	defer release()
	var wg sync.WaitGroup
	got := make([]engine.Reply, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(1)
			if permits != nil {
				n = permits[i]
			}
			got[i] = c.Acquire(ctx, KeysOf(wire.KeysFor(name, "client")), engine.Form{Kind: engine.Single}, []int64{n})
		}()
	}
	waitQueued(t, c, len(names))
	return got, land(h, release, &wg)
}

// land lets the held flights land, waits for the queued calls of wg and
// returns the pipelines h saw from then on.
func land(h *pipeHook, release func(), wg *sync.WaitGroup) [][]string {
	h.mu.Lock()
	h.names = nil
	h.mu.Unlock()
	release()
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.names
}

// setLimiters configures each of names as an OVERALL limiter of rate a
// minute, as Redisson writes it.
func setLimiters(t *testing.T, ctx context.Context, c *Conn, rate int, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := c.rdb.HSet(ctx, name, "rate", rate, "interval", 60000, "type", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// granted fails t unless r granted one permit with left permits left.
func granted(t *testing.T, what string, r engine.Reply, left int64) {
	t.Helper()
	if r.Err != nil || len(r.Verdicts) != 1 || r.Verdicts[0].Err != nil || !r.Verdicts[0].Res.Granted || r.Verdicts[0].Res.Remaining != left {
		t.Errorf("%s: %+v, %v; want granted with %d left", what, r.Verdicts, r.Err, left)
	}
}

// After SCRIPT FLUSH (what a restart or a promoted replica looks like)
// the batch's EVALSHA answers NOSCRIPT: nothing of it ran, each call
// goes its own way (the restart checks, then its own EVAL) and is
// granted once, and the batch after that goes with EVAL again.
func TestManyAfterScriptFlush(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	names := []string{"f0", "f1", "f2", "f3", "f4", "f5"}
	setLimiters(t, ctx, c, 10, names...)
	for round, want := range []string{"eval", "evalsha", "evalsha", "eval"} {
		if round == 2 {
			if err := c.rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := echo.Load(ctx, c.rdb).Err(); err != nil { // the held flights' script
				t.Fatal(err)
			}
		}
		got, pipelines := queueAcquires(t, c, h, ctx, names, nil)
		if len(pipelines) != 1 || !slices.Equal(pipelines[0], []string{want}) {
			t.Fatalf("round %d: pipelines %v, want one of a single %s", round, pipelines, want)
		}
		for i, name := range names {
			granted(t, fmt.Sprintf("round %d, %s", round, name), got[i], int64(10-1-round))
		}
	}
}

// A command error raised inside one call (here WRONGTYPE: its value key
// is not a string) ends that call alone, with that error; the calls
// before and after it in the batch are granted.
func TestManyRaisedErrorEndsOneCall(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	names := []string{"r0", "r1", "bad", "r3", "r4"}
	setLimiters(t, ctx, c, 10, names...)
	if err := c.rdb.HSet(ctx, wire.KeysFor("bad", "client").All()[1], "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	got, pipelines := queueAcquires(t, c, h, ctx, names, nil)
	if len(pipelines) != 1 || len(pipelines[0]) != 1 {
		t.Fatalf("pipelines %v, want one script call", pipelines)
	}
	for i, name := range names {
		if name != "bad" {
			granted(t, name, got[i], 9)
			continue
		}
		if err := got[i].Err; err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("bad: %+v, %v; want a WRONGTYPE error", got[i].Verdicts, err)
		}
	}
	if n, err := c.rdb.ZCard(ctx, wire.KeysFor("bad", "client").All()[3]).Result(); err != nil || n != 0 {
		t.Errorf("bad's permits: %d records, %v; want none written", n, err)
	}
}

// commandCalls returns INFO commandstats' calls of cmd.
func commandCalls(t *testing.T, ctx context.Context, c *Conn, cmd string) int64 {
	t.Helper()
	info, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

// A many script reads the server's clock once for every eight calls
// (lua/many_clock.lua's NOWCALLS), and each call is decided on its own
// keys: twenty calls, three TIME commands, twenty grants each with its own
// permits left. One limiter is PER_CLIENT, its call declares five keys
// among calls of three: the calls after it must see three (acquire.lua
// reads #KEYS).
func TestManyReadsTheClockOncePerEightCalls(t *testing.T) {
	c, ctx := pipeConn(t, newPipeHook())
	const calls, perClient, nowCalls = 20, 4, 8
	var keys []string
	args := []any{calls}
	for i := range calls {
		name := fmt.Sprintf("clock%d", i)
		mode := 0
		if i == perClient {
			mode = 1
		}
		if err := c.rdb.HSet(ctx, name, "rate", 10, "interval", 60000, "type", mode).Err(); err != nil {
			t.Fatal(err)
		}
		k := KeysOf(wire.KeysFor(name, "client")).Overall
		if i == perClient {
			k = KeysOf(wire.KeysFor(name, "client")).All
		}
		keys = append(keys, k...)
		args = append(args, len(k), 4, "", string(wire.New(c.format, c.tag, uint32(i%3+1))), formSingle, i%3+1)
	}
	before := commandCalls(t, ctx, c, "time")
	v, err := manyOf[scriptAcquire].s.Eval(ctx, c.rdb, keys, args...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if n, want := commandCalls(t, ctx, c, "time")-before, int64(calls+nowCalls-1)/nowCalls; n != want {
		t.Errorf("%d TIME commands for %d calls, want %d", n, calls, want)
	}
	for i := range calls {
		if len(v) != calls || v[i] != int64(10-(i%3+1)) {
			t.Fatalf("replies %v, want each call's permits left", v)
		}
	}
}

// The calls of a pipeline keep the order they queued in: only a run of
// consecutive acquire calls goes as one script call, so a call of another
// script between them (a composite's) is decided after the acquire calls
// before it and before those after it.
func TestManyKeepsTheOrder(t *testing.T) {
	h := newPipeHook()
	c, ctx := pipeConn(t, h)
	setLimiters(t, ctx, c, 10, "o0", "o1", "o2", "o3")
	release := holdFlights(t, c, h, ctx)
	defer release()
	var wg sync.WaitGroup
	acquire := func(name string) {
		defer wg.Done()
		r := c.Acquire(ctx, KeysOf(wire.KeysFor(name, "client")), engine.Form{Kind: engine.Single}, []int64{1})
		granted(t, name, r, 9)
	}
	other := func() {
		defer wg.Done()
		if err := c.evalSha(ctx, echo, []string{"other"}, []any{0}).Err(); err != nil {
			t.Error(err)
		}
	}
	for i, call := range []func(){func() { acquire("o0") }, other, func() { acquire("o1") }, func() { acquire("o2") }, func() { acquire("o3") }} {
		wg.Add(1)
		go call()
		waitQueued(t, c, i+1) // one at a time, so that the queue's order is known
	}
	pipelines := land(h, release, &wg)
	if want := []string{"evalsha", "evalsha", "eval"}; len(pipelines) != 1 || !slices.Equal(pipelines[0], want) {
		t.Errorf("pipelines %v, want one of %v (o0 alone, the other call, o1-o3 in one script call)", pipelines, want)
	}
}

// decideBody rewrites every read of the acquire scripts' keys and
// arguments to the call's place in the many script's, and refuses a
// script that reads them another way (the many script would then read
// another call's).
func TestDecideBodyRewritesEveryRead(t *testing.T) {
	for _, src := range []string{luaAcquire, evictsSrc(luaAcquire, "allkeys"), evictsSrc(luaAcquire, "volatile")} {
		body := decideBody(src)
		for _, want := range []string{"KEYS[KB + 1]", "ARGV[AB + 4]", "NK == 3", "NA do", "stamp, now = serverNow()"} {
			if !strings.Contains(body, want) {
				t.Errorf("the decide body lacks %q", want)
			}
		}
		if strings.Contains(body, acquireLocals) {
			t.Errorf("the decide body makes its own locals %q", acquireLocals)
		}
	}
	clock := acquireLocals + acquireClock + "\nif #KEYS == 3 then end\nfor i = 4, #ARGV do end\n"
	for _, bad := range []string{"local n = #KEYS", "return unpack(ARGV)", "local k = KEYS", "x = ARGV -- ARGV[1]"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("decideBody took %q", bad)
				}
			}()
			decideBody(clock + bad + "\n")
		}()
	}
	// A comment may name them.
	decideBody(clock + "-- KEYS: K1..K5; #ARGV\nlocal x = 1 -- unpack(ARGV)\n")
}
