package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/wire"
)

type inspection struct {
	Name   string `json:"name"`
	Exists bool   `json:"exists"`
	Config *struct {
		Mode string `json:"mode"`
		Rate int64  `json:"rate"`
	} `json:"config"`
	TTL  int64 `json:"ttl_ms"`
	Keys []struct {
		Role, Key, Type string
		TTL             int64 `json:"ttl_ms"`
	} `json:"keys"`
	Budgets []struct {
		Scope        string `json:"scope"`
		ClientID     string `json:"client_id"`
		ValueKey     string `json:"value_key"`
		Value        *int64 `json:"value"`
		Active       bool   `json:"active"`
		InWindow     int64  `json:"permits_in_window"`
		Expired      int64  `json:"expired_permits"`
		AvailableNow *int64 `json:"available_now"`
		Records      []struct {
			ScoreMS    int64  `json:"score_ms"`
			AgeMS      int64  `json:"age_ms"`
			Permits    uint32 `json:"permits"`
			RandomHex  string `json:"random_hex"`
			RandomText string `json:"random_text"`
			Format     string `json:"format"`
			Expired    bool   `json:"expired"`
			Error      string `json:"error"`
			Writer     string `json:"writer"`
		} `json:"records"`
		Writers []writerShare `json:"writers"`
	} `json:"budgets"`
	Clients []string `json:"per_client_ids"`
}

// writerShare is one writer's part of a window, as inspect and watch
// print it.
type writerShare struct {
	Writer  string `json:"writer"`
	Permits int64  `json:"permits"`
	Records int    `json:"records"`
}

// dump snapshots keys, to prove a command changed nothing.
func dump(t *testing.T, rdb *redis.Client, keys ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		d, err := rdb.Dump(context.Background(), k).Result()
		if err == redis.Nil {
			continue
		}
		require.NoError(t, err)
		out[k] = d
	}
	return out
}

