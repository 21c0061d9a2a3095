package main

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/goredisson/ratelimiter"
)

// rlsService answers Envoy's ShouldRateLimit from Redisson limiters: each
// matched descriptor's limit is the limiter limiterName names, configured
// with the limit's rate per unit (Overall mode, shared by every instance
// of the service and by Java services that open the same name).
type rlsService struct {
	rlspb.UnimplementedRateLimitServiceServer
	client *ratelimiter.Client
	cfg    atomic.Pointer[rlsConfig] // swapped whole by a reload
	// failDeny: a descriptor whose limiter Redis could not decide on in
	// time is OVER_LIMIT (--failure-mode deny), else OK.
	failDeny bool
	// refuseUnconfigured: a descriptor that matches no limit is OVER_LIMIT
	// (--refuse-unconfigured), else OK as in Envoy's service.
	refuseUnconfigured bool
	// decisionTimeout bounds the Redis calls of one request when the
	// caller's deadline does not come sooner.
	decisionTimeout time.Duration
	// keepAlive is the KeepAlive of the limiters serve sets up (at least
	// their interval), 0 for none.
	keepAlive time.Duration
	metrics   *serveMetrics
	logf      func(format string, args ...any)
}

// errEmptyRequest is a request Envoy's service refuses too.
var errEmptyRequest = errors.New("the request needs a domain and at least one descriptor")

// ShouldRateLimit decides a request: every descriptor is decided on its
// own (its limiter takes its permits whether or not another descriptor is
// over), and the overall code is OVER_LIMIT when a descriptor that is not
// in shadow mode or quota mode is over, or when every quota-mode
// descriptor is.
func (s *rlsService) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp, err := s.decide(ctx, req, "grpc")
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return resp, nil
}

// decide is ShouldRateLimit for both APIs; api labels the metrics.
func (s *rlsService) decide(ctx context.Context, req *rlspb.RateLimitRequest, api string) (*rlspb.RateLimitResponse, error) {
	start := time.Now()
	if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
		return nil, errEmptyRequest
	}
	cfg := s.cfg.Load()
	domainLabel := req.GetDomain()
	if cfg.domains[domainLabel] == nil {
		// Requests choose the domain: an unknown one is not a label of its
		// own, so that a client cannot grow the series without bound.
		domainLabel = "(unknown)"
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()

	descs := req.GetDescriptors()
	matches := make([]rlsMatch, len(descs))
	replaced := map[string]bool{}
	for i, d := range descs {
		matches[i] = cfg.match(req.GetDomain(), d)
		if l := matches[i].limit; l != nil {
			for _, r := range l.replaces {
				replaced[r] = true
			}
		}
	}
	resp := &rlspb.RateLimitResponse{Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(descs))}
	over, quotas, quotasOver := false, 0, 0
	for i, d := range descs {
		m := matches[i]
		l := m.limit
		if l != nil && l.name != "" && replaced[l.name] {
			// A limit that another matched limit replaces is neither
			// checked nor charged.
			l = nil
		}
		var st *rlspb.RateLimitResponse_DescriptorStatus
		switch {
		case l == nil && !m.configured && s.refuseUnconfigured:
			st = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OVER_LIMIT}
		case l == nil:
			st = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		case l.unlimited:
			st = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		default:
			hits := uint64(max(1, req.GetHitsAddend()))
			if h := d.GetHitsAddend(); h != nil {
				hits = h.GetValue()
			}
			st = s.check(ctx, m.name, l, hits, domainLabel)
		}
		resp.Statuses[i] = st
		overHere := st.Code == rlspb.RateLimitResponse_OVER_LIMIT
		switch {
		case l != nil && l.shadow && overHere:
			// shadow_mode: the limiter counts as usual, the answer is OK.
			st.Code = rlspb.RateLimitResponse_OK
			s.metrics.shadow.WithLabelValues(domainLabel).Inc()
		case l != nil && l.quota:
			quotas++
			if overHere {
				quotasOver++
			}
		case overHere:
			over = true
		}
	}
	resp.OverallCode = rlspb.RateLimitResponse_OK
	if over || (quotas > 0 && quotas == quotasOver) {
		resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
	}
	s.metrics.decisions.WithLabelValues(domainLabel, resp.OverallCode.String()).Inc()
	s.metrics.latency.WithLabelValues(api).Observe(time.Since(start).Seconds())
	return resp, nil
}

