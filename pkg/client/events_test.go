package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/session"
)

const tenant = "acme"

func newClient(t testing.TB, nc *nats.Conn) *client.Client {
	t.Helper()
	c, err := client.New(nc, client.Config{Tenant: tenant, AgentID: "excel-bot"})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fatalf is what the helpers need of a *testing.T or a *rapid.T.
type fatalf interface {
	Helper()
	Fatalf(format string, args ...any)
}

// storedOn returns every message the event stream holds on subject, oldest first.
func storedOn(t fatalf, ctx context.Context, js jetstream.JetStream, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	str, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := str.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		raw, err := str.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		if raw.Subject == subject {
			out = append(out, raw)
		}
	}
	return out
}

// decodeStored checks that a stored message is a valid envelope filed on its own
// subject under its own Nats-Msg-Id, and returns it.
func decodeStored(t fatalf, raw *jetstream.RawStreamMsg) events.Envelope {
	t.Helper()
	env, err := events.Decode(raw.Data)
	if err != nil {
		t.Fatalf("stored event on %s does not decode: %v\n%s", raw.Subject, err, raw.Data)
	}
	if err := env.CheckSubject(raw.Subject); err != nil {
		t.Fatalf("stored event on the wrong subject: %v", err)
	}
	if got := raw.Header.Get(events.HeaderMsgID); got != env.ID {
		t.Fatalf("Nats-Msg-Id is %q, want the envelope id %q", got, env.ID)
	}
	return env
}

func TestEventMethodsPublishValidEnvelopesOnTheirSubjects(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	c := newClient(t, nc)
	ctx := testContext(t)
	const user, sess = "u1", "s1"

	sayID, err := c.Say(ctx, user, sess, events.RoleUser, "Remember: my sales files have columns date, product, qty.", map[string]any{"dia_id": "D1:3", "n": 12345678901234567})
	if err != nil {
		t.Fatalf("Say: %v", err)
	}
	turn, err := c.StartTurn(ctx, user, sess, "", sayID)
	if err != nil {
		t.Fatalf("StartTurn: %v", err)
	}
	callID, err := c.ToolCall(ctx, user, sess, events.ToolCall{ID: "call_1", Name: "read_excel", Arguments: json.RawMessage(`{"path":"sales.xlsx"}`)})
	if err != nil {
		t.Fatalf("ToolCall: %v", err)
	}
	resultID, err := c.ToolResult(ctx, user, sess, events.ToolResult{CallID: "call_1", Name: "read_excel", Output: "date,product,qty"})
	if err != nil {
		t.Fatalf("ToolResult: %v", err)
	}
	turn.Plan = "read the file, then answer"
	finishID, err := c.FinishTurn(ctx, turn, events.TurnOK, "")
	if err != nil {
		t.Fatalf("FinishTurn: %v", err)
	}
	endID, err := c.EndSession(ctx, user, sess)
	if err != nil {
		t.Fatalf("EndSession: %v", err)
	}

	obs := storedOn(t, ctx, js, "mem.acme.obs.u1.s1")
	ended := storedOn(t, ctx, js, "mem.acme.ended.u1.s1")
	if len(obs) != 5 || len(ended) != 1 {
		t.Fatalf("stored %d observations and %d session_ended, want 5 and 1", len(obs), len(ended))
	}
	var got []events.Envelope
	for _, raw := range append(obs, ended...) {
		got = append(got, decodeStored(t, raw))
	}
	wantIDs := []string{sayID, turn.EventID, callID, resultID, finishID, endID}
	for i, env := range got {
		if env.ID != wantIDs[i] {
			t.Errorf("event %d has id %s, want %s (the id the method returned)", i, env.ID, wantIDs[i])
		}
		if env.Tenant != tenant || env.UserID != user || env.SessionID != sess || env.AgentID != "excel-bot" {
			t.Errorf("event %d has tenant/user/session/agent %s/%s/%s/%s", i, env.Tenant, env.UserID, env.SessionID, env.AgentID)
		}
	}

	msg := got[0].Observation
	if msg.EffectiveKind() != events.KindMessage || msg.Role != events.RoleUser || !strings.Contains(msg.Text, "qty") {
		t.Errorf("message observation is %+v", msg)
	}
	// Meta is kept exactly: a number beyond float64 precision survives as written.
	if msg.Meta["dia_id"] != "D1:3" || msg.Meta["n"] != json.Number("12345678901234567") {
		t.Errorf("meta is %#v, want dia_id D1:3 and n 12345678901234567 unchanged", msg.Meta)
	}
	if k := got[1].Observation; k.Kind != events.KindTurnStarted || k.Turn.Status != events.TurnRunning || k.Turn.InputEventID != sayID {
		t.Errorf("turn_started observation is %+v / %+v", k, k.Turn)
	}
	if k := got[2].Observation; k.Kind != events.KindToolCall || k.Role != events.RoleAssistant || k.ToolCall.Name != "read_excel" {
		t.Errorf("tool_call observation is %+v", k)
	}
	if k := got[3].Observation; k.Kind != events.KindToolResult || k.Role != events.RoleTool || k.ToolResult.Output != "date,product,qty" {
		t.Errorf("tool_result observation is %+v", k)
	}
	fin := got[4].Observation
	if fin.Kind != events.KindTurnFinished || fin.Turn.Status != events.TurnOK || fin.Turn.TurnID != turn.TurnID || fin.Turn.Plan != turn.Plan {
		t.Errorf("turn_finished observation is %+v / %+v", fin, fin.Turn)
	}
	if got[5].Type != events.TypeSessionEnded {
		t.Errorf("last event has type %s, want session_ended", got[5].Type)
	}

	// The turn events make one finished turn in the real session store (SPEC D3, D5).
	store, err := session.New(ctx, session.Config{}, js, zap.NewNop())
	if err != nil {
		t.Fatalf("session.New: %v", err)
	}
	for _, env := range got {
		if _, _, err := store.Apply(ctx, env); err != nil {
			t.Fatalf("session Apply %s: %v", env.ID, err)
		}
	}
	stored, err := store.GetTurn(ctx, "acme.u1.s1", turn.TurnID)
	if err != nil {
		t.Fatalf("GetTurn: %v", err)
	}
	if stored.Status != events.TurnOK || stored.InputEventID != sayID || stored.Plan != turn.Plan || stored.FinishedTS.Before(stored.StartedTS) {
		t.Errorf("stored turn is %+v", stored)
	}
}

