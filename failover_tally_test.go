package ratelimiter_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/stretchr/testify/require"
)

// countCalls are the count worker's calls by the score of their record:
// the grants told to callers, and the calls that reported an error.
type countCalls struct {
	told   map[int64]callRec
	failed map[int64]bool
}

// tally goes through every recorded call: lateness, errors inside and
// outside the failover window, the first success after the kill, the
// latency before it, and the count calls for countLost.
func (fr *failoverRun) tally() (failoverResult, countCalls) {
	res := failoverResult{killAt: fr.killAt, stoppedAt: fr.stoppedAt}
	if last := fr.controlLastErr.Load(); last != 0 {
		res.controlWindow = time.Unix(0, last).Sub(fr.killAt)
	}
	counted := countCalls{told: map[int64]callRec{}, failed: map[int64]bool{}}
	var lastErrEnd time.Time
	var preKillLat []time.Duration
	for _, rs := range fr.recs {
		for _, r := range rs {
			res.calls++
			res.addLate(r, &fr.stalls)
			res.addOutcome(r, &lastErrEnd)
			if r.kind != "count" {
				continue
			}
			if r.end.Before(fr.killAt) {
				preKillLat = append(preKillLat, r.end.Sub(r.start))
			}
			if r.granted && r.err == nil {
				counted.told[r.seq] = r
			} else if r.err != nil {
				counted.failed[r.seq] = true
			}
		}
	}
	if !lastErrEnd.IsZero() {
		res.window = lastErrEnd.Sub(fr.killAt)
	}
	res.granted = len(counted.told)
	sort.Slice(preKillLat, func(i, j int) bool { return preKillLat[i] < preKillLat[j] })
	if n := len(preKillLat); n > 0 {
		res.p50 = preKillLat[n/2]
		res.p99 = preKillLat[n*99/100]
	}
	return res, counted
}

// addLate records r if it returned more than foDeadlineSlack after its
// deadline: as excused when a stall of the test process covers it.
func (res *failoverResult) addLate(r callRec, stalls *stallWatch) {
	late := r.end.Sub(r.start) - r.deadline
	if late <= foDeadlineSlack {
		return
	}
	msg := fmt.Sprintf("%s call at kill%+v took %v (deadline %v): %v",
		r.kind, r.start.Sub(res.killAt).Round(time.Millisecond), r.end.Sub(r.start).Round(time.Millisecond), r.deadline, r.err)
	if stalls.excuses(r, late) {
		res.excusedLate = append(res.excusedLate, msg)
	} else {
		res.lateCalls = append(res.lateCalls, msg)
	}
}

// addOutcome counts r's error (ErrReplicaAck apart), moves *lastErrEnd,
// notes an error outside [kill, kill+foRecoverWithin], and keeps the end
// of the first call that started and succeeded after the kill.
func (res *failoverResult) addOutcome(r callRec, lastErrEnd *time.Time) {
	killAt := res.killAt
	switch {
	case isAckOnly(r.err):
		res.ackOnly++
		if d := r.end.Sub(killAt); d > res.ackWindow {
			res.ackWindow = d
		}
	case r.err != nil:
		res.errs++
		if r.end.After(*lastErrEnd) {
			*lastErrEnd = r.end
		}
		if r.end.Before(killAt) || r.start.After(killAt.Add(foRecoverWithin)) {
			res.errsOutside = append(res.errsOutside, fmt.Sprintf("%s call at kill%+v: %v",
				r.kind, r.start.Sub(killAt).Round(time.Millisecond), r.err))
		}
	}
	if r.err == nil && r.end.After(killAt) && (res.firstOK == 0 || r.end.Sub(killAt) < res.firstOK) && r.start.After(killAt) {
		res.firstOK = r.end.Sub(killAt)
	}
}

// countLost reads the count limiter's records on the promoted master: a
// grant told to a caller without its record there is lost; a record of a
// call that reported an error (ErrReplicaAck included) is a phantom.
func (fr *failoverRun) countLost(ctx context.Context, res *failoverResult, counted countCalls) {
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	nm, err := fr.setup.promoted(pctx)
	require.NoError(fr.t, err)
	defer nm.Close()
	present := map[int64]bool{}
	for _, l := range fr.counts {
		zs, err := nm.ZRangeWithScores(ctx, l.Keys().Permits, 0, -1).Result()
		require.NoError(fr.t, err)
		for _, z := range zs {
			present[int64(z.Score)] = true
		}
	}
	for s := range counted.told {
		if !present[s] {
			res.lost++
		}
	}
	for s := range present {
		if counted.failed[s] {
			res.phantom++
		}
	}
}

// checkLimit checks that the limit holds after the failover: in every
// window of one interval (less 1 ms) after service came back, the calls
// that started and ended inside the window were granted at most the rate.
// Their records' scores (epoch milliseconds, rounded down) then differ by
// less than the interval, so a correct limiter cannot have granted more.
// (With the full interval, two calls 99.1 ms apart can get scores 100 ms
// apart, and the older record has rightly expired.) A limiter without a
// grant in that time goes to noService.
func (fr *failoverRun) checkLimit(res *failoverResult) {
	from := fr.killAt.Add(res.window).Add(foLimitInterval)
	for _, l := range foLimited {
		var grants []callRec
		for _, rs := range fr.recs[l.from : l.to+1] {
			for _, r := range rs {
				if r.granted && r.start.After(from) {
					grants = append(grants, r)
				}
			}
		}
		if len(grants) == 0 {
			res.noService = append(res.noService, l.name)
			continue
		}
		if v := res.firstViolation(l.name, grants, from); v != "" {
			res.limitViolation = append(res.limitViolation, v)
		}
	}
}

// firstViolation slides a window of foLimitInterval less 1 ms in 5 ms
// steps from from to kill+foHardStop and describes the first that holds
// more than foLimitRate of grants, or returns "".
func (res *failoverResult) firstViolation(label string, grants []callRec, from time.Time) string {
	win := foLimitInterval - time.Millisecond
	for a := from; a.Before(res.killAt.Add(foHardStop)); a = a.Add(5 * time.Millisecond) {
		var inside []callRec
		for _, r := range grants {
			if !r.start.Before(a) && r.end.Before(a.Add(win)) {
				inside = append(inside, r)
			}
		}
		if len(inside) <= foLimitRate {
			continue
		}
		var detail []string
		for _, r := range inside {
			detail = append(detail, fmt.Sprintf("[%v..%v %v]", r.start.Sub(res.killAt).Round(time.Millisecond), r.end.Sub(res.killAt).Round(time.Millisecond), r.err))
		}
		return fmt.Sprintf("%s: %d grants in the window at kill%+v: %v", label, len(inside), a.Sub(res.killAt).Round(time.Millisecond), detail)
	}
	return ""
}
