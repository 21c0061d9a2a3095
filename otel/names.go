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
		}
	}
	return a
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
