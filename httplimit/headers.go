package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter/gate"
)

// setHeaders writes RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-11) in requests, from the reply of
// the acquisition that decided: no other Redis call. The policy is rule
// when not "" (WithRules), otherwise WithPolicyName's. With rules,
// RateLimit-Policy lists every rule, the binding one first from the reply
// and the others as WithRules configures them. The binding policy is left
// out when the limiter's rate is below the permits a request takes, and
// RateLimit after a grant that waited (WithWait), whose reply does not
// carry the counts. WithLegacyHeaders adds X-RateLimit-Limit, -Remaining
// and -Reset with the same figures.
func (l *Middleware) setHeaders(h http.Header, o gate.Outcome, rule string) {
	res := o.Result
	name := l.policy
	if rule != "" {
		name = rule
	}
	var policies []string
	if res.Limit > 0 {
		policies = append(policies, l.policyItem(name, res.Limit, res.Interval))
	}
	for i, r := range l.rules {
		if r.Name != rule {
			policies = append(policies, l.rulePolicies[i])
		}
	}
	if len(policies) > 0 {
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	}
	var remaining, t int64
	switch {
	case !res.Granted:
		t = retrySeconds(res.RetryAfter)
	case o.Exact:
		remaining, t = res.Remaining/l.permits, ceilSeconds(res.ResetAfter)
	default:
		return
	}
	h.Set("RateLimit", strconv.Quote(name)+";r="+strconv.FormatInt(remaining, 10)+";t="+strconv.FormatInt(t, 10))
	if l.legacy {
		if res.Limit > 0 {
			h.Set("X-RateLimit-Limit", strconv.FormatInt(res.Limit/l.permits, 10))
		}
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		reset := t
		if l.legacyUnix {
			reset += time.Now().Unix()
		}
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
}

// policyItem is one RateLimit-Policy item: the quota in requests and, for
// a whole number of seconds, the window.
func (l *Middleware) policyItem(name string, rate int64, interval time.Duration) string {
	item := strconv.Quote(name) + ";q=" + strconv.FormatInt(rate/l.permits, 10)
	if interval >= time.Second && interval%time.Second == 0 {
		item += ";w=" + strconv.FormatInt(int64(interval/time.Second), 10)
	}
	return item
}
