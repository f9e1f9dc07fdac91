package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

// jszReply is the part of nats-server's /jsz reply KEDA's nats-jetstream scaler
// reads (kedacore/keda pkg/scalers/nats_jetstream_scaler.go): the account by
// name, its stream by name, the consumer by name, and the lag as num_pending
// plus num_ack_pending.
type jszReply struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name      string `json:"name"`
			Consumers []struct {
				Name          string `json:"name"`
				NumPending    int    `json:"num_pending"`
				NumAckPending int    `json:"num_ack_pending"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// The ScaledObjects' triggers, asked of a real NATS server run from the
// manifests (operator mode, the AGENTMEM account KEDA's `account` is patched
// to) the way KEDA asks it, find each worker's durable and read its backlog:
// a trigger naming another account, stream or consumer, or a server whose
// monitoring hides the account, scales on nothing.
func TestKEDAReadsEachWorkersBacklogFromTheMonitoringEndpoint(t *testing.T) {
	k := loadK8s(t)
	a := newAuthority(t)
	trust, err := a.Trust()
	if err != nil {
		t.Fatal(err)
	}
	srv := startK8sNATS(t, natsConf(t, k), trust)
	service, err := a.ServiceCreds()
	if err != nil {
		t.Fatal(err)
	}
	credsPath := filepath.Join(t.TempDir(), "service.creds")
	if err := natsauth.WriteCreds(credsPath, service); err != nil {
		t.Fatal(err)
	}
	copts, err := natsauth.ClientOptions(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	specs := map[string]bus.ConsumerSpec{} // by durable
	var published []string
	for i, w := range streamWorkers {
		spec := bus.WorkerConsumer(w, bus.ConsumerDefaults{})
		if _, err := bus.ProvisionConsumer(ctx, js, bus.DefaultStream, spec); err != nil {
			t.Fatal(err)
		}
		specs[spec.Durable] = spec
		// A different number of events on a subject of each worker's first
		// filter; no worker runs, so each durable's backlog is what its filter
		// selects.
		subject := concrete(spec.FilterSubjects[0])
		for range 3 + 2*i {
			published = append(published, subject)
		}
	}
	for _, subject := range published {
		if _, err := js.Publish(ctx, subject, []byte(`{}`)); err != nil {
			t.Fatalf("publish %s: %v", subject, err)
		}
	}

	for _, so := range k.ofKind("ScaledObject") {
		md := decodeAs[scaledObject](t, so).Spec.Triggers[0].Metadata
		md["account"] = strings.Replace(md["account"], kedaAccountPlaceholder, trust.Account, 1)
		url := fmt.Sprintf("http://%s/jsz?acc=%s&consumers=true&config=true", srv.MonitorAddr(), md["account"])
		spec := specs[md["consumer"]]
		want := 0
		for _, subject := range published {
			if spec.FilterOnClient || slices.ContainsFunc(spec.FilterSubjects, func(f string) bool { return server.SubjectMatchesFilter(subject, f) }) {
				want++
			}
		}
		// The server counts a consumer's pending messages as it gets to them;
		// KEDA polls too (pollingInterval).
		bustest.Eventually(t, 10*time.Second, func() error {
			lag, err := kedaLag(url, md["account"], md["stream"], md["consumer"])
			if err == nil && lag != want {
				err = fmt.Errorf("KEDA reads a lag of %d for %s, want %d", lag, md["consumer"], want)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", so, err)
			}
			return nil
		})
	}
}

// kedaLag asks url as KEDA's scaler does and returns the consumer's lag.
func kedaLag(url, account, stream, consumer string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var reply jszReply
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return 0, fmt.Errorf("%s: %w", url, err)
	}
	for _, acc := range reply.Accounts {
		for _, s := range acc.Streams {
			if acc.Name != account || s.Name != stream {
				continue
			}
			for _, c := range s.Consumers {
				if c.Name == consumer {
					return c.NumPending + c.NumAckPending, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%s: no consumer %s of stream %s of account %s in the reply", url, consumer, stream, account)
}

// concrete is a subject filter's wildcards filled in.
func concrete(filter string) string {
	tokens := strings.Split(filter, ".")
	for i, tok := range tokens {
		if tok == "*" || tok == ">" {
			tokens[i] = fmt.Sprintf("t%d", i)
		}
	}
	return strings.Join(tokens, ".")
}
