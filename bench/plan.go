package main

import "time"

// plan is how long and how much each measurement runs.
type plan struct {
	name    string
	rounds  int           // throughput and latency rounds, contenders alternated in each
	round   time.Duration // one contender's run per round, path and callers
	callers []int         // concurrent callers on one hot key
	warmup  time.Duration // each contender runs 16 callers this long first (Redisson 3x: the JIT)

	latencyRounds int // latency rounds, contenders alternated in each
	latencyCalls  int // sequential calls per contender and round

	idleLimiters     int // limiters created for memory per idle limiter
	idleLimitersJava int // the same for Redisson (each one two peer commands)
	windowPermits    int // grants held in one window for memory per permit

	exactRate     int64         // rate of the exactness runs
	exactInterval time.Duration // their interval
	exactCallers  int
	bursts        int // window boundaries the burst run hammers
	steady        int // intervals of the steady overload run (the first is not counted)
}

// fullPlan is `make bench`: about 4 minutes on a quiet 2-core machine.
var fullPlan = plan{
	name:             "full",
	rounds:           3,
	round:            600 * time.Millisecond,
	warmup:           time.Second,
	callers:          []int{1, 16, 64},
	latencyRounds:    10,
	latencyCalls:     300,
	idleLimiters:     100_000,
	idleLimitersJava: 10_000,
	windowPermits:    10_000,
	exactRate:        500,
	exactInterval:    time.Second,
	exactCallers:     16,
	bursts:           3,
	steady:           3,
}

// quickPlan is `make bench-quick` and the end-to-end test: every
// contender, every measurement, briefly.
var quickPlan = plan{
	name:             "quick",
	rounds:           1,
	round:            150 * time.Millisecond,
	warmup:           200 * time.Millisecond,
	callers:          []int{1, 16, 64},
	latencyRounds:    2,
	latencyCalls:     100,
	idleLimiters:     2_000,
	idleLimitersJava: 300,
	windowPermits:    1_000,
	exactRate:        100,
	exactInterval:    400 * time.Millisecond,
	exactCallers:     16,
	bursts:           2,
	steady:           3,
}
