package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Combining (docs/combining.md). Every limiter that a Client is using has
// a lane. At most one script call per lane is in flight:
//
//	caller ──► lane idle? ──yes──► send [caller] now ───────────────┐
//	             │ no                                                │
//	             └──► pending (FIFO) ──► next call: up to maxBatch ──┤
//	waiters (FIFO, waiters.go) ──► one timer ──► next call (strict) ─┤
//	                                                                 ▼
//	         one acquire script call decides the batch in order; each caller
//	         gets its own verdict; a grant whose caller has gone is released
//
// A request that finds its lane idle is sent at once: combining adds no
// delay when a limiter is idle, and batches form only while a call is in
// flight.
type lane struct {
	key     string
	busy    bool       // run is active: a script call is in flight or about to be
	pending []*request // arrived while busy, in arrival order
	waiting []*request // blocked callers, head first (waiters.go)
	flying  int        // waiters in the call in flight
	due     bool       // the head waiter's hint has passed
	timer   Timer      // of the Engine's Clock; nil until first armed
	wakeAt  time.Time  // when timer fires; zero when not armed
}

// lanes holds the lanes of one Client. One mutex guards every lane's
// fields: its sections are a few slice operations, never a Redis call.
type lanes struct {
	mu     sync.Mutex
	m      map[string]*lane
	fleets map[string]*fleet // other writers of each window (fairness.go)
	swept  int               // len(fleets) after the last sweep
}

// get returns the lane of key, making it if needed. Call with mu held.
func (ls *lanes) get(key string) *lane {
	l := ls.m[key]
	if l == nil {
		if ls.m == nil {
			ls.m = make(map[string]*lane)
		}
		l = &lane{key: key}
		ls.m[key] = l
	}
	return l
}

// dropIfIdle forgets l when nothing uses it, so that a Client serving
// many limiters keeps lanes only for those in use. Call with mu held.
func (ls *lanes) dropIfIdle(l *lane) {
	if !l.busy && len(l.pending) == 0 && len(l.waiting) == 0 && l.flying == 0 && l.wakeAt.IsZero() && ls.m[l.key] == l {
		delete(ls.m, l.key)
	}
}

// Request states: a request is answered or abandoned exactly once.
const (
	reqWaiting int32 = iota
	reqAnswered
	reqGone
)

// request is one acquisition waiting for a script call.
type request struct {
	p      Target
	n      int64
	detail bool // Allow: the reply must carry Limit, Interval and ResetAfter
	ctx    context.Context
	state  atomic.Int32
	done   chan answer // buffered: the answer never blocks the sender

	// Blocking calls only (waiters.go).
	blocking bool      // a blocking caller's (Acquire, TryAcquireTimeout)
	limit    time.Time // TryAcquireTimeout's end; zero: none
	queued   time.Time // when it joined the waiters; zero: not a waiter
}

// answer is what a request gets back.
type answer struct {
	v         Verdict
	err       error
	roundTrip time.Duration
	sentAt    time.Time // the Client's clock when the deciding call was sent; zero: not known
	batch     int
	waited    time.Duration
	leased    bool // granted from this Client's lease without a call (lease.go)
}

func newRequest(ctx context.Context, p Target, n int64, detail bool) *request {
	return &request{p: p, n: n, detail: detail, ctx: ctx, done: make(chan answer, 1)}
}

// answer delivers a to q unless its caller has gone; it reports whether q
// took it. A waiter's wait is counted on c.
func (q *request) answer(a answer, c Clock) bool {
	if !q.state.CompareAndSwap(reqWaiting, reqAnswered) {
		return false
	}
	if !q.queued.IsZero() {
		a.waited = c.Now().Sub(q.queued)
	}
	q.done <- a
	return true
}

// submit sends q in its lane's next script call and waits for its answer
// or for its context.
func (e *Engine) submit(q *request) answer {
	e.lanes.mu.Lock()
	l := e.lanes.get(q.p.LaneKey())
	if l.busy {
		return e.queue(l, q)
	}
	l.busy = true
	e.lanes.mu.Unlock()
	e.start(l, []*request{q}, false)
	return e.await(l, q)
}

// tryLane decides a non-blocking acquisition through its lane. When the
// lane is idle and no lease applies, the caller makes the lane's call
// itself, as the lane would (serve): nothing else waits on it, so it needs
// no request and no channel (per-user limiters, each seldom asked twice at once,
// take this way nearly always; docs/performance.md, "Many limiters").
// Requests that queued meanwhile go in the lane's next call, as after
// any call. A busy lane queues the request (submit).
func (e *Engine) tryLane(ctx context.Context, t Target, n int64, detail bool) answer {
	if e.leases != nil {
		return e.submit(newRequest(ctx, t, n, detail))
	}
	e.lanes.mu.Lock()
	l := e.lanes.get(t.LaneKey())
	if l.busy {
		return e.queue(l, newRequest(ctx, t, n, detail))
	}
	l.busy = true
	e.lanes.mu.Unlock()
	// As serve makes a lane's call: under the caller's values and deadline
	// (callContext), returning when the caller's context ends (leave); what
	// a call left that way grants is given back (call).
	cctx, cancel := callContext(ctx)
	a := e.directLeave(cctx, ctx, t, n, detail)
	cancel()
	if batch, strict := e.nextOrIdle(l); batch != nil {
		go e.run(l, batch, strict, false)
	}
	return a
}