func TestFinishTurnWithErrorCarriesTheErrorText(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	c := newClient(t, nc)
	ctx := testContext(t)
	turn, err := c.StartTurn(ctx, "u1", "s2", "t-1", "")
	if err != nil {
		t.Fatalf("StartTurn: %v", err)
	}
	if turn.TurnID != "t-1" {
		t.Fatalf("turn id is %q, want the given t-1", turn.TurnID)
	}
	if _, err := c.FinishTurn(ctx, turn, events.TurnError, "sheet not found"); err != nil {
		t.Fatalf("FinishTurn: %v", err)
	}
	stored := storedOn(t, ctx, js, "mem.acme.obs.u1.s2")
	if len(stored) != 2 {
		t.Fatalf("stored %d events, want 2", len(stored))
	}
	fin := decodeStored(t, stored[1]).Observation.Turn
	if fin.Status != events.TurnError || fin.Error != "sheet not found" || fin.FinishedTS.IsZero() {
		t.Errorf("finished turn is %+v", fin)
	}
	// A turn cannot finish as running: the contract rejects it before anything is sent.
	if _, err := c.FinishTurn(ctx, turn, events.TurnRunning, ""); !errors.Is(err, client.ErrInvalidEvent) {
		t.Errorf("FinishTurn(running) error is %v, want ErrInvalidEvent", err)
	}
}

// TestPropertyRepublishedEnvelopeIsStoredOnce: however often and in whatever order a
// set of envelopes is published, the stream holds each id exactly once.
func TestPropertyRepublishedEnvelopeIsStoredOnce(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	c := newClient(t, nc)
	ctx := testContext(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		sess := fmt.Sprintf("s%d", run)
		n := rapid.IntRange(1, 4).Draw(rt, "distinct")
		envs := make([]events.Envelope, n)
		for i := range envs {
			envs[i] = events.New(events.TypeObservation, tenant, "u1", "", sess)
			envs[i].Observation = &events.Observation{Role: events.RoleUser, Text: fmt.Sprintf("message %d", i)}
		}
		order := rapid.SliceOfN(rapid.IntRange(0, n-1), n, 3*n).Draw(rt, "publish order")
		for i := range envs { // every envelope at least once
			order = append(order, i)
		}
		for _, i := range order {
			if err := c.Publish(ctx, envs[i]); err != nil {
				rt.Fatalf("Publish: %v", err)
			}
		}
		stored := storedOn(rt, ctx, js, "mem.acme.obs.u1."+sess)
		seen := map[string]int{}
		for _, raw := range stored {
			seen[decodeStored(rt, raw).ID]++
		}
		if len(stored) != n || len(seen) != n {
			rt.Fatalf("published %d distinct envelopes %d times; stream holds %d messages with %d ids", n, len(order), len(stored), len(seen))
		}
	})
}

