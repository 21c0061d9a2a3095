package ratelimiter

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// OutageFallback configures the degraded mode of WithOutageFallback: the
// share of each limiter's rate that this process grants on its own while
// Redis is unreachable. Set exactly one of Share and Replicas.
type OutageFallback struct {
	// Share is the fraction of a limiter's rate, in (0, 1], that this
	// Client grants per interval while Redis is unreachable: the local
	// limit is floor(Share × rate) permits in any window of one interval,
	// however many outages the window holds.
	// For a fleet of N processes that share the limiters, 1/N keeps the
	// fleet at the rate.
	Share float64
	// Replicas, when Share is 0, sets Share to 1/Replicas: the number of
	// processes expected to share the limiters. It must be from 1 to
	// 65536.
	Replicas int
	// Probe is how often the Client sends PING while Redis is
	// unreachable; the outage ends with the first PING that Redis
	// answers (on a ClusterClient, every master; on a Ring, every
	// shard). Each PING may take up to OutageProbeTimeout. It must be
	// from 10 ms to 10 s; 0 means 200 ms.
	Probe time.Duration
	// Limiters is the most limiters whose rate the Client remembers for
	// an outage (a limiter's rate and interval, and from its first local
	// grant until that grant's interval has passed and an outage ends or
	// Redis's reply carries the rate, its local window: about 600 bytes
	// each); past it, one remembered limiter is forgotten, with its local
	// window, for each new one. It must be from 0 to 1,000,000; 0 means
	// 10,000.
	Limiters int
}

// OutageProbeTimeout bounds each PING of an outage's probe
// (OutageFallback.Probe).
const OutageProbeTimeout = time.Second

// Defaults of OutageFallback.
const (
	defaultOutageProbe    = 200 * time.Millisecond
	defaultOutageLimiters = 10000
)

// share returns the share o states, its probe period and limiter bound,
// or why o is invalid.
func (o OutageFallback) resolve() (OutageFallback, error) {
	switch {
	case o.Share != 0 && o.Replicas != 0:
		return o, invalid("outage fallback: both Share %v and Replicas %d set", o.Share, o.Replicas)
	case o.Share == 0 && o.Replicas == 0:
		return o, invalid("outage fallback: neither Share nor Replicas set")
	case o.Replicas != 0 && (o.Replicas < 1 || o.Replicas > 65536):
		return o, invalid("outage fallback: Replicas %d out of range [1, 65536]", o.Replicas)
	case o.Replicas == 0 && !(o.Share > 0 && o.Share <= 1):
		return o, invalid("outage fallback: Share %v out of range (0, 1]", o.Share)
	case o.Probe != 0 && (o.Probe < 10*time.Millisecond || o.Probe > 10*time.Second):
		return o, invalid("outage fallback: Probe %v out of range [10ms, 10s]", o.Probe)
	case o.Limiters < 0 || o.Limiters > 1000000:
		return o, invalid("outage fallback: Limiters %d out of range [0, 1000000]", o.Limiters)
	}
	if o.Replicas != 0 {
		o.Share = 1 / float64(o.Replicas)
	}
	if o.Probe == 0 {
		o.Probe = defaultOutageProbe
	}
	if o.Limiters == 0 {
		o.Limiters = defaultOutageLimiters
	}
	return o, nil
}

// localLimit is floor(share × rate), the local limit of a limiter of
// rate permits per interval. A share of 1/N computed in floating point
// (0.1 × 10 = 1.0000000000000002, 1/3 × 3 = 1) is rounded to the nearest
// permit first when it is within 1e-9 of one.
func localLimit(share float64, rate int64) int64 {
	x := share * float64(rate)
	if r := math.Round(x); math.Abs(x-r) < 1e-9 {
		return int64(r)
	}
	return int64(math.Floor(x))
}

// OutageEvent reports that an outage (WithOutageFallback) began or ended
// (Hooks.Outage).
type OutageEvent struct {
	// Down is true when the outage began, false when it ended.
	Down bool
	// Err is, when the outage began, the error that began it; nil when it
	// ended.
	Err error
	// Lasted is, when the outage ended, the time since it began; 0 when
	// it began.
	Lasted time.Duration
}

// outage is a Client's degraded mode (WithOutageFallback): whether Redis
// is unreachable now, the probe that ends the outage, and per limiter the
// rate last seen and its local window.
type outage struct {
	cfg  OutageFallback
	rdb  redis.UniversalClient
	now  func() time.Time // the local windows' clock: time.Now (tests inject one)
	hook func(OutageEvent)

	isDown atomic.Bool
	mu     sync.Mutex
	closed bool          // Client.Close: no outage begins
	ended  chan struct{} // closed when the current outage ends
	since  time.Time
	known  map[string]*knownRate // by lane key
}

// knownRate is what the Client last saw of one limiter's rate, and its
// local window: made by the first local take, kept across outages (an
// outage may begin while Redis is healthy: a call stalled past its
// deadline on a loaded machine), so that the local limit holds in any
// window of one interval however many outages it holds; dropped only once
// its permits have all left it (at an outage's end, or when a reply
// carries the rate) or when the rate or the interval changes.
type knownRate struct {
	rate     int64
	interval time.Duration
	seen     time.Time // when the rate was last read
	window   *localWindow
}

// newOutage returns the degraded mode of a Client on rdb; cfg is resolved.
func newOutage(cfg OutageFallback, rdb redis.UniversalClient, hook func(OutageEvent)) *outage {
	return &outage{cfg: cfg, rdb: rdb, now: time.Now, hook: hook, known: map[string]*knownRate{}}
}

