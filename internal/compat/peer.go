// Package compat proves wire compatibility with Java Redisson's RRateLimiter:
// its tests drive a real Redisson client (the Java peer in compat/peer, built
// by internal/compat/build-peer.sh) and this module's Go client against one real
// redis-server and check that each sees exactly what the other did.
//
// The peer speaks a line protocol on stdin/stdout: one command a line, one
// answer a line, "OK [result...]" or "ERR <ExceptionClass> <message>".
package compat

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Versions are the Redisson versions the suite covers, newest first.
var Versions = versions()

// versions returns the Redisson versions the suite covers: all five, or
// those COMPAT_VERSIONS names (comma-separated, for example
// "4.7.0,3.16.3": make test-servers runs that quick subset).
func versions() []string {
	all := []string{"4.7.0", "3.52.0", "3.20.1", "3.16.8", "3.16.3"}
	if s := os.Getenv("COMPAT_VERSIONS"); s != "" {
		return strings.Split(s, ",")
	}
	return all
}

// DefaultTimeout bounds one peer command when the context has no deadline.
const DefaultTimeout = 30 * time.Second

// Dir is the directory of this package's sources (compat/).
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Dir(file)
}

// BuildDir is where build-peer.sh puts the peer for one Redisson version.
func BuildDir(version string) string {
	return filepath.Join(Dir(), "peer", "target", version)
}

var (
	buildMu   sync.Mutex
	buildErrs = map[string]error{}
)

// Build runs build-peer.sh for the versions not yet built by this process.
// The script itself is idempotent (it skips a build that is current), so this
// costs one quick script run per version and test binary.
func Build(ctx context.Context, versions ...string) error {
	buildMu.Lock()
	defer buildMu.Unlock()
	var todo []string
	for _, v := range versions {
		if err, done := buildErrs[v]; done {
			if err != nil {
				return err
			}
			continue
		}
		todo = append(todo, v)
	}
	if len(todo) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(Dir(), "build-peer.sh")}, todo...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("compat: build-peer.sh %s: %v\n%s", strings.Join(todo, " "), err, out.String())
	}
	for _, v := range todo {
		buildErrs[v] = err
	}
	return err
}

// ToolsMissing names the first of java and mvn not on PATH, or "".
func ToolsMissing() string {
	for _, t := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(t); err != nil {
			return t
		}
	}
	return ""
}

// PeerOptions select what peer to start.
type PeerOptions struct {
	Version    string // Redisson version (one of Versions)
	Addr       string // Redis host:port
	NamePrefix string // if set, the Redisson client maps name -> NamePrefix+name
	// Main is the peer jar's class to run: "" or "peer.Peer", one
	// Redisson client; "peer.Fleet", several (the bench's fleet section).
	// Both speak the same line protocol; Fleet's first line is "READY
	// fleet", and ID is then "fleet".
	Main string
}

// Peer is one running Java Redisson client.
type Peer struct {
	opts   PeerOptions
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string   // answer lines, closed at EOF
	exited chan struct{} // closed when the process has been reaped
	stderr *tailBuffer

	mu        sync.Mutex // one command at a time
	closeOnce sync.Once
	closeErr  error
}

// Error is an "ERR" answer: the Java exception's class and message.
type Error struct {
	Class   string
	Message string
}

// Error returns the exception class and message.
func (e *Error) Error() string { return "java " + e.Class + ": " + e.Message }

// ErrUnsupported is matched (errors.Is) by the answer to an operation the
// peer's Redisson version does not have.
var ErrUnsupported = errors.New("operation not in this Redisson version")

// Is makes errors.Is(err, ErrUnsupported) work for "Unsupported" answers.
func (e *Error) Is(target error) bool { return target == ErrUnsupported && e.Class == "Unsupported" }

