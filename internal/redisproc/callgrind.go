package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNoCallgrind reports that valgrind or callgrind_control is not on PATH.
var ErrNoCallgrind = errors.New("redisproc: valgrind or callgrind_control not found on PATH (make deps installs valgrind)")

// Callgrind is a redis-server run under valgrind's callgrind with
// instrumentation off, so that Count can count the instructions the server
// executes while some calls are made, and nothing else.
type Callgrind struct {
	*Server
	dir   string
	dumps int
}

// StartCallgrind starts a new redis-server under callgrind (REDIS_ADDR is
// not used), its timers once a second (--hz 1) before args. It fails with ErrNoCallgrind when valgrind or
// callgrind_control is missing, and as Start otherwise.
func StartCallgrind(ctx context.Context, args ...string) (*Callgrind, error) {
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, ErrNoCallgrind
		}
	}
	dir, err := os.MkdirTemp("", "callgrind-")
	if err != nil {
		return nil, err
	}
	// The server's timer work (serverCron, hz times a second) runs inside
	// a count as often as the count lasts, not per call: on a loaded
	// machine the calls take longer and a side counted then is charged
	// more of it, enough to turn the order of two scripts within a few
	// percent of each other (docs/performance.md, "Speed"). It is not
	// collected (--toggle-collect turns collection off inside serverCron;
	// --collect-atstart, after it, keeps it on elsewhere), and it runs
	// once a second.
	args = append([]string{"--hz", "1", "--dynamic-hz", "no"}, args...)
	srv, err := StartWrapped(ctx, []string{"valgrind", "--tool=callgrind", "--instr-atstart=no",
		"--toggle-collect=serverCron", "--collect-atstart=yes",
		"--callgrind-out-file=" + filepath.Join(dir, "cg.out")}, args...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Callgrind{Server: srv, dir: dir}, nil
}

// Count switches instrumentation on, zeroes the counters, runs run, dumps
// the counters and switches instrumentation off again; it returns the
// instructions the server executed meanwhile, network handling included,
// its timer work (serverCron) left out.
// It fails when run fails or callgrind_control or its dump does.
func (c *Callgrind) Count(run func() error) (int64, error) {
	pid := strconv.Itoa(c.Pid())
	control := func(args ...string) error {
		if b, err := exec.Command("callgrind_control", append(args, pid)...).CombinedOutput(); err != nil {
			return fmt.Errorf("callgrind_control %s: %v: %s", strings.Join(args, " "), err, b)
		}
		return nil
	}
	if err := errors.Join(control("-i", "on"), control("-z")); err != nil {
		return 0, err
	}
	runErr := run()
	if err := errors.Join(runErr, control("-d"), control("-i", "off")); err != nil {
		return 0, err
	}
	c.dumps++
	return summary(filepath.Join(c.dir, fmt.Sprintf("cg.out.%d", c.dumps)))
}

// Close stops the server and removes the dumps.
func (c *Callgrind) Close() error {
	return errors.Join(c.Server.Close(), os.RemoveAll(c.dir))
}

// summary reads the total instruction count of a callgrind dump.
func summary(file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("redisproc: no summary line in %s", file)
}
