package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	env     environment
	plan    plan
	names   []string // contenders, ours first
	skipped []string // contenders left out, with the reason
	tp      throughputResult
	lat     [][]latencySample
	mem     []memorySample
	exact   []exactSample

	blocked     blockedResult
	multi       [][]multiSample // by multiCases
	instr       instructionResult
	windowNames []string
	window      [][]float64 // Redis µs per call, by side and round
	costNames   []string
	cost        [][]costSample
	replica     replicaResult
	fleet       *fleetResult
	keyed       *keyedResult
	lone        *loneResult
	svc         *svcResult
}

// environment names what the numbers came from.
type environment struct {
	cpu      string
	cores    int
	goVer    string
	redis    string
	redisson string
	date     string
}

func newEnvironment(redis, redisson string) environment {
	return environment{cpu: cpuModel(), cores: runtime.NumCPU(), goVer: runtime.Version(), redis: redis, redisson: redisson,
		date: time.Now().UTC().Format("2006-01-02")}
}

// caption is the one line under every chart.
func (e environment) caption() string {
	return fmt.Sprintf("%s, %d cores, %s, %s, %s, %s", e.cpu, e.cores, e.redis, e.redisson, e.goVer, e.date)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return runtime.GOARCH
}

// writeMarkdown prints the tables. Every ratio is to the first contender
// (ours, default) in the same run.
func (r *results) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## Rate limiters side by side (%s run)\n\n", r.plan.name)
	fmt.Fprintf(w, "%s. One redis-server on loopback, every contender in the same run; "+
		"%d round(s), contenders alternated in each (every section: a new order in each round), medians; "+
		"(x) is the ratio to %s in this run.\n\n",
		r.env.caption(), r.plan.rounds, r.names[0])
	for _, s := range r.skipped {
		fmt.Fprintf(w, "Left out: %s\n\n", s)
	}
	for _, p := range paths {
		r.throughputTable(w, p)
	}
	r.combiningTable(w)
	if r.keyed != nil {
		r.keyed.write(w, r.plan.keyedCallers)
	}
	if r.svc != nil {
		r.svc.write(w)
	}
	if r.fleet != nil {
		r.fleet.writeMarkdown(w, r.plan.fleetCallers)
	}
	r.blockedTable(w)
	r.latencyTable(w)
	if r.lone != nil {
		r.lone.write(w)
	}
	r.costTable(w)
	r.replicaTable(w)
	r.windowTable(w)
	r.instructionTable(w)
	r.multiTable(w)
	r.memoryTable(w)
	r.exactTable(w)
}

func (r *results) throughputTable(w io.Writer, p path) {
	fmt.Fprintf(w, "### Throughput and Redis CPU, one hot key, %s path (@n: n concurrent callers)\n\n", p.name)
	if p.name == "granted" {
		fmt.Fprintf(w, "Rate %d per %v: every call is granted. Decisions started per second (%v per run), "+
			"Redis CPU per decision from INFO cpu (user + sys, the whole server: network and event loop included), "+
			"the time inside the script calls, script calls and commands (those run inside scripts included) per "+
			"decision from INFO commandstats.\n\n", p.rate, p.interval, r.plan.round)
	} else {
		fmt.Fprintf(w, "Rate %d per %v, already taken: every call is refused (the floor grants anyway).\n\n", p.rate, p.interval)
	}
	top := r.plan.callers[len(r.plan.callers)-1]
	fmt.Fprint(w, "| contender |")
	for _, c := range r.plan.callers {
		fmt.Fprintf(w, " decisions/s @%d |", c)
	}
	for _, c := range r.plan.callers {
		fmt.Fprintf(w, " Redis CPU µs/decision @%d |", c)
	}
	fmt.Fprintf(w, " µs in the script call/decision @1 | scripts/decision @%d | commands/decision @%d |\n", top, top)
	fmt.Fprint(w, "|---|"+strings.Repeat("---:|", 2*len(r.plan.callers)+3)+"\n")
	at := func(i, callers int, f func(sample) float64) float64 { return median(pick(r.tp[p.name][callers][i], f)) }
	perSec := func(s sample) float64 { return s.perSec }
	cpu := func(s sample) float64 { return s.cpuUs }
	for i, name := range r.names {
		fmt.Fprintf(w, "| %s |", name)
		for _, c := range r.plan.callers {
			fmt.Fprintf(w, " %s |", withRatio(at(i, c, perSec), at(0, c, perSec), 0))
		}
		for _, c := range r.plan.callers {
			fmt.Fprintf(w, " %s |", withRatio(at(i, c, cpu), at(0, c, cpu), 1))
		}
		fmt.Fprintf(w, " %s |", withRatio(at(i, r.plan.callers[0], func(s sample) float64 { return s.scriptUs }),
			at(0, r.plan.callers[0], func(s sample) float64 { return s.scriptUs }), 1))
		fmt.Fprintf(w, " %.2f | %.2f |\n", at(i, top, func(s sample) float64 { return s.scripts }),
			at(i, top, func(s sample) float64 { return s.commands }))
	}
	fmt.Fprintln(w)
}

