package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goredisson/ratelimiter/internal/compat"
)

// javaFleet is a JVM that runs several RedissonClients (the peer jar's
// peer.Fleet, internal/compat/peer): the fleet section's Redisson side. It
// speaks the compatibility peer's line protocol: one command a line, one
// answer a line, "OK [result...]" or "ERR <class> <message>".
type javaFleet struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // answer lines, closed at EOF
	exited chan struct{}
	stderr *lockedTail

	mu        sync.Mutex // one command at a time
	closeOnce sync.Once
}

// startJavaFleet starts peer.Fleet on addr. It returns nil and the reason
// when it cannot run here; the peer jar is brought up to date first
// (build-peer.sh, which skips a current build), as the bench's other
// Redisson runs do.
func startJavaFleet(ctx context.Context, addr string) (*javaFleet, string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, "java is not on PATH", nil
	}
	dir := compat.BuildDir(redissonVersion)
	jar := filepath.Join(dir, "peer.jar")
	if _, err := os.Stat(jar); err != nil {
		return nil, "the peer jar " + jar + " is not built (make peer builds it)", nil
	}
	if err := compat.Build(ctx, redissonVersion); err != nil {
		return nil, "", err
	}
	cmd := exec.Command("java", "-XX:+UseSerialGC", "-Xshare:auto",
		"-cp", jar+string(os.PathListSeparator)+filepath.Join(dir, "lib", "*"), "peer.Fleet", "--addr", addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	f := &javaFleet{cmd: cmd, stdin: stdin, lines: make(chan string, 4), exited: make(chan struct{}), stderr: &lockedTail{max: 32 << 10}}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start the Java fleet: %w", err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(f.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				f.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-read
		_ = cmd.Wait()
		close(f.exited)
	}()
	ready, err := f.readLine(ctx, time.Minute)
	if err != nil || ready != "READY fleet" {
		f.kill()
		return nil, "", fmt.Errorf("the Java fleet did not start (%q, %v); stderr:\n%s", ready, err, f.stderr)
	}
	return f, "", nil
}

func (f *javaFleet) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-f.lines:
		if !ok {
			return "", errors.New("the Java fleet exited")
		}
		return line, nil
	case <-t.C:
		return "", errors.New("no answer from the Java fleet")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// do sends one command and returns what follows "OK". A command that gets
// no answer in time leaves the JVM unusable: it is killed.
func (f *javaFleet) do(ctx context.Context, timeout time.Duration, args ...any) (string, error) {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprint(a)
	}
	line := strings.Join(parts, " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := io.WriteString(f.stdin, line+"\n"); err != nil {
		return "", fmt.Errorf("java fleet: %s: %w", line, err)
	}
	ans, err := f.readLine(ctx, timeout)
	if err != nil {
		f.kill()
		return "", fmt.Errorf("java fleet: %s: %w; stderr:\n%s", line, err, f.stderr)
	}
	if rest, ok := strings.CutPrefix(ans, "OK"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", fmt.Errorf("java fleet: %s: %s", line, ans)
}

// fleet makes (once) the fleet of n RedissonClients, pool connections each.
func (f *javaFleet) fleet(ctx context.Context, n, pool int) error {
	_, err := f.do(ctx, time.Duration(n+1)*10*time.Second, "fleet", n, pool)
	return err
}

// trySetRate sets an OVERALL rate on the limiter called key.
func (f *javaFleet) trySetRate(ctx context.Context, key string, rate int64, interval time.Duration) error {
	_, err := f.do(ctx, 30*time.Second, "trySetRate", key, rate, interval.Milliseconds())
	return err
}

// load has threads threads over fleet n's clients call tryAcquire(1) on
// key for d; it returns the decisions, the grants and the most grants
// stamped in any window of w.
func (f *javaFleet) load(ctx context.Context, n int, key string, threads int, d, w time.Duration) (decisions, grants, most int64, err error) {
	ans, err := f.do(ctx, d+30*time.Second, "load", n, key, threads, max(d.Milliseconds(), 1), max(w.Milliseconds(), 1))
	if err != nil {
		return 0, 0, 0, err
	}
	fs := strings.Fields(ans)
	if len(fs) != 3 {
		return 0, 0, 0, fmt.Errorf("java fleet load: malformed answer %q", ans)
	}
	var v [3]int64
	for i, s := range fs {
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("java fleet load: %q: %w", ans, err)
		}
	}
	return v[0], v[1], v[2], nil
}

// Close asks the JVM to quit (it shuts its clients down) and waits for it;
// one that has not exited in 15 seconds is killed.
func (f *javaFleet) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.mu.Lock()
		_, _ = io.WriteString(f.stdin, "quit\n")
		_ = f.stdin.Close()
		f.mu.Unlock()
		go func() {
			for range f.lines {
			}
		}()
		select {
		case <-f.exited:
		case <-time.After(15 * time.Second):
			err = errors.New("the Java fleet did not exit in 15s; killed")
			f.kill()
		}
	})
	return err
}

func (f *javaFleet) kill() {
	if f.cmd.Process != nil {
		_ = f.cmd.Process.Kill()
	}
	_ = f.stdin.Close()
	go func() {
		for range f.lines {
		}
	}()
	select {
	case <-f.exited:
	case <-time.After(10 * time.Second):
	}
}

// lockedTail keeps the last max bytes written to it.
type lockedTail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *lockedTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