// down reports whether the Client is in an outage.
func (o *outage) down() bool { return o.isDown.Load() }

// endedCh returns the channel closed when the current outage ends, or
// nil when there is no outage.
func (o *outage) endedCh() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.isDown.Load() {
		return nil
	}
	return o.ended
}

// enter begins an outage because of err, unless one is in progress, and
// starts its probe.
func (o *outage) enter(err error) {
	o.mu.Lock()
	if o.isDown.Load() || o.closed {
		o.mu.Unlock()
		return
	}
	o.since = time.Now()
	o.ended = make(chan struct{})
	o.isDown.Store(true)
	ended := o.ended
	o.mu.Unlock()
	go o.probe(ended)
	if o.hook != nil {
		o.hook(OutageEvent{Down: true, Err: err})
	}
}

// end ends the outage in progress, if any: calls go to Redis again. The
// local windows are kept for the next outage, but for those whose
// permits have all left them.
func (o *outage) end() {
	o.mu.Lock()
	if !o.isDown.Load() {
		o.mu.Unlock()
		return
	}
	o.isDown.Store(false)
	close(o.ended)
	lasted := time.Since(o.since)
	now := o.now()
	for _, k := range o.known {
		if k.window != nil && k.window.empty(now) {
			k.window = nil
		}
	}
	o.mu.Unlock()
	if o.hook != nil {
		o.hook(OutageEvent{Lasted: lasted})
	}
}

// close ends the outage in progress, if any, and keeps any other from
// beginning (Client.Close).
func (o *outage) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.end()
}

// probe sends PING every cfg.Probe until Redis answers, then ends the
// outage; it returns when the outage ended otherwise (Client.Close). A
// PING that finds the go-redis client closed (redis.ErrClosed: the
// caller closed it) ends the outage too: no probe would ever end it, and
// the calls fail with ErrClosed as without the option.
func (o *outage) probe(ended <-chan struct{}) {
	t := time.NewTicker(o.cfg.Probe)
	defer t.Stop()
	for {
		select {
		case <-ended:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), OutageProbeTimeout)
		err := ping(ctx, o.rdb)
		cancel()
		if err == nil || errors.Is(err, redis.ErrClosed) {
			o.end()
			return
		}
	}
}

// ping sends PING to rdb: to every master of a ClusterClient, every shard
// of a Ring, else once.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	each := func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		return r.ForEachMaster(ctx, each)
	case *redis.Ring:
		return r.ForEachShard(ctx, each)
	}
	return rdb.Ping(ctx).Err()
}

// rateRefresh is how long a limiter's rate, once read, serves before a
// call that would not read it (TryAcquire's short reply) asks for it
// again.
const rateRefresh = time.Second

// stale reports whether the rate of the limiter of lane key lane is not
// known or was read more than rateRefresh ago.
func (o *outage) stale(lane string) bool {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.known[lane]
	return k == nil || now.Sub(k.seen) > rateRefresh || now.Before(k.seen)
}

// learn notes the rate and interval of the limiter of lane key lane from
// a reply that carried them (interval > 0).
func (o *outage) learn(lane string, rate int64, interval time.Duration) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.known[lane]
	if k == nil {
		if len(o.known) >= o.cfg.Limiters {
			for key := range o.known {
				delete(o.known, key)
				break
			}
		}
		k = &knownRate{}
		o.known[lane] = k
	}
	if k.rate != rate || k.interval != interval || (k.window != nil && k.window.empty(now)) {
		k.window = nil
	}
	k.rate, k.interval, k.seen = rate, interval, now
}

// knows reports whether the rate of the limiter of lane key lane is
// known.
func (o *outage) knows(lane string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.known[lane] != nil
}

// forget drops what the Client knows of the limiter of lane key lane (it
// is not configured, or this Client changed or deleted it).
func (o *outage) forget(lane string) {
	o.mu.Lock()
	delete(o.known, lane)
	o.mu.Unlock()
}

// localDecision is a local window's decision on one acquisition.
type localDecision struct {
	res Result
	err error // ErrPermitsExceedRate, or nil
	// never: more permits asked for than the local limit; no wait on the
	// local window grants them (res.RetryAfter is then the interval).
	never bool
}

// take decides n permits of the limiter of lane key lane locally. ok is
// false when there is no outage or the limiter's rate is not known: the
// call then goes to Redis. n above the limiter's rate is
// ErrPermitsExceedRate, as Redis would say.
func (o *outage) take(lane string, n int64) (localDecision, bool) {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.known[lane]
	if !o.isDown.Load() || k == nil {
		return localDecision{}, false
	}
	limit := localLimit(o.cfg.Share, k.rate)
	d := localDecision{res: Result{Limit: limit, Interval: k.interval, Degraded: true}}
	if n > k.rate {
		d.err = ErrPermitsExceedRate
		return d, true
	}
	if k.window == nil {
		k.window = newLocalWindow(limit, k.interval, now)
	}
	t := k.window.take(n, now)
	d.res.Granted, d.res.Remaining, d.res.ResetAfter, d.never = t.granted, t.remaining, t.reset, t.never
	switch {
	case t.never:
		d.res.RetryAfter = max(k.interval, time.Millisecond)
	case !t.granted:
		d.res.RetryAfter = max(t.hint, time.Millisecond)
	}
	return d, true
}

// InOutage reports whether the Client is in an outage (WithOutageFallback):
// an acquisition found Redis unreachable and no probe has had an answer
// since, so its Limiters' acquisitions are decided locally. It is false
// without the option. It sends nothing: use it in a health check.
func (c *Client) InOutage() bool { return c.out != nil && c.out.down() }
