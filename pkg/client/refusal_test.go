package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// authServer starts a server trusting a fresh authority, as `agentmem up --auth`
// runs it, with the event stream and a stand-in retriever on the service
// credential: every request is answered "{}" once release is closed.
func authServer(t *testing.T, release <-chan struct{}) (url string, a *natsauth.Authority) {
	t.Helper()
	a, err := natsauth.New(natsauth.Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := a.Trust()
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.StartServerWith(t, bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Auth: &trust})
	svcCreds, err := a.WriteServiceCreds()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := client.Connect(srv.ClientURL(), svcCreds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	js, err := jetstream.New(svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.ProvisionStreams(context.Background(), js, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Subscribe("memrpc.*.>", func(m *nats.Msg) {
		go func() {
			<-release
			_ = m.Respond([]byte(`{}`))
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), a
}

// wantRefused checks that err is the server's refusal of subject (a failed
// call as well, one of want), which came well before the client's timeout of a
// minute.
func wantRefused(t *testing.T, what string, err error, took time.Duration, subject string, want error) {
	t.Helper()
	if !errors.Is(err, client.ErrRefused) || !errors.Is(err, want) || !strings.Contains(err.Error(), "permissions violation") || !strings.Contains(err.Error(), subject) {
		t.Fatalf("%s: %v, want the server's refusal of %s", what, err, subject)
	}
	if took > 5*time.Second {
		t.Fatalf("%s: refused after %s, want at once", what, took)
	}
}

// Issue 30: a call the server refuses by the credential's permissions fails at
// once with the refusal (ErrRefused, naming the subject and the violation), not
// at the client's timeout; a call on another subject, waiting at the same time
// on the same connection, is not failed by it.
func TestRefusedCallsFailAtOnce(t *testing.T) {
	release := make(chan struct{})
	url, a := authServer(t, release)
	ctx := context.Background()

	nc, err := client.Connect(url, apptest.Creds(t, a, "acme", natsauth.RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.Config{Tenant: "acme", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	allowed := make(chan error, 1)
	go func() {
		_, err := cl.Context(ctx, events.ContextRequest{UserID: "u1"})
		allowed <- err
	}()
	start := time.Now()
	_, err = cl.DeadLetters(ctx, events.DLQListRequest{})
	wantRefused(t, "an agent lists dead letters", err, time.Since(start), "memrpc.acme.dlq.list", client.ErrRequest)
	start = time.Now()
	_, err = cl.Forget(ctx, "u1")
	wantRefused(t, "an agent forgets", err, time.Since(start), "memrpc.acme.forget", client.ErrRequest)
	close(release)
	if err := <-allowed; err != nil {
		t.Fatalf("the agent's context request, pending while the others were refused: %v", err)
	}

	// An event of another tenant: JetStream's publish is refused, not left to
	// wait for an acknowledgement.
	other, err := client.New(nc, client.Config{Tenant: "globex", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = other.Observe(ctx, "u1", "s1", events.Observation{Role: events.RoleUser, Text: "hello"})
	wantRefused(t, "acme's agent observes for globex", err, time.Since(start), "mem.globex.obs.u1.s1", client.ErrPublish)

	// A tenant credential without its inbox prefix: the reply's subscription is
	// refused, so every call fails at once.
	bare, err := nats.Connect(url, nats.UserCredentials(apptest.Creds(t, a, "acme", natsauth.RoleAdmin)))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	bcl, err := client.New(bare, client.Config{Tenant: "acme", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = bcl.Context(ctx, events.ContextRequest{UserID: "u1"})
	wantRefused(t, "a request without the credential's inbox prefix", err, time.Since(start), "_INBOX.", client.ErrRequest)
}