// StartPeer builds (if needed) and starts a peer and waits for its READY line.
func StartPeer(ctx context.Context, o PeerOptions) (*Peer, error) {
	if err := Build(ctx, o.Version); err != nil {
		return nil, err
	}
	dir := BuildDir(o.Version)
	args := []string{
		"-XX:+UseSerialGC", "-Xshare:auto",
		"-cp", filepath.Join(dir, "peer.jar") + string(os.PathListSeparator) + filepath.Join(dir, "lib", "*"),
		cmp.Or(o.Main, "peer.Peer"), "--addr", o.Addr,
	}
	if o.NamePrefix != "" {
		args = append(args, "--name-prefix", o.NamePrefix)
	}
	cmd := exec.Command("java", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Peer{
		opts:   o,
		cmd:    cmd,
		stdin:  stdin,
		lines:  make(chan string, 16),
		exited: make(chan struct{}),
		stderr: &tailBuffer{max: 64 << 10},
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compat: start java peer: %w", err)
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(p.lines)
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				p.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-readerDone // Wait must not run before reads are done (os/exec rule)
		_ = cmd.Wait()
		close(p.exited)
	}()

	ready, err := p.readLine(ctx, 60*time.Second)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("compat: peer %s did not start: %w", o.Version, err)
	}
	id, ok := strings.CutPrefix(ready, "READY ")
	if !ok || len(id) != 36 && !(o.Main == "peer.Fleet" && id == "fleet") {
		p.kill()
		return nil, fmt.Errorf("compat: peer %s: unexpected first line %q; stderr:\n%s", o.Version, ready, p.stderr.String())
	}
	p.id = id
	return p, nil
}

// ID is the Redisson client id (redisson.getId()).
func (p *Peer) ID() string { return p.id }

// Version is the Redisson version the peer runs.
func (p *Peer) Version() string { return p.opts.Version }

// Stderr returns the tail of the peer's standard error.
func (p *Peer) Stderr() string { return p.stderr.String() }

func (p *Peer) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("peer exited; stderr:\n%s", p.stderr.String())
		}
		return line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("no answer from peer: %w", ctx.Err())
	}
}

// Do sends one command (arguments joined by spaces) and returns the result
// after "OK" (trimmed), or an *Error for an "ERR" answer. A command that gets
// no answer in time (by ctx's deadline, or DefaultTimeout when it has none)
// leaves the peer unusable: it is killed.
func (p *Peer) Do(ctx context.Context, args ...any) (string, error) {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = fmt.Sprint(a)
		if strings.ContainsAny(parts[i], " \n\r") || parts[i] == "" {
			return "", fmt.Errorf("compat: peer argument %q must be one non-empty word", parts[i])
		}
	}
	line := strings.Join(parts, " ")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return "", fmt.Errorf("compat: write to peer: %w; stderr:\n%s", err, p.stderr.String())
	}
	ans, err := p.readLine(ctx, DefaultTimeout)
	if err != nil {
		p.kill()
		return "", fmt.Errorf("compat: %s: %w", line, err)
	}
	if rest, ok := strings.CutPrefix(ans, "OK"); ok {
		return strings.TrimSpace(rest), nil
	}
	if rest, ok := strings.CutPrefix(ans, "ERR "); ok {
		class, msg, _ := strings.Cut(rest, " ")
		return "", &Error{Class: class, Message: msg}
	}
	p.kill()
	return "", fmt.Errorf("compat: %s: malformed answer %q", line, ans)
}

// Bool runs a command whose result is true or false.
func (p *Peer) Bool(ctx context.Context, args ...any) (bool, error) {
	s, err := p.Do(ctx, args...)
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("compat: %v: want true/false, got %q", args, s)
}

// Int runs a command whose result is one integer.
func (p *Peer) Int(ctx context.Context, args ...any) (int64, error) {
	s, err := p.Do(ctx, args...)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("compat: %v: want an integer, got %q", args, s)
	}
	return n, nil
}

// Close asks the peer to quit (it shuts its Redisson client down) and waits
// for it; a peer that does not exit within 30 seconds is killed. Redisson's
// shutdown waits for Netty's event loops, whose graceful shutdown may take
// up to 15 s; a CI run with the suite's load beside it saw a 3.16.3 peer
// take more than 10 s after TestWeightedCompositeMixedLoad.
func (p *Peer) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		_, _ = io.WriteString(p.stdin, "quit\n")
		_ = p.stdin.Close()
		p.mu.Unlock()
		go func() { // unread answers must not block the reader
			for range p.lines {
			}
		}()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			p.closeErr = errors.New("compat: peer did not exit in 30s; killed")
			p.kill()
		}
	})
	return p.closeErr
}

func (p *Peer) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	_ = p.stdin.Close()
	// Drain answers so the reader goroutine can reach EOF and the process be reaped.
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// Write keeps the tail of what is written.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// String returns the kept tail.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