// queue puts q in busy lane l's next call, with mu held (it unlocks), and
// waits for its answer (await).
func (e *Engine) queue(l *lane, q *request) answer {
	l.pending = append(l.pending, q)
	e.lanes.mu.Unlock()
	return e.await(l, q)
}

// nextOrIdle takes the lane's next batch after a call (next); with none,
// the lane is idle, and dropped when nothing uses it.
func (e *Engine) nextOrIdle(l *lane) ([]*request, bool) {
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	batch, strict := e.next(l)
	if batch == nil {
		l.busy = false
		e.lanes.dropIfIdle(l)
	}
	return batch, strict
}

// start runs the lane's script calls from batch on. A request that found
// its lane idle runs the first call on its own goroutine, as an
// uncombined call would (call still lets it leave when its context ends
// while Redis stalls); the calls after that run on a new goroutine.
func (e *Engine) start(l *lane, batch []*request, strict bool) {
	if len(batch) == 1 && !strict {
		e.run(l, batch, strict, true)
		return
	}
	go e.run(l, batch, strict, false)
}

// await waits for q's answer; when q's context ends first, q leaves its
// lane at once (no Redis call) and gets the context's error. A request
// that was already in a script call gets its answer, or, when the call
// grants it after the caller left, its permits are released (lane.run).
func (e *Engine) await(l *lane, q *request) answer {
	select {
	case a := <-q.done:
		return a
	case <-q.ctx.Done():
	}
	if !q.state.CompareAndSwap(reqWaiting, reqGone) {
		return <-q.done
	}
	e.lanes.mu.Lock()
	l.pending = remove(l.pending, q)
	l.waiting = remove(l.waiting, q)
	e.lanes.dropIfIdle(l)
	e.lanes.mu.Unlock()
	a := answer{err: q.ctx.Err()}
	if !q.queued.IsZero() {
		a.waited = e.time.Now().Sub(q.queued)
	}
	return a
}

