// Package grpclimit rate-limits gRPC calls with the Redisson-compatible
// limiters of package ratelimiter, in both directions.
//
// Incoming calls: New makes an Interceptor whose Unary and Stream server
// interceptors map each call by a key function (peer address by default,
// a metadata key, the full method name, or your own) to a limiter named
// Prefix+key, configured on first use with the Config given to New
// (TrySetRate: a limiter that exists keeps its configuration). A call
// that gets its permits goes on to the handler; one that does not fails
// with codes.ResourceExhausted and the details google.rpc.RetryInfo (the
// wait hint) and google.rpc.QuotaFailure (the limiter's name and rate).
// A stream takes its permits once, when it opens. With WithRules, each
// call takes its permits from several limiters of its key at once ("10
// per second and 1,000 per hour"), all or none, in one script call.
//
//	lim, err := grpclimit.New(rdb, ratelimiter.Config{Rate: 100, Interval: time.Second})
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
//
// Outgoing calls: an Outgoing's client interceptors take permits from one
// limiter before each call, so that all callers of a remote API sharing
// the limiter, Go or Java, together stay under its limit.
//
// When Redis fails, the interceptors fail open by default (the call is
// served, or sent, unmetered, and the error goes to the error hook);
// FailClosed makes them fail the call with codes.Unavailable. An incoming
// call whose context ended while Redis did not answer (canceled, or its
// deadline passed: a gRPC client enforces its deadline itself and has
// stopped waiting) fails with the context's status in either mode. With
// the Client option ratelimiter.WithOutageFallback (WithClientOptions, or
// on the Client given to Outgoing), calls whose limiter the Client has
// seen are decided in this process while Redis is unreachable, at the
// fallback's share of the rate: the answer is the usual OK or
// RESOURCE_EXHAUSTED (the QuotaFailure then names the local limit), the
// server Decision has Degraded set, and the failure mode applies only to
// limiters the Client has not seen and to Redis errors that are not
// connection failures. In shadow mode (WithShadow) every incoming call is
// decided and reported but served.
package grpclimit

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goredisson/ratelimiter"
)

// ErrInvalidOption is returned by New for an option or Config outside its
// documented range. It matches ratelimiter.ErrInvalidArgument too.
var ErrInvalidOption = fmt.Errorf("%w: grpclimit", ratelimiter.ErrInvalidArgument)

// ErrNoKey is passed to the error hook when the key function returns the
// empty string; the call then fails with codes.InvalidArgument.
var ErrNoKey = errors.New("grpclimit: the key function returned no key for the call")

// ErrLimited is matched (errors.Is) by the error of an outgoing call that
// an Outgoing did not send because its permits could not come within
// MaxWait or before the call's deadline. The error carries the status
// codes.ResourceExhausted (status.Code finds it).
var ErrLimited = errors.New("grpclimit: rate limited: the permits cannot come in time")

// FailureMode says what an interceptor does when Redis (or the limiter)
// returns an error instead of a decision.
type FailureMode int

const (
	// FailOpen serves (or sends) the call as if it had been granted. It is
	// the default: a Redis outage does not take the service down, but it
	// is unlimited meanwhile.
	FailOpen FailureMode = iota
	// FailClosed fails the call with codes.Unavailable: nothing gets
	// through unmetered while Redis is down.
	FailClosed
)

// PushbackTrailer is the trailer a refused call carries with the wait
// hint in whole milliseconds, rounded up: grpc-go's client retry policy
// (gRFC A6) waits that long before its next attempt when
// RESOURCE_EXHAUSTED is among its retryable codes, instead of its own
// backoff.
const PushbackTrailer = "grpc-retry-pushback-ms"

// pushbackMillis is d in whole milliseconds, rounded up, as decimal text.
func pushbackMillis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// quota names what a refused call ran into, for QuotaFailure.
type quota struct {
	rule, key, method string // rule: "" without WithRules
}

// refusal returns the status of a refused call: ResourceExhausted with
// RetryInfo carrying the hint and a QuotaFailure violation naming the
// limiter (Subject), the rule (QuotaId: its name, or "default"), what is
// counted (QuotaMetric "ratelimiter/permits"), the rate (QuotaValue) and
// the call's key and method (QuotaDimensions).
func refusal(name string, q quota, res ratelimiter.Result) *status.Status {
	st := status.New(codes.ResourceExhausted, "rate limit exceeded; retry after "+res.RetryAfter.Round(time.Millisecond).String())
	desc := "rate limit exceeded"
	if res.Limit > 0 {
		desc = fmt.Sprintf("rate limit of %d per %v exceeded", res.Limit, res.Interval)
	}
	id := q.rule
	if id == "" {
		id = "default"
	}
	dims := map[string]string{"key": q.key}
	if q.method != "" {
		dims["method"] = q.method
	}
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(res.RetryAfter)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: name, Description: desc,
			QuotaMetric: "ratelimiter/permits", QuotaId: id, QuotaValue: res.Limit, QuotaDimensions: dims,
		}}},
	)
	if err != nil {
		return st
	}
	return withDetails
}

// RetryAfter returns the wait hint of a refusal's RetryInfo detail and
// true, or 0 and false when err carries none. It reads the status of an
// error returned by a gRPC call or an interceptor.
func RetryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