// deadline bounds the request's Redis calls: by --decision-timeout, and
// by the caller's deadline (Envoy's filter sends its timeout, 20 ms by
// default) less a tenth of the time left, at least a millisecond, kept to
// write the answer, so that a Redis that does not answer gets the
// failure mode's answer to the caller in time instead of none.
func (s *rlsService) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.decisionTimeout
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		d = min(d, left-max(left/10, time.Millisecond))
	}
	// A context that is already past: the calls fail at once and the
	// failure mode answers.
	return context.WithTimeout(ctx, max(d, 0))
}

// check takes hits permits from the descriptor's limiter and reports its
// status. The limiter is set up (TrySetRate) the first time it is found
// missing; when Redis holds another rate or interval than the file (the
// file changed, or someone set it), the file's is written over it,
// keeping the limiter's state (UpdateRate with KeepState): the file is
// the source of truth.
func (s *rlsService) check(ctx context.Context, name string, l *rlsLimit, hits uint64, domainLabel string) *rlspb.RateLimitResponse_DescriptorStatus {
	limit := &rlspb.RateLimitResponse_RateLimit{Name: l.name, RequestsPerUnit: l.rate, Unit: l.unit}
	st := &rlspb.RateLimitResponse_DescriptorStatus{CurrentLimit: limit}
	if hits > uint64(l.rate) {
		// More than the limit can ever grant (requests_per_unit 0 bars
		// every request): over, without asking Redis.
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
		st.DurationUntilReset = durationpb.New(l.interval)
		return st
	}
	cfg := ratelimiter.Config{Rate: int64(l.rate), Interval: l.interval}
	if s.keepAlive > 0 {
		cfg.KeepAlive = max(s.keepAlive, l.interval)
	}
	lim := s.client.Limiter(name)
	if hits == 0 {
		// A check that takes nothing (Envoy's check-at-request,
		// charge-at-response pattern): OVER_LIMIT when no permit is left,
		// else OK, with the permits left. One Redis call, AvailablePermits
		// (its script drops the records whose interval ended, takes
		// nothing and sets nothing up); a missing limiter has its whole
		// rate. Under another rate in Redis it reads that limiter as it
		// is: the next charge writes the file's rate.
		avail, err := lim.AvailablePermits(ctx)
		if errors.Is(err, ratelimiter.ErrNotInitialized) {
			avail, err = int64(l.rate), nil
		}
		if err != nil {
			return s.failed(st, name, err, domainLabel)
		}
		avail = max(avail, 0)
		st.LimitRemaining = uint32(min(avail, math.MaxUint32))
		st.Code = rlspb.RateLimitResponse_OK
		if avail == 0 {
			st.Code = rlspb.RateLimitResponse_OVER_LIMIT
		}
		return st
	}
	res, err := lim.Allow(ctx, int64(hits))
	if errors.Is(err, ratelimiter.ErrNotInitialized) {
		if _, err = lim.TrySetRate(ctx, cfg); err == nil {
			res, err = lim.Allow(ctx, int64(hits))
		}
	}
	if err == nil && (res.Limit != cfg.Rate || res.Interval != cfg.Interval) || errors.Is(err, ratelimiter.ErrPermitsExceedRate) {
		// Redis holds another rate (ErrPermitsExceedRate: hits are within
		// the file's rate, so Redis holds a lower one). A grant under it
		// stands; a refusal is asked again under the file's rate.
		updated, uerr := lim.UpdateRate(ctx, cfg, ratelimiter.KeepState())
		if uerr != nil {
			s.logf("limiter %q: writing the configured rate: %v", name, uerr)
		}
		if updated && (err != nil || !res.Granted) {
			res, err = lim.Allow(ctx, int64(hits))
		}
	}
	if err != nil {
		return s.failed(st, name, err, domainLabel)
	}
	st.LimitRemaining = uint32(min(max(res.Remaining, 0), math.MaxUint32))
	if res.Granted {
		st.Code = rlspb.RateLimitResponse_OK
		st.DurationUntilReset = durationpb.New(res.ResetAfter)
	} else {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
		st.DurationUntilReset = durationpb.New(res.RetryAfter)
	}
	return st
}

// failed is the status of a descriptor whose limiter could not be read:
// --failure-mode's answer.
func (s *rlsService) failed(st *rlspb.RateLimitResponse_DescriptorStatus, name string, err error, domainLabel string) *rlspb.RateLimitResponse_DescriptorStatus {
	s.metrics.failures.WithLabelValues(domainLabel).Inc()
	s.logf("limiter %q: %v", name, err)
	st.Code = rlspb.RateLimitResponse_OK
	if s.failDeny {
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
	}
	return st
}
