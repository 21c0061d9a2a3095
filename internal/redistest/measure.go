package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// WorstWindow returns the most times within any half-open window
// [t, t+w) of sorted times, and where that window starts.
func WorstWindow(times []int64, w int64) (int, int64) {
	best, at := 0, int64(0)
	j := 0
	for i := range times {
		for j < len(times) && times[j] < times[i]+w {
			j++
		}
		if j-i > best {
			best, at = j-i, times[i]
		}
	}
	return best, at
}

// ScriptCalls returns the EVALSHA and EVAL calls the server has run so far
// (INFO commandstats).
func ScriptCalls(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
		if i := strings.Index(info, cmd); i >= 0 {
			rest := info[i+len(cmd):]
			v, err := strconv.ParseInt(rest[:strings.IndexAny(rest, ",\r\n")], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			total += v
		}
	}
	return total
}
