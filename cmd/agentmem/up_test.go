package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// Issue 32: `up --nats-url URL` embeds no server: it provisions its streams on
// the server at URL and says so; --nats-listen, which configures the embedded
// server, is refused beside it.
func TestUpOnAnExternalServer(t *testing.T) {
	srv := bustest.StartServerWith(t, bus.EmbeddedConfig{Listen: "127.0.0.1:0"})
	url := srv.ClientURL()
	refusedCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, refused := upInBackground(t, refusedCtx, "--nats-url", url) // with --nats-listen
	if err := <-refused; err == nil || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("up --nats-url --nats-listen = %v, want a refusal naming --nats-listen", err)
	}

	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	root := newRoot()
	out := &syncBuffer{}
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs([]string{"up", "--nats-url", url, "--data-dir", t.TempDir(), "--http-listen", ""})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "agentmem is up"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("up --nats-url is not up:\n%s", out.String())
		}
	}
	for _, want := range []string{"NATS:        " + url, "JetStream:   external, 1 replicas per stream and bucket"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("up --nats-url does not print %q:\n%s", want, out.String())
		}
	}
	js, err := jetstream.New(bustest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, bus.DefaultStream); err != nil {
		t.Errorf("stream %s on the external server: %v", bus.DefaultStream, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("up --nats-url after Ctrl-C: %v\n%s", err, out.String())
	}
}
