package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerVersion is the nats-server the suite runs, the version go.mod embeds.
const natsServerVersion = "v2.15.2"

// findNATSServer returns the nats-server binary: on PATH, else in $GOBIN or
// $(go env GOPATH)/bin. Without one the test skips, or fails under CI=true.
func findNATSServer(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	var dirs []string
	if gobin := goEnv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath := goEnv("GOPATH"); gopath != "" {
		for _, p := range filepath.SplitList(gopath) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, "nats-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	msg := "the chaos suite needs the standalone nats-server binary (not on PATH nor in GOBIN or GOPATH/bin): " +
		"go install github.com/nats-io/nats-server/v2@" + natsServerVersion
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (.ci/run installs it)")
	}
	t.Skip(msg)
	return ""
}

func goEnv(key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// builtBinaries is the directory buildBinaries built into, shared by the
// package's tests (TestChaos, TestChaosCluster) and removed by TestMain.
var builtBinaries struct {
	once sync.Once
	dir  string
	err  error
}

// buildBinaries builds agentmem and the four worker binaries into a temporary
// directory, once per test binary, without the race detector: they are the
// programs under test, not the test.
func buildBinaries(t *testing.T) string {
	t.Helper()
	b := &builtBinaries
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "agentmem-chaos-bin"); b.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", b.dir+string(filepath.Separator),
			"../cmd/agentmem", "../cmd/ingest", "../cmd/extractor", "../cmd/consolidator", "../cmd/retriever")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.err = fmt.Errorf("go build the binaries: %w\n%s", err, out.String())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// baseEnv is the environment of every process: the test's without any AGENTMEM_
// variable (an unknown key stops a binary), plus settings that make a crash cost
// seconds rather than minutes and keep consolidation (which merges similar
// episodes) out of the count.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTMEM_") {
			env = append(env, kv)
		}
	}
	if md := os.Getenv("AGENTMEM_TEST_CHAOS_MAX_DELIVER"); md != "" {
		// A low limit turns crashes into dead letters, to exercise that side of the account.
		env = append(env, "AGENTMEM_NATS_CONSUMER_MAX_DELIVER="+md)
	}
	return append(env,
		"AGENTMEM_LOG_LEVEL=info",
		"AGENTMEM_LOG_FORMAT=json",
		"AGENTMEM_NATS_CONSUMER_ACK_WAIT=3s",
		"AGENTMEM_NATS_CONSUMER_BACKOFF=3s",
		"AGENTMEM_VECTOR_CONSOLIDATE_INTERVAL=24h",
	)
}

// proc is one process under test, which the suite may signal and start again.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	// ready reports nil once the process serves.
	ready func(ctx context.Context) error
	// peer marks a node of a NATS cluster: it is ready only once a quorum of
	// its peers runs, so the nodes start together and are waited for after.
	peer bool

	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
	exitErr error         // cmd's Wait result, set before done closes
	starts  int
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(logf, "\n==== chaos: start #%d of %s at %s\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.exitErr = err
		close(done)
	}()
	return nil
}

// running reports whether the last start is still running.
func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits for the exit; a process still running after
// timeout is killed, and that is reported.
func (p *proc) signal(sig syscall.Signal, timeout time.Duration) (exitErr error, err error) {
	if !p.running() {
		return p.exitErr, fmt.Errorf("%s is not running", p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, fmt.Errorf("signal %s: %w", p.name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.exitErr, nil
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.exitErr, fmt.Errorf("%s did not exit within %s of %s; killed", p.name, timeout, sig)
	}
}

// kill ends the process at once (test cleanup).
func (p *proc) kill() {
	if p.running() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitReady polls p.ready until it succeeds, p exits, or the deadline passes.
func (p *proc) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if !p.running() {
			return fmt.Errorf("%s exited while starting: %v (log %s)", p.name, p.exitErr, p.logPath)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = p.ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond): // poll interval
		}
	}
	return fmt.Errorf("%s not ready within %s: %v (log %s)", p.name, timeout, last, p.logPath)
}

// httpReady is the readiness check of a binary serving /readyz on addr.
func httpReady(addr string) func(ctx context.Context) error {
	return httpStatusOK("http://" + addr + "/readyz")
}

// httpStatusOK checks that a GET of url answers 200.
func httpStatusOK(url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// natsReady is the readiness check of a nats-server: JetStream answers.
func natsReady(url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.MaxReconnects(0))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	}
}

