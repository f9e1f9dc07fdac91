package session_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/session"
)

// What export reads (UserKeys, ReadValue) and import writes (Load) is one
// user's values, every kind of them and no other user's; loaded under another
// tenant and user they name the new owner, the state goes among the new user's
// recent sessions, and loading twice is loading once.
func TestExportAndLoadOneUsersValues(t *testing.T) {
	ctx := context.Background()
	src := newStore(t, session.Config{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	turn := obs("s1", events.Observation{Kind: events.KindTurnStarted, Role: events.RoleAssistant, Turn: &events.TurnRecord{TurnID: "t1", Plan: "p"}}, t0)
	msg := obs("s1", events.Observation{Role: events.RoleUser, Text: "hi"}, t0.Add(time.Second))
	for _, env := range []events.Envelope{turn, msg} {
		if _, _, err := src.Apply(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.PutSummary(ctx, "acme", "u1", "s1", session.Summary{Text: "sum", LastEventID: msg.ID, ThroughTS: msg.TS, Messages: 1, By: session.SummaryByRules}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := src.ClaimReflection(ctx, "acme", "u1", "s1", 1); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// Another user of the tenant, and a user of that name in another tenant.
	for _, env := range []events.Envelope{
		events.New(events.TypeObservation, "acme", "u2", "bot", "s2"),
		events.New(events.TypeObservation, "beta", "u1", "bot", "s3"),
	} {
		env.Observation = &events.Observation{Role: events.RoleUser, Text: "not u1's"}
		if _, _, err := src.Apply(ctx, env); err != nil {
			t.Fatal(err)
		}
	}

	keys, err := src.UserKeys(ctx, "acme", "u1")
	if err != nil {
		t.Fatal(err)
	}
	want := []events.SessionKV{
		{Kind: events.SessionKVReflected, SessionID: "s1"},
		{Kind: events.SessionKVState, SessionID: "s1"},
		{Kind: events.SessionKVSummary, SessionID: "s1"},
		{Kind: events.SessionKVTurn, SessionID: "s1", TurnID: "t1"},
	}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("UserKeys = %+v, want %+v", keys, want)
	}
	if users, err := src.Users(ctx, "acme"); err != nil || !slices.Equal(users, []string{"u1", "u2"}) {
		t.Fatalf("Users(acme) = %v, %v", users, err)
	}

	dst := newStore(t, session.Config{})
	for range 2 {
		for _, k := range keys {
			v, err := src.ReadValue(ctx, "acme", "u1", k)
			if err != nil {
				t.Fatal(err)
			}
			k.Value = v
			if err := dst.Load(ctx, "gamma", "v1", k); err != nil {
				t.Fatalf("Load %+v: %v", k, err)
			}
		}
	}
	if got, err := dst.UserKeys(ctx, "gamma", "v1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded keys = %+v, %v; want %+v", got, err, want)
	}
	st, err := dst.Get(ctx, "gamma", "v1", "s1")
	if err != nil || st.Tenant != "gamma" || st.UserID != "v1" || st.SessionID != "s1" || st.Messages != 1 || st.Turns != 1 {
		t.Fatalf("loaded state = %+v, %v", st, err)
	}
	if tr, err := dst.GetTurn(ctx, "gamma.v1.s1", "t1"); err != nil || tr.SessionKey != "gamma.v1.s1" || tr.Plan != "p" {
		t.Fatalf("loaded turn = %+v, %v", tr, err)
	}
	if sum, _, err := dst.GetSummary(ctx, "gamma", "v1", "s1"); err != nil || sum.Text != "sum" {
		t.Fatalf("loaded summary = %+v, %v", sum, err)
	}
	if ok, _ := dst.ClaimReflection(ctx, "gamma", "v1", "s1", 1); ok {
		t.Fatal("the loaded reflection claim was claimed again")
	}
	if recent, err := dst.RecentSessions(ctx, "gamma", "v1"); err != nil || len(recent) != 1 || recent[0].SessionID != "s1" || !recent[0].StartedTS.Equal(t0) {
		t.Fatalf("recent sessions after Load = %+v, %v", recent, err)
	}
	if users, err := dst.Users(ctx, "gamma"); err != nil || !slices.Equal(users, []string{"v1"}) {
		t.Fatalf("Users(gamma) = %v, %v", users, err)
	}

	if _, err := src.ReadValue(ctx, "acme", "u1", events.SessionKV{Kind: events.SessionKVTurn, SessionID: "s1", TurnID: "gone"}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("ReadValue of a missing turn: %v", err)
	}
	if err := dst.Load(ctx, "gamma", "v1", events.SessionKV{Kind: events.SessionKVState, SessionID: "s9", Value: []byte(`"not a state"`)}); err == nil {
		t.Fatal("Load of a state that is not one: no error")
	}
	if err := dst.Load(ctx, "gamma", "v1", events.SessionKV{Kind: events.SessionKVTurn, SessionID: "s9", TurnID: "t9", Value: []byte(`{"status":"no such status"}`)}); err == nil {
		t.Fatal("Load of an invalid turn: no error")
	}
}

// A failed reflection gives its claim back, so that a redelivery runs it;
// once a later one is claimed, the release of an earlier one does nothing.
func TestReleaseReflection(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, session.Config{})
	claim := func(n int) bool {
		t.Helper()
		ok, err := s.ClaimReflection(ctx, "acme", "u1", "s1", n)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim(1) {
		t.Fatal("reflection 1 not claimed")
	}
	if err := s.ReleaseReflection(ctx, "acme", "u1", "s1", 1); err != nil {
		t.Fatal(err)
	}
	if !claim(1) {
		t.Fatal("reflection 1 not claimed again after its release")
	}
	if !claim(2) {
		t.Fatal("reflection 2 not claimed")
	}
	if err := s.ReleaseReflection(ctx, "acme", "u1", "s1", 1); err != nil {
		t.Fatal(err)
	}
	if claim(2) || claim(1) {
		t.Fatal("releasing reflection 1 after 2 was claimed gave a claim back")
	}
}