func TestInvalidEventsAreRejectedBeforePublishing(t *testing.T) {
	_, nc, js := bustest.Provisioned(t)
	c := newClient(t, nc)
	ctx := testContext(t)

	small, err := client.New(nc, client.Config{Tenant: tenant, MaxTextBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	other := events.New(events.TypeObservation, "globex", "u1", "", "s1")
	other.Observation = &events.Observation{Role: events.RoleUser, Text: "hi"}
	cases := []struct {
		name    string
		publish func() error
		want    []error
		mention string
	}{
		{"user id with a space", func() error {
			_, err := c.Say(ctx, "u 1", "s1", events.RoleUser, "hi", nil)
			return err
		}, []error{events.ErrInvalidID}, "user_id"},
		{"session id with a wildcard", func() error {
			_, err := c.Say(ctx, "u1", "s.>", events.RoleUser, "hi", nil)
			return err
		}, []error{events.ErrInvalidID}, "session_id"},
		{"empty message", func() error {
			_, err := c.Say(ctx, "u1", "s1", events.RoleUser, "", nil)
			return err
		}, []error{events.ErrInvalidEvent}, "text"},
		{"unknown role", func() error {
			_, err := c.Say(ctx, "u1", "s1", events.Role("robot"), "hi", nil)
			return err
		}, []error{events.ErrInvalidEvent}, "role"},
		{"tool call without a name", func() error {
			_, err := c.ToolCall(ctx, "u1", "s1", events.ToolCall{ID: "c1"})
			return err
		}, []error{events.ErrInvalidEvent}, "tool_call.name"},
		{"end of an unnamed session", func() error {
			_, err := c.EndSession(ctx, "u1", "")
			return err
		}, []error{events.ErrInvalidID}, "session_id"},
		{"another tenant's envelope", func() error { return c.Publish(ctx, other) }, nil, "globex"},
		// Ingest would dead-letter it after handing out an id (issue 35).
		{"text over the default limit", func() error {
			_, err := c.Say(ctx, "u1", "s1", events.RoleUser, strings.Repeat("x", events.DefaultMaxTextBytes+1), nil)
			return err
		}, []error{events.ErrInvalidEvent, events.ErrTooLarge}, "observation.text is 65537 bytes, limit 65536"},
		{"tool output over a configured limit", func() error {
			_, err := small.ToolResult(ctx, "u1", "s1", events.ToolResult{CallID: "c1", Output: "eleven char"})
			return err
		}, []error{events.ErrTooLarge}, "observation.tool_result.output is 11 bytes, limit 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.publish()
			if !errors.Is(err, client.ErrInvalidEvent) {
				t.Fatalf("error is %v, want ErrInvalidEvent", err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name %q", err, tc.mention)
			}
			if strings.Count(err.Error(), "invalid event") > 1 {
				t.Errorf("error %q says \"invalid event\" more than once", err)
			}
		})
	}
	str, err := js.Stream(ctx, bus.DefaultStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the stream holds %d messages; rejected events must not be published", info.State.Msgs)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	nc := bustest.Connect(t, bustest.StartServer(t))
	cases := []struct {
		name    string
		nc      *nats.Conn
		cfg     client.Config
		mention string
	}{
		{"nil connection", nil, client.Config{Tenant: tenant}, "nil"},
		{"no tenant", nc, client.Config{}, "Tenant"},
		{"dotted tenant", nc, client.Config{Tenant: "ac.me"}, "Tenant"},
		{"wildcard agent", nc, client.Config{Tenant: tenant, AgentID: "*"}, "AgentID"},
		{"negative timeout", nc, client.Config{Tenant: tenant, RequestTimeout: -time.Second}, "RequestTimeout"},
		{"negative text limit", nc, client.Config{Tenant: tenant, MaxTextBytes: -1}, "MaxTextBytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(tc.nc, tc.cfg)
			if !errors.Is(err, client.ErrInvalidConfig) || c != nil {
				t.Fatalf("New = %v, %v; want nil, ErrInvalidConfig", c, err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not name %q", err, tc.mention)
			}
		})
	}
}

func TestPublishWithoutStreamSaysSo(t *testing.T) {
	nc := bustest.Connect(t, bustest.StartServer(t)) // JetStream on, no AGENTMEM stream
	c := newClient(t, nc)
	_, err := c.Say(testContext(t), "u1", "s1", events.RoleUser, "hello", nil)
	if !errors.Is(err, client.ErrNoStream) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("error is %v, want ErrNoStream wrapping jetstream.ErrNoStreamResponse", err)
	}
	if !strings.Contains(err.Error(), "mem.acme.obs.u1.s1") {
		t.Errorf("error %q does not name the subject", err)
	}
}