// logTail is the end of a process log, for failure messages.
func logTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// cluster is the set of processes of one round.
type cluster struct {
	t        *testing.T
	scenario string
	natsURL  string  // one URL, or the cluster's comma-separated
	replicas int     // nats.stream.replicas of every process
	procs    []*proc // start order; stopped in reverse
	byName   map[string]*proc
	// vectorsPath is the embedded vector store holding the episodic memories;
	// memoryDir the Markdown store the extractor writes.
	vectorsPath, memoryDir string

	mu    sync.Mutex
	notes []string // unexpected exits and other findings that are no accounting error
}

func (c *cluster) add(p *proc) {
	c.procs = append(c.procs, p)
	c.byName[p.name] = p
	c.t.Cleanup(p.kill)
}

func (c *cluster) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// newCluster lays out the processes of scenario under dir; nothing runs yet.
func newCluster(t *testing.T, scenario, bins, natsServer, dir string) *cluster {
	t.Helper()
	c := &cluster{t: t, scenario: scenario, byName: map[string]*proc{}, replicas: 1}
	env := baseEnv()
	switch scenario {
	case scenarioUp:
		natsAddr := loopback(t)
		c.natsURL = "nats://" + natsAddr
		data := filepath.Join(dir, "up")
		c.add(c.upProc(bins, dir, "--data-dir", data, "--nats-listen", natsAddr))
		c.vectorsPath, c.memoryDir = filepath.Join(data, "vectors.db"), filepath.Join(data, "memory")
	case scenarioCluster:
		c.replicas = 3
		c.addNATSCluster(natsServer, dir, 3)
		data := filepath.Join(dir, "up")
		c.add(c.upProc(bins, dir, "--data-dir", data, "--nats-url", c.natsURL))
		// Ingest, the extractor and the retriever run in up alone: the memories
		// are in one vector store, which the reads with a node down are answered
		// from, and the Markdown in one directory (a second extractor on a
		// filesystem store of its own would write a session it redid there again).
		c.addWorkers(bins, dir, "consolidator")
		c.vectorsPath, c.memoryDir = filepath.Join(data, "vectors.db"), filepath.Join(data, "memory")
	default:
		natsAddr := loopback(t)
		c.natsURL = "nats://" + natsAddr
		_, port, _ := net.SplitHostPort(natsAddr)
		c.add(&proc{
			name: "nats-server", bin: natsServer,
			args:    []string{"-js", "-sd", filepath.Join(dir, "nats"), "-a", "127.0.0.1", "-p", port},
			env:     env,
			logPath: filepath.Join(dir, "nats-server.log"),
			ready:   natsReady(c.natsURL),
		})
		c.addWorkers(bins, dir, workerNames...)
		c.vectorsPath = filepath.Join(dir, "ingest", "vectors.db")
		c.memoryDir = filepath.Join(dir, "extractor", "memory")
	}
	return c
}

// loopback is "127.0.0.1:port" with a port that was free a moment ago.
func loopback(t *testing.T) string { return "127.0.0.1:" + strconv.Itoa(freePort(t)) }

// env is every process's environment: baseEnv, the NATS URL and replicas.
func (c *cluster) env(extra ...string) []string {
	return append(append(baseEnv(), "AGENTMEM_NATS_URL="+c.natsURL,
		"AGENTMEM_NATS_STREAM_REPLICAS="+strconv.Itoa(c.replicas)), extra...)
}

// upProc is `agentmem up` with args.
func (c *cluster) upProc(bins, dir string, args ...string) *proc {
	httpAddr := loopback(c.t)
	return &proc{
		name: "up", bin: filepath.Join(bins, "agentmem"),
		args:    append([]string{"up"}, args...),
		env:     c.env("AGENTMEM_HTTP_LISTEN=" + httpAddr),
		logPath: filepath.Join(dir, "up.log"),
		ready:   httpReady(httpAddr),
	}
}

// addWorkers adds the worker binaries names, each with a data directory of its own.
func (c *cluster) addWorkers(bins, dir string, names ...string) {
	for _, w := range names {
		httpAddr := loopback(c.t)
		c.add(&proc{
			name: w, bin: filepath.Join(bins, w),
			env:     c.env("AGENTMEM_DATA_DIR="+filepath.Join(dir, w), "AGENTMEM_HTTP_LISTEN="+httpAddr),
			logPath: filepath.Join(dir, w+".log"),
			ready:   httpReady(httpAddr),
		})
	}
}

