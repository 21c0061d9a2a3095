package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The text format: families grouped with HELP and TYPE, label values
// escaped, special floats spelled as the format wants.
func TestExpositionText(t *testing.T) {
	e := newExposition()
	e.gauge("a_rate", "Permits per interval.\nSecond \\ line.", 10, label{"limiter", `x"y\z` + "\n"})
	e.add("b_total", "counter", "Errors.", math.Inf(1))
	e.gauge("a_rate", "ignored", 2.5, label{"limiter", "\xff"}, label{"client", "c"})
	e.gauge("c", "NaN", math.NaN())
	require.Equal(t, `# HELP a_rate Permits per interval.\nSecond \\ line.
# TYPE a_rate gauge
a_rate{limiter="x\"y\\z\n"} 10
a_rate{limiter="`+"\uFFFD"+`",client="c"} 2.5
# HELP b_total Errors.
# TYPE b_total counter
b_total +Inf
# HELP c NaN
# TYPE c gauge
c NaN
`, string(e.bytes()))
}