// inspect decodes records of all three member formats (written by the CLI
// with --format), flags a record past the interval, computes the totals
// and what an acquisition would find, and changes nothing in Redis.
func TestInspectDecodesRecords(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t)
	value, permits := "{"+name+"}:value", "{"+name+"}:permits"
	ok(t, cli(t, "set-rate", name, "--rate", "10", "--interval", "1m"))
	ok(t, cli(t, "acquire", name, "-n", "2"))
	ok(t, cli(t, "acquire", name, "-n", "3", "--format", "lc0i"))
	ok(t, cli(t, "--format", "fi", "acquire", name, "-n", "1"))
	old, err := wire.Encode(wire.Bc0I, bytes.Repeat([]byte{0xab}, 16), 4)
	require.NoError(t, err)
	oldScore := time.Now().Add(-2 * time.Minute).UnixMilli()
	require.NoError(t, rdb.ZAdd(ctx, permits, redis.Z{Score: float64(oldScore), Member: old}).Err())
	require.NoError(t, rdb.Expire(ctx, name, time.Hour).Err())

	before := dump(t, rdb, name, value, permits)
	r := ok(t, cli(t, "inspect", name, "-o", "json"))
	assert.Equal(t, before, dump(t, rdb, name, value, permits), "inspect must not write")

	var in inspection
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	assert.Equal(t, name, in.Name)
	assert.True(t, in.Exists)
	require.NotNil(t, in.Config)
	assert.Equal(t, int64(10), in.Config.Rate)
	assert.True(t, in.TTL > 3500_000 && in.TTL <= 3600_000, "ttl %d", in.TTL)
	assert.Empty(t, in.Clients)
	require.NotEmpty(t, in.Keys)
	assert.Equal(t, "config", in.Keys[0].Role)
	assert.Equal(t, "hash", in.Keys[0].Type)

	require.Len(t, in.Budgets, 1)
	b := in.Budgets[0]
	assert.Equal(t, "overall", b.Scope)
	assert.True(t, b.Active)
	require.NotNil(t, b.Value)
	assert.Equal(t, int64(4), *b.Value)
	assert.Equal(t, int64(6), b.InWindow)
	assert.Equal(t, int64(4), b.Expired)
	require.NotNil(t, b.AvailableNow)
	assert.Equal(t, int64(8), *b.AvailableNow, "value 4 plus the 4 expired permits")
	require.Len(t, b.Records, 4)
	first := b.Records[0]
	assert.Equal(t, oldScore, first.ScoreMS)
	assert.True(t, first.Expired)
	assert.Equal(t, uint32(4), first.Permits)
	assert.Equal(t, strings.Repeat("ab", 16), first.RandomHex)
	assert.Equal(t, "Bc0I", first.Format)
	assert.GreaterOrEqual(t, first.AgeMS, int64(120_000))
	got := map[string]uint32{}
	for _, rec := range b.Records[1:] {
		assert.False(t, rec.Expired)
		assert.Empty(t, rec.Error)
		got[rec.Format] = rec.Permits
		switch rec.Format {
		case "Lc0I":
			require.Greater(t, len(rec.RandomText), 12, rec.RandomText)
			_, err := strconv.ParseInt(rec.RandomText[12:], 10, 64)
			assert.NoError(t, err, "Lc0I random part is GoRL, a tag and the decimal text of an int64: %q", rec.RandomText)
			assert.Equal(t, "go:"+rec.RandomText[4:12], rec.Writer)
			assert.Equal(t, hex.EncodeToString([]byte(rec.RandomText)), rec.RandomHex)
		case "fI":
			assert.Len(t, rec.RandomHex, 8)
		case "Bc0I":
			assert.Len(t, rec.RandomHex, 32)
		}
	}
	assert.Equal(t, map[string]uint32{"Bc0I": 2, "Lc0I": 3, "fI": 1}, got)

	r = ok(t, cli(t, "inspect", name))
	for _, want := range []string{"expired, not released", "Lc0I", "fI", strings.Repeat("ab", 16),
		"in window: 6 permits in 3 records", "available now 8", "ttl 59m"} {
		assert.Contains(t, r.stdout, want)
	}
	assert.Equal(t, before, dump(t, rdb, name, value, permits))

	// --max-records lists the newest records only; the totals still count all.
	r = ok(t, cli(t, "inspect", name, "--max-records", "2", "-o", "json"))
	var short inspection
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &short), r.stdout)
	require.Len(t, short.Budgets[0].Records, 2)
	assert.Equal(t, b.Records[2].ScoreMS, short.Budgets[0].Records[0].ScoreMS)
	assert.Equal(t, b.Records[3].RandomHex, short.Budgets[0].Records[1].RandomHex)
	assert.Equal(t, int64(6), short.Budgets[0].InWindow)
	assert.Equal(t, int64(4), short.Budgets[0].Expired)
	r = ok(t, cli(t, "inspect", name, "--max-records", "1"))
	assert.Contains(t, r.stdout, "showing the newest 1 of 4 records")
}

// inspect finds the PER_CLIENT keys of every client with SCAN and shows
// each client's budget; a corrupt record is shown as such, not fatal.
func TestInspectPerClient(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	name := uniqueName(t) + "*?[x]" // glob characters must match themselves
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m", "--mode", "per-client", "--client-id", "c1"))
	ok(t, cli(t, "--client-id", "c1", "acquire", name, "-n", "2"))
	ok(t, cli(t, "acquire", name, "--client-id", "c2"))
	require.NoError(t, rdb.ZAdd(ctx, "{"+name+"}:permits:c2", redis.Z{Score: float64(time.Now().UnixMilli()), Member: "junk!"}).Err())
	// A look-alike key of another limiter must not be taken for a client.
	require.NoError(t, rdb.Set(ctx, "{"+name+"x}:value:c9", "1", time.Minute).Err())

	r := ok(t, cli(t, "inspect", name, "-o", "json", "--client-id", "c1"))
	var in inspection
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	assert.Equal(t, []string{"c1", "c2"}, in.Clients)
	require.Len(t, in.Budgets, 3)
	byClient := map[string]int64{}
	for _, b := range in.Budgets[1:] {
		assert.Equal(t, "client", b.Scope)
		assert.True(t, b.Active)
		require.NotNil(t, b.Value)
		byClient[b.ClientID] = *b.Value
	}
	assert.Equal(t, map[string]int64{"c1": 3, "c2": 4}, byClient)
	c2 := in.Budgets[2]
	require.Len(t, c2.Records, 2)
	var corrupt int
	for _, rec := range c2.Records {
		if rec.Error != "" {
			corrupt++
		}
	}
	assert.Equal(t, 1, corrupt)
	assert.False(t, in.Budgets[0].Active, "overall state is not the configured mode")

	r = ok(t, cli(t, "inspect", name))
	assert.Contains(t, r.stdout, "PER_CLIENT client ids found (SCAN): c1, c2")

	// Nothing at all under a name: exit 1.
	failsWith(t, 1, cli(t, "inspect", name+"-none"))
}

