package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/consolidate"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// provisioned are the streams every `agentmem up` provisions (a KV bucket is
// the stream KV_<bucket>), with Markdown in JetStream (memory.backend jetstream).
var provisioned = []string{
	bus.DefaultStream, bus.DefaultDLQStream, memory.DefaultHistoryStream, kvcas.DefaultKeyringStream,
	"KV_" + eventstore.ClaimsBucket, "KV_agentmem_sessions", "KV_agentmem_turns", "KV_" + docstore.DefaultBucket,
	"KV_" + extract.DefaultStateBucket, "KV_" + consolidate.DefaultNamespacesBucket,
	"KV_" + consolidate.DefaultLeaseBucket, "KV_" + consolidate.DefaultStateBucket,
}

// TestUpOnExternalClusterReplicatesEverything: `agentmem up --nats-url` on a
// 3-node cluster with nats.stream.replicas 3 embeds no server, provisions every
// stream and bucket at R3, and keeps storing and answering with the event
// stream's leader shut down.
func TestUpOnExternalClusterReplicatesEverything(t *testing.T) {
	servers, urls := bustest.StartCluster(t, 3)
	cfg, err := config.Load("", []string{
		"AGENTMEM_DATA_DIR=" + t.TempDir(),
		"AGENTMEM_HTTP_LISTEN=",
		"AGENTMEM_NATS_URL=" + urls,
		"AGENTMEM_NATS_STREAM_REPLICAS=3",
		"AGENTMEM_MEMORY_BACKEND=jetstream",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err := app.Up(ctx, cfg, app.UpOptions{External: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stack.Close(); err != nil {
			t.Errorf("stack close: %v", err)
		}
	}()
	if stack.Server() != nil || stack.ClientURL() != urls {
		t.Fatalf("external stack: Server() = %v, ClientURL() = %q; want nil and %q", stack.Server(), stack.ClientURL(), urls)
	}
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.Config{Tenant: "acme", AgentID: "cluster-bot"})
	if err != nil {
		t.Fatal(err)
	}
	rememberAndRecall(t, cl, "u1", "lk4411")

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]int{}
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		replicas[name] = s.CachedInfo().Config.Replicas
	}
	for _, name := range provisioned {
		if _, ok := replicas[name]; !ok {
			t.Errorf("stream %s was not provisioned; have %v", name, replicas)
		}
	}
	for name, r := range replicas {
		if r != 3 {
			t.Errorf("stream %s has %d replicas, want 3 (nats.stream.replicas)", name, r)
		}
	}
	if t.Failed() {
		return
	}

	// The event stream's leader goes away: a new one is elected among the
	// other two, and the stack stores and answers as before.
	info, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	leader := info.CachedInfo().Cluster.Leader
	i := slices.IndexFunc(servers, func(s *server.Server) bool { return s.Name() == leader })
	if i < 0 {
		t.Fatalf("stream %s: leader %q is none of the servers", bus.DefaultStream, leader)
	}
	servers[i].Shutdown()
	servers[i].WaitForShutdown()
	rememberAndRecall(t, cl, "u2", "lk5522")
}

// rememberAndRecall has user ask to remember an item tagged token, then polls
// the context endpoint until the pack's episodic memories hold it.
func rememberAndRecall(t *testing.T, cl *client.Client, user, token string) {
	t.Helper()
	text := fmt.Sprintf("Remember: my item %s is stored in box 7.", token)
	bustest.Eventually(t, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cl.Say(ctx, user, "s1", events.RoleUser, text, nil)
		return err
	})
	bustest.Eventually(t, 2*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pack, err := cl.Context(ctx, events.ContextRequest{UserID: user, Query: "where is item " + token, RecordHits: events.NoHits()})
		if err != nil {
			return err
		}
		for _, it := range pack.EpisodicItems {
			if strings.Contains(it.Text, token) {
				return nil
			}
		}
		return fmt.Errorf("context of %s: no episodic memory holds %s (%d episodic items)", user, token, len(pack.EpisodicItems))
	})
}

// TestUpExternalRefusesAuth: --auth manages an embedded server's trust, which
// --nats-url replaces; asking for both is an error, not a stack without auth.
func TestUpExternalRefusesAuth(t *testing.T) {
	cfg, err := config.Load("", []string{"AGENTMEM_DATA_DIR=" + t.TempDir(), "AGENTMEM_HTTP_LISTEN="})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := natsauth.New(natsauth.Config{Dir: natsauth.KeyDir(cfg.DataDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.Up(context.Background(), cfg, app.UpOptions{External: true, Auth: auth}, nil)
	if !errors.Is(err, app.ErrUpOptions) {
		t.Fatalf("Up(External, Auth) = %v, want ErrUpOptions", err)
	}
}
