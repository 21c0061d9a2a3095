package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/goredisson/ratelimiter/gate"
)

// setHeaders writes RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-11) in requests, from the reply of
// the acquisition that decided: no other Redis call. RateLimit-Policy is
// left out when the limiter's rate is below the permits a request takes,
// and RateLimit after a grant that waited (WithWait), whose reply does not
// carry the counts. The policy is rule when not "" (WithRules), otherwise
// WithPolicyName's.
func (l *Middleware) setHeaders(h http.Header, o gate.Outcome, rule string) {
	res := o.Result
	name := l.policy
	if rule != "" {
		name = rule
	}
	if res.Limit > 0 {
		policy := strconv.Quote(name) + ";q=" + strconv.FormatInt(res.Limit/l.permits, 10)
		if res.Interval >= time.Second && res.Interval%time.Second == 0 {
			policy += ";w=" + strconv.FormatInt(int64(res.Interval/time.Second), 10)
		}
		h.Set("RateLimit-Policy", policy)
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
}
