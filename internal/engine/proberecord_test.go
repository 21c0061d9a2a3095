package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/goredisson/ratelimiter/wire"
)

// The probe record is sparse where a retake every interval would cost
// more than issue 40's bounds: a rate of fewer than wire.ProbeHold /
// probeIdleShare (22) permit-seconds an interval, or a census that
// counted fewer than probeCallFloor Go records in an interval. Before the
// first reply and census nothing says so.
func TestProbeSparse(t *testing.T) {
	for _, c := range []struct {
		rate     int64
		interval time.Duration
		censuses int
		calls    int
		want     bool
	}{
		{0, time.Second, 0, 0, false},
		{50, time.Second, 0, 0, false},
		{25, 500 * time.Millisecond, 0, 0, true},
		{10, time.Second, 0, 0, true},
		{22, time.Second, 0, 0, false},
		{50, time.Second, 1, probeCallFloor - 1, true},
		{50, time.Second, 1, probeCallFloor, false},
		{1000, 100 * time.Millisecond, 3, 40, false},
	} {
		f := &fleet{rate: c.rate, interval: c.interval, censuses: c.censuses, goCalls: c.calls}
		if got := f.probeSparse(); got != c.want {
			t.Errorf("%d per %v, %d censuses, %d calls: sparse %v, want %v", c.rate, c.interval, c.censuses, c.calls, got, c.want)
		}
	}
}

// A census counts the Go fleet's granting calls by their records in the
// interval before the newest: marked records, not the probe record, not
// Redisson's, not older ones.
func TestSidesCountGoRecords(t *testing.T) {
	now := time.Now()
	zs := []Record{
		record(now.Add(-1500*time.Millisecond), 1, true), // older than an interval before the newest
		record(now.Add(-500*time.Millisecond), 3, true),
		record(now.Add(-400*time.Millisecond), 1, false),
		{Score: float64(now.Add(-300 * time.Millisecond).UnixMilli()), Member: string(wire.ProbeRecord(wire.Bc0I))},
		record(now, 2, true),
	}
	if c := sides(zs, time.Second); c.goRecords != 2 || c.ours != 6 || c.others != 1 {
		t.Fatalf("sides: %+v; want 2 Go records, 6 permits ours (the probe record's too), 1 others'", c)
	}
}

// The probe record's owner sends the first request a call refused back
// for it when its hold ends (and the margin), unless that request calls
// before then anyway, once per record; a Client that does not own it,
// or one whose probe record is sparse, sends nobody.
func TestNoteProbeRetake(t *testing.T) {
	e, c := newFakeEngine(Options{MaxBatch: 128})
	l := &lane{key: "k"}
	now := c.Now()
	refused := func(hints ...time.Duration) *Reply {
		b := &Reply{}
		for _, h := range hints {
			b.Verdicts = append(b.Verdicts, Verdict{Res: Result{RetryAfter: h}})
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		note   ProbeNote
		sparse bool
		hints  []time.Duration
		want   []time.Duration
	}{
		{"owner, hint past the retake", ProbeNote{Read: true, There: true, Wrote: true, Until: time.Second}, false,
			[]time.Duration{2 * time.Second, 2 * time.Second}, []time.Duration{time.Second + wire.ProbeHold + probeRetakeMargin, 2 * time.Second}},
		{"owner, hint before it", ProbeNote{Read: true, There: true, Wrote: true, Until: time.Second}, false,
			[]time.Duration{500 * time.Millisecond}, []time.Duration{500 * time.Millisecond}},
		{"not the owner", ProbeNote{Read: true, There: true, Found: true, Until: time.Second}, false,
			[]time.Duration{2 * time.Second}, []time.Duration{2 * time.Second}},
		{"owner, sparse", ProbeNote{Read: true, There: true, Wrote: true, Until: time.Second}, true,
			[]time.Duration{2 * time.Second}, []time.Duration{2 * time.Second}},
	} {
		f := &fleet{interval: time.Second, rate: 50}
		if tc.sparse {
			f.censuses, f.goCalls = 1, 1
		}
		e.lanes.mu.Lock()
		e.lanes.fleets = map[string]*fleet{"k": f}
		e.lanes.mu.Unlock()
		b := refused(tc.hints...)
		b.Probe = tc.note
		e.noteProbe(l, nil, b, now, now)
		var got []time.Duration
		for _, v := range b.Verdicts {
			got = append(got, v.Res.RetryAfter)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: hints %v, want %v", tc.name, got, tc.want)
		}
		// A second reply about the same record sends nobody back again.
		b = refused(tc.hints...)
		e.noteProbe(l, nil, b, now, now)
		if b.Verdicts[0].Res.RetryAfter != tc.hints[0] {
			t.Errorf("%s: the second reply's first hint %v, want %v", tc.name, b.Verdicts[0].Res.RetryAfter, tc.hints[0])
		}
	}
}
