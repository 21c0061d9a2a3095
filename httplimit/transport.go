package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// ErrLimited is returned (wrapped, with the limiter's name) by
// Transport.RoundTrip when the limiter's wait hint shows that the permits
// cannot come within MaxWait or before the request's context deadline.
// Nothing was sent.
var ErrLimited = errors.New("httplimit: rate limited: the permits cannot come in time")

// Transport is an http.RoundTripper that takes permits from one limiter
// (or from every part of a Composite at once) before each outgoing
// request, so that every process sharing the limiter (Go with this
// package, Java with Redisson) together stays under a remote API's limit. A request waits for its permits up to MaxWait, or
// when MaxWait is 0 up to its context's deadline (as long as it takes
// without one); when the wait hint shows the permits cannot come in time
// it fails at once with ErrLimited, without being sent.
//
// The limit holds for the clock readings at which the permits are
// granted; the remote server receives the requests after a delay (the
// script call's reply, scheduling, the send) that varies from request to
// request, so a server counting strictly per sliding window can see more
// than the rate in one window when one window's grants arrive late and
// the next window's on time. Give the limiter's Interval a margin over
// the server's window larger than the spread of that delay; docs/http.md
// ("Outgoing requests") has the margins measured and the tests that
// measure them.
//
// Set the fields before the first request and do not change them after;
// it is then safe for concurrent use.
type Transport struct {
	// Base sends the requests that got their permits; nil means
	// http.DefaultTransport.
	Base http.RoundTripper
	// Limiter gives the permits. Set Limiter or Composite, not both.
	Limiter *ratelimiter.Limiter
	// Config, when its Rate is not 0, configures the limiter on first use
	// (TrySetRate: a limiter that exists keeps its configuration). With
	// the zero Config the limiter must be configured elsewhere, or
	// requests fail with ratelimiter.ErrNotInitialized. It must be the
	// zero Config with Composite.
	Config ratelimiter.Config
	// Composite, instead of Limiter, gives the permits from every part at
	// once, all or none (ratelimiter.Client.All): for a remote API's "10
	// per second and 1,000 per hour". A request waits until every part
	// can grant.
	Composite *ratelimiter.Composite
	// Configs, with Composite, configures part i with Configs[i] on first
	// use (TrySetRate); a zero Config leaves that part to be configured
	// elsewhere. nil configures no part; otherwise it must hold one Config
	// per part.
	Configs []ratelimiter.Config
	// Permits is the permits each request takes; 0 means 1.
	Permits int64
	// MaxWait bounds the wait for permits; 0 means up to the request's
	// context deadline.
	MaxWait time.Duration
	// FailureMode says what a request does when Redis fails: FailOpen
	// (the zero value) sends it unmetered, FailClosed returns the error.
	FailureMode FailureMode
	// OnError, when not nil, is called with every error of the limiter
	// (Redis failures), whatever the FailureMode, before the request is
	// sent or failed.
	OnError func(*http.Request, error)

	once   sync.Once
	gate   *gate.Gate
	target gate.Target
	label  string // the limiter's name, or the Composite's names joined by "+"
	err    error
}

// RoundTrip takes the permits for req, then sends it with Base. It fails,
// without sending req and after closing its body, with an error wrapping
// ErrLimited when the permits cannot come in time, ErrInvalidOption for a
// Transport whose fields are out of range or do not fit together (no
// Limiter nor Composite, both, Config with Composite, Configs without it
// or not one per part), ctx's error when req's context ends while
// waiting, ratelimiter.ErrPermitsExceedRate when the limiter's (or a
// part's) rate is below Permits (in either failure mode) and, with
// FailClosed, the limiter's other errors.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.once.Do(t.init)
	err := t.err
	if err == nil {
		err = t.take(req)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// take waits for the permits; it returns nil when req may be sent.
func (t *Transport) take(req *http.Request) error {
	ctx := req.Context()
	ok, err := t.gate.Wait(ctx, t.target, t.MaxWait)
	switch {
	case ok:
		return nil
	case err == nil:
		return fmt.Errorf("%w: limiter %q", ErrLimited, t.label)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if t.OnError != nil {
		t.OnError(req, err)
	}
	if t.FailureMode == FailClosed || errors.Is(err, ratelimiter.ErrPermitsExceedRate) {
		return err
	}
	return nil
}

func (t *Transport) init() {
	permits := t.Permits
	if permits == 0 {
		permits = 1
	}
	var err error
	t.gate, t.target, t.label, err = gate.ForCalls(t.Limiter, t.Config, t.Composite, t.Configs, permits)
	switch {
	case err != nil:
		t.err = fmt.Errorf("%w: Transport: %w", ErrInvalidOption, err)
	case permits < 1 || permits > ratelimiter.MaxPermits:
		t.err = fmt.Errorf("%w: Transport.Permits %d", ErrInvalidOption, t.Permits)
	case t.MaxWait < 0:
		t.err = fmt.Errorf("%w: negative Transport.MaxWait %v", ErrInvalidOption, t.MaxWait)
	case t.FailureMode != FailOpen && t.FailureMode != FailClosed:
		t.err = fmt.Errorf("%w: unknown failure mode %d", ErrInvalidOption, int(t.FailureMode))
	}
}