// watch --count N prints N refreshes; -o json gives one object a line
// with the available permits and the grants of the last second.
func TestWatchCount(t *testing.T) {
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "10", "--interval", "1m"))
	ok(t, cli(t, "acquire", name, "-n", "4"))
	r := ok(t, cli(t, "watch", name, "--count", "3", "--every", "20ms", "-o", "json"))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	for _, l := range lines {
		var w struct {
			Available  int64 `json:"available"`
			Rate       int64 `json:"rate"`
			InWindow   int64 `json:"permits_in_window"`
			LastSecond int64 `json:"granted_last_second"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &w), l)
		assert.Equal(t, int64(6), w.Available)
		assert.Equal(t, int64(10), w.Rate)
		assert.Equal(t, int64(4), w.InWindow)
		assert.LessOrEqual(t, w.LastSecond, int64(4))
	}
	r = ok(t, cli(t, "watch", name, "--count", "1"))
	assert.Regexp(t, `available +6/10 +in window +4 +granted/s +\d+ +\[#{12}\.{18}\]`, r.stdout)
}

// Issue 37, item 3: watch of a limiter that is not configured prints
// so at every refresh and exits 1, saying why on stderr.
func TestWatchMissingLimiterExits1(t *testing.T) {
	name := uniqueName(t)
	r := failsWith(t, 1, cli(t, "watch", name, "--count", "2", "--every", "20ms"))
	assert.Equal(t, 2, strings.Count(r.stdout, name+": not configured"), r.stdout)
	assert.Equal(t, "ratelimiter watch: limiter \""+name+"\" was not configured at 2 of 2 refreshes\n", r.stderr)
	r = failsWith(t, 1, cli(t, "watch", name, "--count", "1", "-o", "json"))
	assert.Contains(t, r.stdout, `"exists":false`)
	assert.Contains(t, r.stderr, "at 1 of 1 refresh\n")
}

// watch without --count runs until interrupted, then exits 0.
func TestWatchUntilInterrupted(t *testing.T) {
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "3", "--interval", "1s"))
	cmd := exec.Command(bin, "watch", name, "--every", "20ms", "--url", "redis://"+redisAddr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 100)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	for i := 0; i < 2; i++ {
		select {
		case l := <-lines:
			assert.Contains(t, l, "available      3/3")
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("no output from watch")
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for range lines {
	}
	require.NoError(t, cmd.Wait(), "watch must exit 0 when interrupted")
}

// Issue 39, item 3: inspect reports a read the user may not make. Without
// TIME (which it reads to find records stamped after Redis's clock) it
// exits 2 naming the command instead of leaving that line out.
func TestInspectReportsRefusedTime(t *testing.T) {
	name := uniqueName(t)
	ok(t, cli(t, "set-rate", name, "--rate", "5", "--interval", "1m"))
	ok(t, cli(t, "acquire", name))
	url := readmeUser(t, redisAddr, "insp-"+strings.ReplaceAll(name, "_", "-"), "-time")
	r := failsWith(t, 2, cliEnv(t, []string{"REDIS_URL=" + url}, "inspect", name))
	require.Contains(t, r.stderr, "'time'")
}
