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

	blockedCallers int           // callers blocked in acquire(1) on one limiter
	blockedRate    int64         // its rate per second
	blockedRun     time.Duration // each contender's run per round (plan.rounds rounds)

	multiRounds int // composite rounds, composite and separate calls alternated
	multiCalls  int // decisions per side and round

	instrFill  int // records in the granted path's window before counting
	instrCalls int // calls counted per side and path

	windowRecords []int // records in the window of the Redis-time-by-window runs
	costRounds    int   // rounds of the window, caller's cost and replica runs
	costCalls     int   // sequential calls per side and round in them

	fleetClients []int         // the fleet section's shapes: Clients sharing one limiter
	fleetCallers int           // callers in all, spread evenly over the Clients
	fleetRounds  int           // rounds per shape and regime, contenders alternated in each
	fleetWarmup  time.Duration // each contender's warm-up per shape (Redisson 3x)
	fleetOver    fleetRegime   // most decisions refused; its run spans a window's end
	fleetUnder   fleetRegime   // most decisions granted, at a high rate
	// leaseRegimes are the largest fleet's regimes for leases
	// (leaseregimes.go): how long and how near the rate it asks.
	leaseRegimes []fleetRegime
	rbRequests   int // requests per redis-benchmark run (the floor beside the fleet)

	keyedLimiters []int         // the many-keys section's limiter counts
	keyedCallers  int           // concurrent callers, each on a limiter drawn at random per decision
	keyedRounds   int           // rounds per regime and count, contenders alternated in each
	keyedRound    time.Duration // one contender's run per round (after a fifth of it as warm-up)

	loneCalls int // steps of the lone-caller section per path (each calls every side once)

	svcCallers   int           // the service section's concurrent gRPC callers
	svcRounds    int           // rounds per shape, the two services alternated in each
	svcRound     time.Duration // one service's run per round (after a fifth of it as warm-up)
	svcUsers     int           // descriptors of the per-user shape
	svcNearRate  int           // per second and route, of the hot routes near the limit
	svcBurstRate int           // per second, of the boundary bursts
	svcBursts    int           // second boundaries the bursts hammer
}

// fullPlan is `make bench`: about 12 minutes on a 2-core machine.
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
	blockedCallers:   100,
	blockedRate:      50,
	blockedRun:       2 * time.Second,
	multiRounds:      9,
	multiCalls:       1000,
	instrFill:        2000,
	instrCalls:       1000,
	windowRecords:    []int{1_000, 100_000},
	costRounds:       10,
	costCalls:        1000,
	fleetClients:     []int{1, 4, 16, 64},
	fleetCallers:     64,
	fleetRounds:      3,
	fleetWarmup:      300 * time.Millisecond,
	fleetOver:        fleetRegime{name: "over-asking", rate: 100, interval: 500 * time.Millisecond, run: 700 * time.Millisecond},
	fleetUnder:       fleetRegime{name: "under-asking", rate: 1_000_000, interval: time.Second, run: 500 * time.Millisecond},
	rbRequests:       100_000,
	keyedLimiters:    []int{20_000, 100_000},
	keyedCallers:     64,
	keyedRounds:      5,
	keyedRound:       2 * time.Second,
	loneCalls:        5_000,
	svcCallers:       64,
	svcRounds:        5,
	svcRound:         2 * time.Second,
	svcUsers:         20_000,
	svcNearRate:      2_000,
	svcBurstRate:     100,
	svcBursts:        3,
	leaseRegimes: []fleetRegime{
		{name: "1,000,000/s for 500 ms", rate: 1_000_000, interval: time.Second, run: 500 * time.Millisecond},
		{name: "1,000,000/s for 3 s", rate: 1_000_000, interval: time.Second, run: 3 * time.Second},
		{name: "100,000/s for 3 s", rate: 100_000, interval: time.Second, run: 3 * time.Second},
		{name: "50,000/s for 3 s", rate: 50_000, interval: time.Second, run: 3 * time.Second},
	},
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
	blockedCallers:   100,
	blockedRate:      200,
	blockedRun:       500 * time.Millisecond,
	multiRounds:      1,
	multiCalls:       50,
	instrFill:        100,
	instrCalls:       50,
	windowRecords:    []int{100, 1_000},
	costRounds:       2,
	costCalls:        100,
	fleetClients:     []int{1, 4, 16, 64},
	fleetCallers:     64,
	fleetRounds:      1,
	fleetWarmup:      100 * time.Millisecond,
	fleetOver:        fleetRegime{name: "over-asking", rate: 50, interval: 400 * time.Millisecond, run: 500 * time.Millisecond},
	fleetUnder:       fleetRegime{name: "under-asking", rate: 1_000_000, interval: time.Second, run: 200 * time.Millisecond},
	rbRequests:       30_000,
	keyedLimiters:    []int{2_000},
	keyedCallers:     64,
	keyedRounds:      1,
	keyedRound:       300 * time.Millisecond,
	loneCalls:        300,
	svcCallers:       64,
	svcRounds:        1,
	svcRound:         300 * time.Millisecond,
	svcUsers:         2_000,
	svcNearRate:      20, // low enough that a slow -race run still asks more
	svcBurstRate:     100,
	svcBursts:        2,
	leaseRegimes: []fleetRegime{
		{name: "1,000,000/s for 500 ms", rate: 1_000_000, interval: time.Second, run: 500 * time.Millisecond},
		{name: "50,000/s for 500 ms", rate: 50_000, interval: time.Second, run: 500 * time.Millisecond},
	},
}
