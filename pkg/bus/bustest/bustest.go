// Package bustest starts real embedded nats-servers for tests.
package bustest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/obs"
)

// StartServer starts a JetStream nats-server in-process with its own StoreDir under
// t.TempDir(); it is shut down when the test ends.
func StartServer(t testing.TB) *server.Server {
	t.Helper()
	return StartServerIn(t, t.TempDir())
}

// StartServerIn starts a server on storeDir, so a test can restart one on the same data.
// The caller may shut it down early; the cleanup tolerates that.
func StartServerIn(t testing.TB, storeDir string) *server.Server {
	t.Helper()
	return StartServerWith(t, bus.EmbeddedConfig{StoreDir: storeDir})
}

// StartServerWith starts a server from cfg (StoreDir defaults to a fresh t.TempDir()),
// for tests that need a TCP listener, monitoring, auth or TLS.
func StartServerWith(t testing.TB, cfg bus.EmbeddedConfig) *server.Server {
	t.Helper()
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	srv, err := bus.StartEmbedded(cfg)
	if err != nil {
		t.Fatalf("start embedded nats-server: %v", err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// StartCluster starts n JetStream nats-servers in-process as one cluster
// ("agentmem-test", each routing to all), each with a loopback client listener
// and a store of its own, and waits until the meta group has a leader that sees
// every peer, so that a stream with n replicas can be created at once. It
// returns the servers and their client URLs joined by commas, as nats.url
// takes them; they are shut down when the test ends.
func StartCluster(t testing.TB, n int) ([]*server.Server, string) {
	t.Helper()
	routes := make([]*url.URL, n)
	ports := make([]int, n)
	for i := range routes {
		addr := FreeAddr(t)
		routes[i] = &url.URL{Scheme: "nats-route", Host: addr}
		_, port, _ := net.SplitHostPort(addr)
		ports[i], _ = strconv.Atoi(port)
	}
	servers := make([]*server.Server, n)
	urls := make([]string, n)
	for i := range servers {
		servers[i] = StartServerWith(t, bus.EmbeddedConfig{
			ServerName: fmt.Sprintf("n%d", i+1),
			Listen:     "127.0.0.1:0",
			Configure: func(o *server.Options) {
				o.Cluster.Name = "agentmem-test"
				o.Cluster.Host, o.Cluster.Port = "127.0.0.1", ports[i]
				o.Routes = routes
			},
		})
		urls[i] = servers[i].ClientURL()
	}
	Eventually(t, 30*time.Second, func() error { return clusterFormed(servers) })
	return servers, strings.Join(urls, ",")
}

// clusterFormed is nil once some server is the meta leader and sees the other
// servers as current peers.
func clusterFormed(servers []*server.Server) error {
	for _, srv := range servers {
		if !srv.JetStreamIsLeader() {
			continue
		}
		info, err := srv.Jsz(nil)
		if err != nil {
			return err
		}
		current := 0
		for _, p := range info.Meta.Replicas {
			if p.Current && !p.Offline {
				current++
			}
		}
		if current != len(servers)-1 {
			return fmt.Errorf("meta leader %s sees %d of %d peers current", srv.Name(), current, len(servers)-1)
		}
		return nil
	}
	return errors.New("no meta leader yet")
}

// Connect opens an in-process client connection to srv, closed when the test ends.
func Connect(t testing.TB, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatalf("connect to embedded nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new in-process connection to srv.
func JetStream(t testing.TB, srv *server.Server) jetstream.JetStream {
	t.Helper()
	return jetStreamOn(t, Connect(t, srv))
}

// Provisioned starts a server, connects to it and provisions the AGENTMEM and
// AGENTMEM_DLQ streams with the default bus.StreamConfig.
func Provisioned(t testing.TB) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := StartServer(t)
	nc := Connect(t, srv)
	js := jetStreamOn(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatalf("provision streams: %v", err)
	}
	return srv, nc, js
}

// Eventually polls check every 10ms until it returns nil, and fails the test with
// check's last error if that does not happen within timeout.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		<-tick.C
	}
}

// PublishAndDrain publishes msgs asynchronously on a connection of its own, as an
// agent would, and waits until durable of stream has acknowledged them all. It
// reports messages per second over that span ("msgs/s") and the CPU time the
// process spent per message ("cpu-µs/msg": server, publisher and consumer all run
// in it), which tells a CPU-bound consumer from one that waits.
func PublishAndDrain(b *testing.B, srv *server.Server, stream, durable string, msgs []*nats.Msg) {
	b.Helper()
	ctx := context.Background()
	js := JetStream(b, srv)
	// A missing durable fails now rather than after WaitSettled's timeout.
	if _, err := js.Consumer(ctx, stream, durable); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	began, cpuBefore := time.Now(), ProcessCPU(b)
	for _, m := range msgs {
		_, err := js.PublishMsgAsync(m)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// The server fell behind (a busy machine): let it catch up.
			<-js.PublishAsyncComplete()
			_, err = js.PublishMsgAsync(m)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	WaitSettled(b, js, stream, durable, 5*time.Minute)
	b.StopTimer()
	elapsed, cpu := time.Since(began), ProcessCPU(b)-cpuBefore
	b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(msgs)), "cpu-µs/msg")
}

// WaitSettled waits until Settled, failing t after timeout.
func WaitSettled(t testing.TB, js jetstream.JetStream, stream, durable string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error { return Settled(context.Background(), js, stream, durable) })
}

// Settled is nil once the durable has delivered every message of its stream and
// seen each acknowledged (bus.Backlog is 0), else an error saying how many it has
// still to handle.
func Settled(ctx context.Context, js jetstream.JetStream, stream, durable string) error {
	n, err := bus.Backlog(ctx, js, stream, durable)
	if err == nil && n > 0 {
		err = fmt.Errorf("durable %s: %d messages still to deliver or to see acknowledged", durable, n)
	}
	return err
}

// ProcessCPU is the user and system CPU time the process has used (obs.ProcessCPU),
// failing b where the system does not say.
func ProcessCPU(b *testing.B) time.Duration {
	cpu, ok := obs.ProcessCPU()
	if !ok {
		b.Fatal("the process's CPU time is unknown on this system")
	}
	return cpu
}

func jetStreamOn(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream context: %v", err)
	}
	return js
}

// FreeAddr is a "127.0.0.1:port" nobody listened on a moment ago, for a listener
// that must be named before it starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StreamEvents returns the events of the agentmem stream whose subject starts
// with prefix ("mem.acme.summary."), in stream order.
func StreamEvents(t testing.TB, js jetstream.JetStream, prefix string) []events.Envelope {
	t.Helper()
	ctx := context.Background()
	stream, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Envelope
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil || !strings.HasPrefix(m.Subject, prefix) {
			continue
		}
		env, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("%s %d: %v", m.Subject, seq, err)
		}
		out = append(out, env)
	}
	return out
}
