package ratelimiterotel

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goredisson/ratelimiter/httplimit"
)

// Request metrics for middlewares, shaped like ASP.NET Core's rate
// limiting metrics (aspnetcore.rate_limiting.requests: one counter of
// requests by policy and result), the one stable convention for them.

// Request results, the values of AttrResult.
const (
	// ResultAcquired: the request got its permits and was served.
	ResultAcquired = "acquired"
	// ResultLimited: the request was refused (or would have been, in
	// shadow mode).
	ResultLimited = "limited"
)

// Request attributes.
const (
	// AttrPolicy names the policy that decided: a rule (WithRules), a
	// tier (WithTiers), or the policy name of the RateLimit fields.
	AttrPolicy = attribute.Key("ratelimiter.policy")
	// AttrResult is ResultAcquired or ResultLimited.
	AttrResult = attribute.Key("ratelimiter.result")
)

// Request counts one request a middleware decided, by policy and result,
// in ratelimiter.requests. Call it from a middleware's decision hook;
// HTTPDecisionHook does for httplimit.
func (m *Metrics) Request(ctx context.Context, policy string, granted bool) {
	result := ResultAcquired
	if !granted {
		result = ResultLimited
	}
	m.requests.Add(ctx, 1, metric.WithAttributes(AttrPolicy.String(policy), AttrResult.String(result)))
}

// HTTPDecisionHook returns an httplimit decision hook that counts each
// request in ratelimiter.requests; policy names the policy of a request
// decided by no rule or tier (httplimit's default is "default").
func (m *Metrics) HTTPDecisionHook(policy string) func(*http.Request, httplimit.Decision) {
	return func(r *http.Request, d httplimit.Decision) {
		p := policy
		switch {
		case d.Rule != "":
			p = d.Rule
		case d.Tier != "":
			p = d.Tier
		}
		m.Request(r.Context(), p, d.Granted)
	}
}
