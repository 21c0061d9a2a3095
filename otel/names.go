package ratelimiterotel

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/goredisson/ratelimiter"
)

// Outcomes, as indexes and attribute values.
const (
	outGranted = iota
	outRefused
	outError
)

var outcomes = [...]string{"granted", "refused", "error"}

// Where a lease's permits went (LeaseEvent.HandedOut, Returned, Kept), as
// indexes and ratelimiter.lease.outcome values.
var leaseOutcomes = [...]string{"handed_out", "returned", "kept"}

// leaseEnds are the ratelimiter.lease.end values by endIndex: the known
// ratelimiter.LeaseEnd names, and "other" at 0 for any other value.
var leaseEnds = func() (e [ratelimiter.LeaseRefused + 1]string) {
	e[0] = "other"
	for end := ratelimiter.LeaseExhausted; end <= ratelimiter.LeaseRefused; end++ {
		e[end] = end.String()
	}
	return e
}()

// opts is one attribute set, made once, as the options the instruments
// take: recording with it allocates nothing.
type opts struct {
	attrs []attribute.KeyValue
	add   []metric.AddOption
	rec   []metric.RecordOption
}

func newOpts(kv ...attribute.KeyValue) opts {
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	return opts{attrs: kv, add: []metric.AddOption{set}, rec: []metric.RecordOption{set}}
}

// limiterAttrs are the attribute sets of one ratelimiter.name value.
type limiterAttrs struct {
	limiter  opts       // {name}
	op       [4]opts    // {name, operation}
	decision [4][3]opts // {name, operation, outcome}
	leased   [4]opts    // {name, operation, outcome=granted, leased=true}
	degraded [4][3]opts // {name, operation, outcome, degraded=true}
	// {name, lease outcome}: ratelimiter.lease.permits
	leasePermits [len(leaseOutcomes)]opts
	// {name, lease end}: ratelimiter.leases
	leaseEnd [len(leaseEnds)]opts
}

func newLimiterAttrs(name string) *limiterAttrs {
	var base []attribute.KeyValue
	if name != "" {
		base = []attribute.KeyValue{AttrLimiter.String(name)}
	}
	with := func(kv ...attribute.KeyValue) []attribute.KeyValue {
		return append(append([]attribute.KeyValue(nil), base...), kv...)
	}
	a := &limiterAttrs{limiter: newOpts(base...)}
	for op := range a.op {
		opName := ratelimiter.Op(op).String()
		if op == 0 {
			opName = "other"
		}
		a.op[op] = newOpts(with(AttrOperation.String(opName))...)
		for out, outName := range outcomes {
			a.decision[op][out] = newOpts(with(AttrOperation.String(opName), AttrOutcome.String(outName))...)
			a.degraded[op][out] = newOpts(with(AttrOperation.String(opName), AttrOutcome.String(outName), AttrDegraded.Bool(true))...)
		}
		a.leased[op] = newOpts(with(AttrOperation.String(opName), AttrOutcome.String(outcomes[outGranted]), AttrLeased.Bool(true))...)
	}
	for i, v := range leaseOutcomes {
		a.leasePermits[i] = newOpts(with(AttrLeaseOutcome.String(v))...)
	}
	for i, v := range leaseEnds {
		a.leaseEnd[i] = newOpts(with(AttrLeaseEnd.String(v))...)
	}
	return a
}

// decided is the attribute set of d on ratelimiter.decisions and its trace
// event: a grant from a lease adds ratelimiter.leased=true, a decision
// made locally in an outage ratelimiter.degraded=true; other decisions do
// not carry those attributes.
func (a *limiterAttrs) decided(op int, d ratelimiter.Decision) *opts {
	out := outcome(d)
	if d.Degraded {
		return &a.degraded[op][out]
	}
	if d.Leased && out == outGranted {
		return &a.leased[op]
	}
	return &a.decision[op][out]
}

// maxRawNames bounds the cache of names as the Client gives them; past it
// every decision maps its name again (still bounded by maxLimiters).
const maxRawNames = 4096

// names turns limiter names into attribute sets, bounding the distinct
// values at maxLimiters.
type names struct {
	mapName     func(string) string
	maxLimiters int32
	raw         sync.Map // name as given -> *limiterAttrs
	nRaw        atomic.Int32
	mu          sync.Mutex
	mapped      map[string]*limiterAttrs // ratelimiter.name value -> sets
	other       *limiterAttrs
}

func newNames(mapName func(string) string, maxLimiters int) *names {
	return &names{mapName: mapName, maxLimiters: int32(maxLimiters),
		mapped: map[string]*limiterAttrs{}, other: newLimiterAttrs(OtherLimiters)}
}

// get returns the attribute sets of the limiter called name.
func (n *names) get(name string) *limiterAttrs {
	if a, ok := n.raw.Load(name); ok {
		return a.(*limiterAttrs)
	}
	a := n.byValue(n.mapName(name))
	if n.nRaw.Load() < maxRawNames {
		if _, loaded := n.raw.LoadOrStore(name, a); !loaded {
			n.nRaw.Add(1)
		}
	}
	return a
}

func (n *names) byValue(v string) *limiterAttrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.mapped[v]; ok {
		return a
	}
	if int32(len(n.mapped)) >= n.maxLimiters {
		return n.other
	}
	a := newLimiterAttrs(v)
	n.mapped[v] = a
	return a
}
