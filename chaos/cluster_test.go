package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
)

// TestChaosCluster is the cluster scenario at the size CI runs: one round of
// 300 observations on a 3-node JetStream cluster at R3, two nodes SIGKILLed in
// turn (one of them the event stream's leader when its kill comes) while the
// publishers send; with each node down, a context request must find the
// observation acked last.
func TestChaosCluster(t *testing.T) {
	run(t, params{rounds: 1, messages: 300, kills: [2]int{2, 2}, publishers: 4, scenario: scenarioCluster})
}

// readDownTimeout bounds the wait for a read with a node down: the new stream
// leader is elected and ingest catches up with the publishers first.
const readDownTimeout = 2 * time.Minute

// streamLeader is the name of the node leading the event stream.
func streamLeader(js jetstream.JetStream) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", bus.DefaultStream, err)
	}
	if cl := s.CachedInfo().Cluster; cl != nil && cl.Leader != "" {
		return cl.Leader, nil
	}
	return "", fmt.Errorf("stream %s has no leader", bus.DefaultStream)
}

// readWhileDown is the read check with a.target down: context requests for the
// user of the observation acked last (probe: user and token) until the pack's
// memories hold its token. An error reply is retried until the
// deadline; then the last one is the failure.
func readWhileDown(nc *nats.Conn, probe *[2]string, a killAction, logf func(string, ...any)) error {
	if probe == nil {
		return fmt.Errorf("read with %s down: no observation acked yet", a.target)
	}
	cl, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "chaos-reader"})
	if err != nil {
		return err
	}
	user, token := probe[0], probe[1]
	began := time.Now()
	var last error
	for attempts := 1; time.Since(began) < readDownTimeout; attempts++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pack, err := cl.Context(ctx, events.ContextRequest{UserID: user, Query: "where is my item " + token, RecordHits: events.NoHits()})
		cancel()
		if err == nil {
			if packHolds(pack, token) {
				logf("read with %s down: %s's context holds %s after %.1f s, %d requests", a.target, user, token, time.Since(began).Seconds(), attempts)
				return nil
			}
			err = fmt.Errorf("no memory of the pack holds %s (%d episodic, %d semantic items, %d topics, %d chunks)",
				token, len(pack.EpisodicItems), len(pack.SemanticItems), len(pack.Topics), len(pack.Chunks))
		}
		if last == nil || err.Error() != last.Error() {
			logf("read with %s down, after %.1f s: %v", a.target, time.Since(began).Seconds(), err)
		}
		last = err
		time.Sleep(250 * time.Millisecond) // poll interval while ingest catches up
	}
	return fmt.Errorf("read with %s down: %s's context within %s: %w", a.target, user, readDownTimeout, last)
}

// packHolds reports whether a memory section of pack holds token. Not the
// episodic items alone: once the observation's session is extracted, the pack
// keeps its text once, in the first of core, topics, facts, episodes and chunks
// (the retriever's dedupe), and an episode read as the extractor wrote its
// session was missing from the episodic items while it was answered.
func packHolds(pack events.ContextPack, token string) bool {
	items := slices.Concat(pack.EpisodicItems, pack.SemanticItems, pack.Topics, pack.Chunks)
	if pack.Core != nil {
		items = append(items, *pack.Core)
	}
	return slices.ContainsFunc(items, func(it events.PackItem) bool { return strings.Contains(it.Text, token) })
}

// checkReplicas reports every stream (KV buckets included) whose replica count
// is not want.
func checkReplicas(ctx context.Context, js jetstream.JetStream, want int) error {
	var errs []error
	n := 0
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		n++
		s, err := js.Stream(ctx, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got := s.CachedInfo().Config.Replicas; got != want {
			errs = append(errs, fmt.Errorf("stream %s has %d replicas, want %d", name, got, want))
		}
	}
	if err := names.Err(); err != nil {
		errs = append(errs, err)
	}
	if n == 0 {
		errs = append(errs, errors.New("no stream listed"))
	}
	return errors.Join(errs...)
}