// addNATSCluster adds n nats-server processes "nats-1"… forming one JetStream
// cluster, each routing to all, and sets c.natsURL to their client URLs. A node
// is ready once JetStream answers through it and its /healthz says every
// stream and consumer it holds is current: a node restarted a moment ago and
// still catching up is no replica yet, and killing the next one then takes a
// second node of three away.
func (c *cluster) addNATSCluster(natsServer, dir string, n int) {
	clientAddrs, routes, monitors := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		clientAddrs[i], routes[i], monitors[i] = loopback(c.t), "nats://"+loopback(c.t), loopback(c.t)
	}
	urls := make([]string, n)
	for i := range n {
		name := "nats-" + strconv.Itoa(i+1)
		_, port, _ := net.SplitHostPort(clientAddrs[i])
		_, monitorPort, _ := net.SplitHostPort(monitors[i])
		urls[i] = "nats://" + clientAddrs[i]
		js, health := natsReady(urls[i]), httpStatusOK("http://"+monitors[i]+"/healthz")
		c.add(&proc{
			name: name, bin: natsServer, peer: true,
			args: []string{"-js", "-sd", filepath.Join(dir, name), "-a", "127.0.0.1", "-p", port, "--server_name", name,
				"-m", monitorPort,
				"--cluster_name", "agentmem-chaos", "--cluster", routes[i], "--routes", strings.Join(routes, ",")},
			env:     baseEnv(),
			logPath: filepath.Join(dir, name+".log"),
			ready: func(ctx context.Context) error {
				if err := js(ctx); err != nil {
					return err
				}
				return health(ctx)
			},
		})
	}
	c.natsURL = strings.Join(urls, ",")
}

var workerNames = []string{"ingest", "extractor", "consolidator", "retriever"}

const readyTimeout = 60 * time.Second

// startAll starts every process in order and waits for each to be ready (the
// nodes of a cluster together).
func (c *cluster) startAll() error {
	for i := 0; i < len(c.procs); {
		group := c.procs[i : i+1]
		for c.procs[i].peer && len(group) < len(c.procs)-i && c.procs[i+len(group)].peer {
			group = c.procs[i : i+len(group)+1]
		}
		for _, p := range group {
			if err := p.start(); err != nil {
				return err
			}
		}
		for _, p := range group {
			if err := p.waitReady(readyTimeout); err != nil {
				return err
			}
		}
		i += len(group)
	}
	return nil
}

// ensureAll restarts any process that died without being told to (noting it) and
// waits until every one is ready.
func (c *cluster) ensureAll() error {
	for _, p := range c.procs {
		if !p.running() {
			c.note("%s exited unexpectedly (%v); restarted", p.name, p.exitErr)
			if err := p.start(); err != nil {
				return err
			}
		}
	}
	for _, p := range c.procs {
		if err := p.waitReady(readyTimeout); err != nil {
			return err
		}
	}
	return nil
}

// stopAll stops every process with SIGTERM, last started first, noting any that
// did not stop cleanly.
func (c *cluster) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if !p.running() {
			continue
		}
		exitErr, err := p.signal(syscall.SIGTERM, stopTimeout)
		if err != nil {
			c.note("final stop: %v", err)
		} else if exitErr != nil {
			c.note("final stop: %s exited with %v after SIGTERM", p.name, exitErr)
		}
	}
}

// stopTimeout bounds a graceful stop: the workers give in-flight work 30 s.
const stopTimeout = 45 * time.Second

// kill carries out one action: signal the target, wait for its exit, run
// whileDown (when not nil), start the target again, and wait until every
// process is ready.
func (c *cluster) kill(a killAction, whileDown func(killAction) error) error {
	p := c.byName[a.target]
	if !p.running() {
		c.note("%s exited unexpectedly (%v) before %s", p.name, p.exitErr, a)
	} else {
		exitErr, err := p.signal(a.sig, stopTimeout)
		switch {
		case err != nil:
			c.note("%s: %v", a, err)
		case a.sig == syscall.SIGTERM && exitErr != nil:
			c.note("%s: exit %v after SIGTERM", a, exitErr)
		}
	}
	if whileDown != nil {
		if err := whileDown(a); err != nil {
			return err
		}
	}
	if err := p.start(); err != nil {
		return err
	}
	return c.ensureAll()
}
