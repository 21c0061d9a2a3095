package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/gate"
)

// Outgoing holds client interceptors that take permits from one limiter
// (or from every part of a Composite at once) before each outgoing call
// (a stream: once, when it opens), so that every
// process sharing the limiter, Go with this package or Java with
// Redisson, together stays under a remote service's limit. A call waits
// for its permits up to MaxWait, or when MaxWait is 0 up to its context's
// deadline (as long as it takes without one); when the wait hint shows
// the permits cannot come in time it fails at once, without being sent,
// with an error that matches ErrLimited and carries
// codes.ResourceExhausted. The other errors it returns before sending also
// carry a status (status.Code) and match their cause (errors.Is):
// ErrInvalidOption (InvalidArgument) for fields out of range or that do
// not fit together (no Limiter nor Composite, both, Config with
// Composite, Configs without it or not one per part),
// ratelimiter.ErrPermitsExceedRate (ResourceExhausted) when the limiter's
// (or a part's) rate is below Permits, in either failure mode, and with FailClosed the
// limiter's error (Unavailable); a call whose context ends while waiting
// gets its context's status.
//
// As with httplimit.Transport, the limit holds for the clock readings of
// the grants; give Interval a margin over the remote service's window
// larger than the spread of the delay from grant to arrival (docs/grpc.md,
// "Outgoing calls", and docs/http.md, "Outgoing requests", have the
// margins measured and the tests that measure them).
//
// Set the fields before the first call and do not change them after; it
// is then safe for concurrent use.
type Outgoing struct {
	// Limiter gives the permits. Set Limiter or Composite, not both.
	Limiter *ratelimiter.Limiter
	// Config, when its Rate is not 0, configures the limiter on first use
	// (TrySetRate). With the zero Config the limiter must be configured
	// elsewhere, or calls fail with ratelimiter.ErrNotInitialized. It
	// must be the zero Config with Composite.
	Config ratelimiter.Config
	// Composite, instead of Limiter, gives the permits from every part at
	// once, all or none (ratelimiter.Client.All): for a remote service's
	// "10 per second and 1,000 per hour". A call waits until every part
	// can grant.
	Composite *ratelimiter.Composite
	// Configs, with Composite, configures part i with Configs[i] on first
	// use (TrySetRate); a zero Config leaves that part to be configured
	// elsewhere. nil configures no part; otherwise it must hold one Config
	// per part.
	Configs []ratelimiter.Config
	// Permits is the permits each call takes; 0 means 1.
	Permits int64
	// MaxWait bounds the wait for permits; 0 means up to the call's
	// context deadline.
	MaxWait time.Duration
	// FailureMode says what a call does when Redis fails: FailOpen (the
	// zero value) sends it unmetered, FailClosed fails it with
	// codes.Unavailable.
	FailureMode FailureMode
	// OnError, when not nil, is called with every error of the limiter
	// (Redis failures), whatever the FailureMode.
	OnError func(ctx context.Context, method string, err error)

	once   sync.Once
	gate   *gate.Gate
	target gate.Target
	label  string // the limiter's name, or the Composite's names joined by "+"
	err    error
}

// Unary returns the unary client interceptor.
func (o *Outgoing) Unary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := o.take(ctx, method); err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// Stream returns the stream client interceptor.
func (o *Outgoing) Stream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := o.take(ctx, method); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// callError is an outgoing call failed before it was sent: a gRPC status
// for status.Code and the cause for errors.Is.
type callError struct {
	st    *status.Status
	cause error
}

func (e callError) Error() string              { return e.st.Message() }
func (e callError) GRPCStatus() *status.Status { return e.st }
func (e callError) Unwrap() error              { return e.cause }

func failCall(c codes.Code, cause error) error {
	return callError{status.New(c, cause.Error()), cause}
}

// take waits for the permits; it returns nil when the call may be sent.
func (o *Outgoing) take(ctx context.Context, method string) error {
	o.once.Do(o.init)
	if o.err != nil {
		return failCall(codes.InvalidArgument, o.err)
	}
	ok, err := o.gate.Wait(ctx, o.target, o.MaxWait)
	switch {
	case ok:
		return nil
	case err == nil:
		return failCall(codes.ResourceExhausted, fmt.Errorf("%w: limiter %q", ErrLimited, o.label))
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	if o.OnError != nil {
		o.OnError(ctx, method, err)
	}
	if errors.Is(err, ratelimiter.ErrPermitsExceedRate) {
		return failCall(codes.ResourceExhausted, err)
	}
	if o.FailureMode == FailClosed {
		return failCall(codes.Unavailable, err)
	}
	return nil
}

func (o *Outgoing) init() {
	permits := o.Permits
	if permits == 0 {
		permits = 1
	}
	var err error
	o.gate, o.target, o.label, err = gate.ForCalls(o.Limiter, o.Config, o.Composite, o.Configs, permits)
	switch {
	case err != nil:
		o.err = fmt.Errorf("%w: Outgoing: %w", ErrInvalidOption, err)
	case permits < 1 || permits > ratelimiter.MaxPermits:
		o.err = fmt.Errorf("%w: Outgoing.Permits %d", ErrInvalidOption, o.Permits)
	case o.MaxWait < 0:
		o.err = fmt.Errorf("%w: negative Outgoing.MaxWait %v", ErrInvalidOption, o.MaxWait)
	case o.FailureMode != FailOpen && o.FailureMode != FailClosed:
		o.err = fmt.Errorf("%w: unknown failure mode %d", ErrInvalidOption, int(o.FailureMode))
	}
}