func (r *results) latencyTable(w io.Writer) {
	fmt.Fprintf(w, "### Latency of one uncontended call\n\n%d rounds of %d sequential granted calls per contender, "+
		"medians of the rounds' percentiles; Redisson's peer times the whole series, so only its mean is known.\n\n",
		r.plan.latencyRounds, r.plan.latencyCalls)
	fmt.Fprint(w, "| contender | p50 µs | p99 µs | mean µs |\n|---|---:|---:|---:|\n")
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	mean := func(i int) float64 {
		return median(pick(r.lat[i], func(s latencySample) float64 { return us(s.mean) }))
	}
	for i, name := range r.names {
		p50 := median(pick(r.lat[i], func(s latencySample) float64 { return us(s.p50) }))
		p99 := median(pick(r.lat[i], func(s latencySample) float64 { return us(s.p99) }))
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, orDash(p50), orDash(p99), withRatio(mean(i), mean(0), 0))
	}
	fmt.Fprintln(w)
}

func (r *results) memoryTable(w io.Writer) {
	fmt.Fprintf(w, "### Redis memory\n\nIdle limiter: set up (rate 10 per hour) and one grant, used_memory delta "+
		"(less mem_clients_normal, the connections' buffers) over the limiters created (%d; Redisson fewer, each is "+
		"two peer commands). Per permit: one limiter holding %d grants of 16 callers in its window (rate %d per hour), "+
		"the delta over the grants. The keyspace tables are sized beforehand, so the figures are the keys and values, "+
		"not a table's doubling.\n\n",
		r.plan.idleLimiters, r.plan.windowPermits, r.plan.windowPermits)
	fmt.Fprint(w, "| contender | bytes per idle limiter | keys per limiter | limiters | bytes per permit in the window | grants |\n|---|---:|---:|---:|---:|---:|\n")
	for i, name := range r.names {
		m := r.mem[i]
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s |\n", name, withRatio(m.perLimiter, r.mem[0].perLimiter, 0),
			m.keysPerLimiter, group(float64(m.limiters), 0), withRatio(m.perPermit, r.mem[0].perPermit, 1), group(float64(m.permits), 0))
	}
	fmt.Fprintln(w)
}

func (r *results) exactTable(w io.Writer) {
	iv := r.plan.exactInterval
	fmt.Fprintf(w, "### Exactness\n\nRate %d per %v, %d callers. Boundary bursts: full speed from %v before to %v after "+
		"%d window boundaries (multiples of the interval on the clock), idle in between; the most grants in any "+
		"window of %v (the interval less 2%%: grants are stamped with the caller's clock before each call, "+
		"the limiters read theirs later), as a multiple of the rate. "+
		"Steady overload: full speed for %d intervals; the grants after the first interval as a share of "+
		"rate x those intervals.\n\n", r.plan.exactRate, iv, r.plan.exactCallers, iv/10, iv/10, r.plan.bursts, measuredWindow(iv), r.plan.steady)
	fmt.Fprint(w, "| contender | most grants in one interval / rate | grants in the bursts | steady overload: grants / (rate x time) |\n|---|---:|---:|---:|\n")
	for i, name := range r.names {
		e := r.exact[i]
		if e.noRule {
			fmt.Fprintf(w, "| %s | — (grants every call) | — | — |\n", name)
			continue
		}
		fmt.Fprintf(w, "| %s | %.2fx | %d | %.3f |\n", name, e.maxWindow, e.burstGrants, e.steadyShare)
	}
	fmt.Fprintln(w)
}

// withRatio formats v with digits decimals and its ratio to ref.
func withRatio(v, ref float64, digits int) string {
	if ref <= 0 {
		return group(v, digits)
	}
	return fmt.Sprintf("%s (%.2fx)", group(v, digits), v/ref)
}

func orDash(v float64) string {
	if v == 0 {
		return "—"
	}
	return group(v, 0)
}

// group formats v with digits decimals and thousands separators.
func group(v float64, digits int) string {
	s := fmt.Sprintf("%.*f", digits, v)
	intPart, frac, _ := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, ch := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}
