package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/replay"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Issues 28.4, 28.5 and 30.7 through the whole stack: each class of event that
// ingest dead-letters carries a canary token in a "Remember:" message of a
// session that also holds a real fact. Each is dead-lettered once, by ingest,
// with its reason; the real fact becomes memory; the canary appears nowhere
// afterwards: not in Markdown, memories or facts (the vector store), the data
// directory outside the event and dead-letter streams, a context pack, a search,
// the events a client lists, a replay of the tenant or the users an export lists.
func TestWhatIngestDeadLettersNeverBecomesMemory(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	js := r.stack.Runtime().JS
	publish := func(subject string, env events.Envelope) { r.publishOn(t, subject, env) }
	say := func(tenant, user, session, text string) events.Envelope {
		env := events.New(events.TypeObservation, tenant, user, "bot", session)
		env.Observation = &events.Observation{Role: events.RoleUser, Text: text}
		return env
	}
	remember := func(canary string) string { return "Remember: my vault code is " + canary + "." }

	// The real facts, first in the stream: they own their ids.
	real1 := say("acme", "u1", "s1", "Remember: my sales files have columns date, product and qty.")
	publish("mem.acme.obs.u1.s1", real1)
	real2 := say("acme", "u2", "s9", "Remember: I prefer bar charts with a dark theme.")
	publish("mem.acme.obs.u2.s9", real2)

	type class struct {
		canary, subject string
		env             events.Envelope
		reason          string // the dead letter's reason starts with it
	}
	reused := func(canary, user, session string) events.Envelope {
		env := say("acme", user, session, remember(canary))
		env.ID = real1.ID
		return env
	}
	ahead := say("acme", "u1", "s1", remember("zqAHEADCLOCK"))
	ahead.TS = time.Now().UTC().Add(72 * time.Hour)
	early := say("acme", "u1", "s1", remember("zqBEFOREEPOCH"))
	early.TS = time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)
	classes := []class{
		{"zqTENANTMISMATCH", "mem.acme.obs.u1.s1", say("evil", "u1", "s1", remember("zqTENANTMISMATCH")),
			`invalid event: received on "mem.acme.obs.u1.s1", but its type and ids belong on "mem.evil.obs.u1.s1"`},
		{"zqUSERMISMATCH", "mem.acme.obs.u1.s1", say("acme", "u2", "s1", remember("zqUSERMISMATCH")),
			`invalid event: received on "mem.acme.obs.u1.s1", but its type and ids belong on "mem.acme.obs.u2.s1"`},
		{"zqSAMESESSIONID", "mem.acme.obs.u1.s1", reused("zqSAMESESSIONID", "u1", "s1"), "invalid event: event id reused with other content: id " + real1.ID},
		{"zqOTHERSESSIONID", "mem.acme.obs.u1.s2", reused("zqOTHERSESSIONID", "u1", "s2"), "invalid event: event id reused with other content: id " + real1.ID},
		{"zqOTHERUSERID", "mem.acme.obs.u2.s3", reused("zqOTHERUSERID", "u2", "s3"), "invalid event: event id reused with other content: id " + real1.ID},
		{"zqAHEADCLOCK", "mem.acme.obs.u1.s1", ahead, "invalid event: ts outside the accepted window: ts " + ahead.TS.Format(time.RFC3339) + " is 72h0m0s after the stream stored"},
		{"zqBEFOREEPOCH", "mem.acme.obs.u1.s1", early, "invalid event: ts outside the accepted window: ts 1969-07-20T20:17:00Z is before 1970-01-01"},
		{"zqWILDCARDUSER", "mem.acme.obs.*.s1", say("acme", "u1", "s1", remember("zqWILDCARDUSER")),
			`invalid event: "mem.acme.obs.*.s1": invalid subject: invalid id: user "*" has character '*' at position 0`},
	}
	for _, c := range classes {
		publish(c.subject, c.env)
	}
	// Valid, but with NUL and a right-to-left override: remembered without them.
	r.say(t, "u1", "s1", events.RoleUser, "Remember: my desk is in room 4\u202e12\x00B.")
	for _, s := range [][2]string{{"u1", "s1"}, {"u1", "s2"}, {"u2", "s3"}, {"u2", "s9"}} {
		if _, err := r.client.EndSession(ctx, s[0], s[1]); err != nil {
			t.Fatal(err)
		}
	}
	r.waitIdle(t)

	dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		var got []string
		for _, dl := range dls {
			if strings.Contains(string(dl.Data), c.canary) {
				got = append(got, dl.Worker+": "+dl.Reason)
				if dl.Worker != bus.WorkerIngest || !strings.HasPrefix(dl.Reason, c.reason) {
					t.Errorf("%s: dead letter by %s with reason %q, want ingest and %q", c.canary, dl.Worker, dl.Reason, c.reason)
				}
			}
		}
		if len(got) != 1 {
			t.Errorf("%s: %d dead letters, want exactly one: %q", c.canary, len(got), got)
		}
	}

	// The real facts are memory.
	for user, fact := range map[string]string{"u1": "columns date, product", "u2": "bar charts"} {
		if md := r.markdownOf(t, "acme", user); !strings.Contains(md, fact) {
			t.Errorf("%s's Markdown lacks its real fact %q:\n%s", user, fact, md)
		}
	}

	if md := r.markdownOf(t, "acme", "u1"); !strings.Contains(md, "room 412B") || strings.ContainsAny(md, "\x00\u202e") {
		t.Errorf("u1's Markdown lacks the desk fact without its controls, or holds them:\n%q", md)
	}
	leaks := func(where string, data []byte) {
		t.Helper()
		for _, c := range classes {
			if bytes.Contains(data, []byte(c.canary)) {
				t.Errorf("%s holds canary %s", where, c.canary)
			}
		}
	}
	// Files: Markdown, the vector store, the KV buckets. Only the event stream
	// (the raw record) and the dead-letter stream hold the events.
	err = filepath.WalkDir(r.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if slices.ContainsFunc(strings.Split(path, string(filepath.Separator)), func(elem string) bool {
			return elem == bus.DefaultStream || elem == bus.DefaultDLQStream
		}) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err == nil {
			leaks(path, data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"u1", "u2"} {
		recs, _, err := r.stack.Runtime().Vectors.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: user, IncludeExpired: true}, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(recs)
		leaks(user+"'s memories", data)
		for _, session := range []string{"s1", "s2", "s3", "s9", "s10"} {
			pack, err := r.client.Context(ctx, events.ContextRequest{UserID: user, SessionID: session, Query: "what is my vault code?"})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(pack)
			leaks(user+"'s context pack in "+session, data)
		}
		res, err := r.client.Search(ctx, events.SearchRequest{UserID: user, Query: "vault code"})
		if err != nil {
			t.Fatal(err)
		}
		data, _ = json.Marshal(res)
		leaks(user+"'s search", data)
		evs, err := r.client.Events(ctx, events.EventsQuery{UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		data, _ = json.Marshal(evs)
		leaks(user+"'s events", data)
	}
	info, err := r.client.Export(ctx, events.ExportRequest{Part: events.ExportInfo})
	if err != nil || !slices.Equal(info.Users, []string{"u1", "u2"}) || !slices.Equal(info.SkippedUsers, []string{"*"}) {
		t.Errorf("export info: users %q, skipped %q (%v); want [u1 u2], the invalid name [*] skipped", info.Users, info.SkippedUsers, err)
	}

	// Forget drops the claims of the user's events, and only theirs.
	if _, err := r.client.Forget(ctx, "u2"); err != nil {
		t.Fatal(err)
	}
	claims, err := js.KeyValue(ctx, eventstore.ClaimsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Get(ctx, "acme."+real2.ID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("claim of forgotten u2's event: %v, want none", err)
	}
	if _, err := claims.Get(ctx, "acme."+real1.ID); err != nil {
		t.Errorf("claim of u1's event after u2's forget: %v", err)
	}

	// A replay reads the live stream as the workers did.
	m, err := replay.Run(ctx, replay.Config{Root: filepath.Join(r.cfg.DataDir, "replays"), Name: "r1", Tenant: "acme",
		Environ: []string{"AGENTMEM_NATS_EMBEDDED_LISTEN="}}, r.stack.Runtime().Events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.EventsFed == 0 {
		t.Fatal("the replay fed nothing")
	}
	err = filepath.WalkDir(replay.Dir(filepath.Join(r.cfg.DataDir, "replays"), "acme", "r1"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil {
			leaks("replay "+path, data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// markdownOf is every Markdown file of the user's memory, concatenated.
func (r rig) markdownOf(t *testing.T, tenant, user string) string {
	t.Helper()
	var all strings.Builder
	err := filepath.WalkDir(filepath.Join(r.cfg.Memory.Dir, tenant, user), func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // no Markdown yet
		case err != nil || d.IsDir():
			return err
		}
		data, err := os.ReadFile(path)
		all.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all.String()
}

// Issue 28.5 as a property over sessions and users: whatever events reuse an
// id, in whichever sessions of whichever users, the id belongs to the first
// event in the stream that used it. Every memory holds only what the owners (and
// their exact republishes) said; each owner's statement is remembered; every
// other use of the id is dead-lettered, once, as a reused id.
func TestReusedEventIDNeverOverwritesAMemory(t *testing.T) {
	r := upStack(t)
	ctx := context.Background()
	js := r.stack.Runtime().JS
	words := []string{"amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"}
	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		tenant := fmt.Sprintf("p%d", iteration) // claims are per tenant: a fresh one per case
		cl := apptest.Client(t, r.stack, tenant)
		type sent struct {
			env     events.Envelope
			word    string
			subject string
		}
		var (
			all   []sent
			owner = map[string]sent{} // by id: the first use
		)
		n := rapid.IntRange(2, 6).Draw(rt, "events")
		for i := range n {
			var s sent
			if i > 0 && rapid.Bool().Draw(rt, "republish") {
				s = all[rapid.IntRange(0, i-1).Draw(rt, "of")] // the same event again: no conflict
			} else {
				user := rapid.SampledFrom([]string{"u1", "u2"}).Draw(rt, "user")
				session := rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "session")
				s.word = words[i]
				s.env = events.New(events.TypeObservation, tenant, user, "bot", session)
				s.env.ID = rapid.SampledFrom([]string{"idA", "idB"}).Draw(rt, "id")
				s.env.Observation = &events.Observation{Role: events.RoleUser, Text: "Remember: my project code name is " + s.word + "."}
				s.subject, _ = s.env.Subject()
			}
			r.publishOn(t, s.subject, s.env)
			all = append(all, s)
			if _, ok := owner[s.env.ID]; !ok {
				owner[s.env.ID] = s
			}
		}
		for _, user := range []string{"u1", "u2"} {
			for _, session := range []string{"s1", "s2"} {
				if _, err := cl.EndSession(ctx, user, session); err != nil {
					rt.Fatal(err)
				}
			}
		}
		r.waitIdle(t)

		owns := func(s sent) bool { o := owner[s.env.ID]; return o.word == s.word }
		remembered := map[string]string{} // everything of the tenant's memory, by user
		for _, user := range []string{"u1", "u2"} {
			recs, _, err := r.stack.Runtime().Vectors.Scroll(ctx, vectorstore.Filter{Tenant: tenant, UserID: user, IncludeExpired: true}, "", 1000)
			if err != nil {
				rt.Fatal(err)
			}
			data, _ := json.Marshal(recs)
			remembered[user] = string(data) + r.markdownOf(t, tenant, user)
		}
		dls, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, 1000)
		if err != nil {
			rt.Fatal(err)
		}
		sends := map[string]int{} // by word: a republish sends the same event again
		for _, s := range all {
			sends[s.word]++
		}
		for _, s := range all {
			var reasons []string
			for _, dl := range dls {
				if strings.Contains(string(dl.Data), "is "+s.word+".") && strings.HasPrefix(dl.Subject, "mem."+tenant+".") {
					reasons = append(reasons, dl.Reason)
				}
			}
			switch {
			case owns(s):
				if !strings.Contains(remembered[s.env.UserID], "is "+s.word+".") {
					rt.Fatalf("%s's statement %q (id %s, owner) is not remembered", s.subject, s.word, s.env.ID)
				}
				if len(reasons) != 0 {
					rt.Fatalf("the owner of %s (%s on %s) was dead-lettered: %q", s.env.ID, s.word, s.subject, reasons)
				}
			default:
				for user, mem := range remembered {
					if strings.Contains(mem, "is "+s.word+".") { // "ember" is in "remember"
						rt.Fatalf("%s's memory holds %q, sent on %s under id %s that %s on %s owns", user, s.word, s.subject, s.env.ID, owner[s.env.ID].word, owner[s.env.ID].subject)
					}
				}
				if len(reasons) != sends[s.word] || !strings.Contains(reasons[0], "event id reused with other content: id "+s.env.ID) {
					rt.Fatalf("%q sent %d times on %s under a reused id: dead letters %q, want one per send naming the reused id", s.word, sends[s.word], s.subject, reasons)
				}
			}
		}
	})
}

// publishOn publishes env's JSON on subject as `nats pub` would: on any subject,
// without a Nats-Msg-Id, so the stream keeps every publish of a reused id.
func (r rig) publishOn(t *testing.T, subject string, env events.Envelope) {
	t.Helper()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.stack.Runtime().JS.Publish(context.Background(), subject, data); err != nil {
		t.Fatal(err)
	}
}