func remove(list []*request, q *request) []*request {
	for i, x := range list {
		if x == q {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// run makes script calls for the lane until nothing is left to send. When
// inline (on a caller's goroutine), it makes the first call only and hands
// the rest to a new goroutine.
func (e *Engine) run(l *lane, batch []*request, strict, inline bool) {
	for {
		var leave context.Context
		if inline {
			leave = batch[0].ctx
		}
		e.serve(l, batch, strict, leave)
		if batch, strict = e.nextOrIdle(l); batch == nil {
			return
		}
		if inline {
			go e.run(l, batch, strict, false)
			return
		}
	}
}

// next takes the lane's next batch: the waiters when their hint has
// passed, else the pending requests, up to maxBatch requests and
// MaxPermits permits times the largest weight (one record holds them).
// Call with mu held.
func (e *Engine) next(l *lane) ([]*request, bool) {
	if l.due && len(l.waiting) > 0 {
		l.due = false
		var batch []*request
		batch, l.waiting = e.take(l.waiting)
		l.flying += len(batch)
		return batch, true
	}
	var batch []*request
	batch, l.pending = e.take(l.pending)
	return batch, false
}

// take splits the first requests off list, skipping those whose caller
// has gone.
func (e *Engine) take(list []*request) (batch, rest []*request) {
	var permits int64
	i := 0
	for ; i < len(list) && len(batch) < e.maxBatch; i++ {
		q := list[i]
		if q.state.Load() == reqGone {
			continue
		}
		if permits+q.n > MaxPermits/q.p.MaxWeight() {
			break
		}
		permits += q.n
		batch = append(batch, q)
	}
	if len(batch) == 0 {
		return nil, list[i:]
	}
	return batch, list[i:]
}

// serve makes one script call for batch and answers each request. A
// strict batch is of waiters: no grant follows a refusal, and the refused
// go back to the head of the waiters (waiters.go). leave, when not nil,
// is the context of the caller that runs the call on its own goroutine:
// when it ends, so does the call.
func (e *Engine) serve(l *lane, batch []*request, strict bool, leave context.Context) {
	var lim Limiter
	if e.leases != nil && !strict {
		// Leases (leasecall.go): requests a live lease holds are
		// answered from it; the rest may go in a lease call. Waiters
		// (strict) never lease.
		if lim, _ = batch[0].p.(Limiter); lim != nil {
			var done bool
			if batch, done = e.serveLease(lim, batch, leave); done {
				return
			}
		}
	}
	ctx, cancel := batchContext(batch)
	defer cancel()
	ns := make([]int64, len(batch))
	for i, q := range batch {
		ns[i] = q.n
	}
	form := Form{Kind: Table}
	switch {
	case strict:
		form.Kind = Strict
	case len(batch) == 1 && !batch[0].detail:
		form.Kind = Single
	}
	sent := e.time.Now()
	if hold := e.batchHold(l, batch, sent); hold > 0 {
		form.Hold = hold
	}
	fair := e.fairBatch(batch)
	if fair {
		form.Probe = e.batchProbe(l, sent)
	}
	if form.Kind == Single && (form.Hold > 0 || form.Probe) {
		form.Kind = Table // the single form has no room for a hold or the probe record
	}
	b := e.call(ctx, leave, batch[0].p, form, ns)
	if form.Hold > 0 {
		e.noteHolds(l, &b, sent, form.Hold, e.time.Now())
	}
	if fair {
		e.noteProbe(l, batch[0].p.(Limiter), &b, sent, e.time.Now())
	}
	if lim != nil {
		e.leases.observeBatch(lim, b)
	}
	own := strict && e.ownWakes(l)
	var refused []*request
	var hints []time.Duration
	var giveBack int64
	for i, q := range batch {
		a := answer{err: b.Err, roundTrip: b.RoundTrip, sentAt: b.SentAt, batch: len(batch)}
		if b.Err == nil {
			a.v = b.Verdicts[i]
		}
		if strict && !own && a.err == nil && a.v.Err == nil && !a.v.Res.Granted {
			refused, hints = append(refused, q), append(hints, a.v.Res.RetryAfter)
			continue
		}
		if !q.answer(a, e.time) && a.err == nil && a.v.Res.Granted {
			giveBack += q.n
		}
	}
	if strict {
		e.requeue(l, len(batch), refused, hints, b)
	}
	if giveBack > 0 {
		e.giveBack(batch[0].p, giveBack)
	}
}

// call makes the script call for a batch and returns by ctx's deadline,
// or when leave (if not nil) is done, even while go-redis still waits on a stalled
// server (as bounded does), so that one stalled call does not hold up the
// lane: the next batch goes on a fresh call. What the abandoned call
// grants, when it ends, is given back: its callers have been answered with
// their context's error.
func (e *Engine) call(ctx, leave context.Context, p Target, form Form, ns []int64) Reply {
	if ctx.Done() == nil && (leave == nil || leave.Done() == nil) {
		return p.Decide(ctx, form, ns) // nothing to leave for (runOrLeave's closure is an allocation)
	}
	b, late, err := runOrLeave(ctx, leave, func() Reply { return p.Decide(ctx, form, ns) })
	if late == nil {
		return b
	}
	go func() {
		b := <-late
		var granted int64
		for i, v := range b.Verdicts {
			if v.Res.Granted {
				granted += ns[i]
			}
		}
		if granted > 0 {
			e.giveBack(p, granted)
		}
	}()
	return Reply{Err: err}
}

// runOrLeave runs run and returns its result, or returns early when ctx
// or leave (if not nil) is done: then late (nil otherwise) delivers the
// result when run ends, and err is why it returned early.
func runOrLeave[T any](ctx, leave context.Context, run func() T) (r T, late <-chan T, err error) {
	var left <-chan struct{}
	if leave != nil {
		left = leave.Done()
	}
	if ctx.Done() == nil && left == nil {
		return run(), nil, nil
	}
	done := make(chan T, 1)
	go func() { done <- run() }()
	select {
	case r := <-done:
		return r, nil, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-left:
		err = leave.Err()
	}
	return r, done, err
}

// giveBackTimeout bounds the release of permits granted to callers that
// had gone when the grant arrived.
const giveBackTimeout = 5 * time.Second

// giveBack releases permits that were granted to callers who had gone, so
// that they are not lost. A failure here leaves them taken until their
// interval ends, as any acquisition abandoned at its deadline would.
func (e *Engine) giveBack(p Target, n int64) {
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	_ = e.Release(ctx, p, n)
}

// callContext is SharedContext for one caller's context: its values and
// deadline, never canceled before that deadline.
func callContext(c context.Context) (context.Context, context.CancelFunc) {
	if c.Done() == nil {
		return c, noCancel
	}
	base := context.WithoutCancel(c)
	if dl, ok := c.Deadline(); ok {
		return context.WithDeadline(base, dl)
	}
	return base, noCancel
}

// noCancel is SharedContext's cancel for a context it did not make (a
// package func: a literal in a generic function captures its dictionary,
// an allocation per call).
func noCancel() {}

// batchContext is the context of a batch's script call (SharedContext).
func batchContext(batch []*request) (context.Context, context.CancelFunc) {
	return SharedContext(batch, func(q *request) context.Context { return q.ctx })
}

// SharedContext returns the context of one Redis call made for several
// callers, items, whose contexts ctx gives: the first one's values, never
// canceled by one caller leaving (the others still want the answer),
// ending at the latest deadline among them, or never if one of them has
// none.
func SharedContext[T any](items []T, ctx func(T) context.Context) (context.Context, context.CancelFunc) {
	if len(items) == 1 {
		return callContext(ctx(items[0]))
	}
	base := ctx(items[0])
	if base.Done() != nil {
		base = context.WithoutCancel(base) // (one that can never end is its own)
	}
	var latest time.Time
	for _, q := range items {
		dl, ok := ctx(q).Deadline()
		if !ok {
			return base, noCancel
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(base, latest)
}
