package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/transfer"
)

// TestMain runs the properties of this package, each check of which drives
// whole stacks, 10 times unless -rapid.checks says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", "10")
	}
	os.Exit(m.Run())
}

var tenantSeq atomic.Int64

// freshTenant is a tenant no earlier check used, so that every check starts
// from empty namespaces on long-lived stacks.
func freshTenant() string { return fmt.Sprintf("t%d", tenantSeq.Add(1)) }

var words = []string{"sales", "csv", "columns", "chart", "budget", "finance", "report", "quarterly", "python", "pandas", "berlin", "coffee", "deadline", "invoice"}

func sentence(t *rapid.T, label string) string {
	ws := rapid.SliceOfN(rapid.SampledFrom(words), 3, 7).Draw(t, label)
	return strings.ToUpper(ws[0][:1]) + ws[0][1:] + " " + strings.Join(ws[1:], " ") + "."
}

// populate writes random memory for users of cl's tenant through every kind
// of write: Markdown appends, mem0 adds, memory items, policy overrides and
// observed sessions that the extractor turns into memory.
func populate(t *rapid.T, ctx context.Context, stack *app.Stack, cl *client.Client, users []string) {
	n := rapid.IntRange(1, 8).Draw(t, "ops")
	for i := range n {
		user := rapid.SampledFrom(users).Draw(t, "user")
		var err error
		switch op := rapid.IntRange(0, 5).Draw(t, "op"); op {
		case 0, 1:
			slot := []events.Slot{events.SlotLongTerm, events.SlotToday}[op]
			_, err = cl.Append(ctx, events.AppendRequest{UserID: user, Content: sentence(t, "text"), Slot: slot})
		case 2:
			mt := rapid.SampledFrom([]events.MemoryType{events.MemoryEpisodic, events.MemorySemantic}).Draw(t, "type")
			_, err = cl.Add(ctx, events.AddRequest{UserID: user, Text: sentence(t, "text"), MemoryType: mt})
		case 3:
			_, err = cl.SaveItem(ctx, events.ItemRequest{UserID: user, Item: events.MemoryItem{
				Scope: events.ScopeUser, Kind: events.ItemFact, Key: fmt.Sprintf("k%d", i), Content: sentence(t, "text"), Confidence: 0.8,
			}})
		case 4:
			_, err = cl.SetPolicy(ctx, events.PolicySetRequest{UserID: user, Values: map[string]json.RawMessage{
				"retrieve_limit": json.RawMessage(fmt.Sprint(rapid.IntRange(3, 20).Draw(t, "limit"))),
			}})
		case 5:
			session := fmt.Sprintf("s%d", i)
			for j := range rapid.IntRange(1, 3).Draw(t, "messages") {
				role := []events.Role{events.RoleUser, events.RoleAssistant}[j%2]
				if _, err = cl.Say(ctx, user, session, role, "I prefer "+sentence(t, "text"), nil); err != nil {
					break
				}
			}
			if err == nil {
				_, err = cl.EndSession(ctx, user, session)
			}
		}
		if err != nil {
			t.Fatalf("op on %s: %v", user, err)
		}
	}
	if err := app.WaitIdle(ctx, stack.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// content is what an archive holds, by user, for comparing two archives.
type content struct {
	Files    map[string]map[string]string
	Records  map[string][]events.Record
	Sessions map[string][]events.SessionKV
}

func readContent(t testing.TB, data []byte) (transfer.Manifest, content) {
	t.Helper()
	c := content{Files: map[string]map[string]string{}, Records: map[string][]events.Record{}, Sessions: map[string][]events.SessionKV{}}
	m, err := transfer.Read(bytes.NewReader(data), func(e transfer.Entry) error {
		switch {
		case e.File != nil:
			if c.Files[e.User] == nil {
				c.Files[e.User] = map[string]string{}
			}
			c.Files[e.User][e.File.Name] = string(e.File.Data)
		case e.Record != nil:
			c.Records[e.User] = append(c.Records[e.User], *e.Record)
		default:
			c.Sessions[e.User] = append(c.Sessions[e.User], *e.Session)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// vectorsApart compares the vectors of two record lists (same ids in the same
// order), then drops them so that the rest compares with reflect.DeepEqual:
// the embedded store keeps vectors normalised, and normalising an imported
// vector again may move its last bit.
func vectorsApart(a, b map[string][]events.Record) string {
	for user, ra := range a {
		rb := b[user]
		if len(ra) != len(rb) {
			return fmt.Sprintf("user %s: %d records vs %d", user, len(ra), len(rb))
		}
		for i := range ra {
			if len(ra[i].Vector) != len(rb[i].Vector) {
				return fmt.Sprintf("record %s: %d dimensions vs %d", ra[i].ID, len(ra[i].Vector), len(rb[i].Vector))
			}
			for j := range ra[i].Vector {
				if math.Abs(float64(ra[i].Vector[j]-rb[i].Vector[j])) > 1e-6 {
					return fmt.Sprintf("record %s: vector[%d] %v vs %v", ra[i].ID, j, ra[i].Vector[j], rb[i].Vector[j])
				}
			}
			ra[i].Vector, rb[i].Vector = nil, nil
		}
	}
	return ""
}

func export(t testing.TB, ctx context.Context, cl *client.Client, user string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := transfer.Export(ctx, cl, user, &buf, io.Discard); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func importArchive(t testing.TB, ctx context.Context, cl *client.Client, data []byte, progress io.Writer) transfer.ImportReport {
	t.Helper()
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	m, err := transfer.Check(open)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := transfer.Import(ctx, cl, m, open, 64<<10, progress)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// hit is a search result as compared between deployments.
type hit struct {
	ID, Text string
	Type     events.MemoryType
	Score    string
}

func searches(t testing.TB, ctx context.Context, cl *client.Client, users []string) map[string][]hit {
	t.Helper()
	out := map[string][]hit{}
	for _, u := range users {
		for _, q := range words[:6] {
			rep, err := cl.Search(ctx, events.SearchRequest{UserID: u, Query: q, Limit: 20})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				out[u+"/"+q] = append(out[u+"/"+q], hit{r.ID, r.Text, r.MemoryType, fmt.Sprintf("%.6f", r.Score)})
			}
		}
	}
	return out
}

// Export → import into another deployment (its own data directory, a tenant it
// never saw) → the same archive, search results and topic files, for random
// namespaces; importing twice changes nothing.
func TestPropertyExportImportRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, _ := apptest.Up(t)
	dst, _ := apptest.Up(t)
	rapid.Check(t, func(rt *rapid.T) {
		tenant := freshTenant()
		users := []string{"u1", "u2"}
		from, to := apptest.Client(t, src, tenant), apptest.Client(t, dst, tenant)
		populate(rt, ctx, src, from, users)
		archive := export(t, ctx, from, "")
		m, want := readContent(t, archive)
		rep := importArchive(t, ctx, to, archive, io.Discard)
		if rep.Reembedded || rep.Written.Records != m.Totals().Records || rep.Written.Sessions != m.Totals().Sessions {
			rt.Fatalf("import = %+v, manifest %+v", rep, m.Totals())
		}
		importArchive(t, ctx, to, archive, io.Discard)
		_, got := readContent(t, export(t, ctx, to, ""))
		if d := vectorsApart(got.Records, want.Records); d != "" {
			rt.Fatalf("re-exported vectors differ: %s", d)
		}
		for _, part := range []struct {
			name      string
			got, want any
		}{{"files", got.Files, want.Files}, {"records", got.Records, want.Records}, {"sessions", got.Sessions, want.Sessions}} {
			if !reflect.DeepEqual(part.got, part.want) {
				rt.Fatalf("re-exported %s differ:\n got %v\nwant %v", part.name, part.got, part.want)
			}
		}
		if a, b := searches(t, ctx, from, users), searches(t, ctx, to, users); !reflect.DeepEqual(a, b) {
			rt.Fatalf("search differs:\nsource %v\nimport %v", a, b)
		}
		for _, u := range users {
			for _, topic := range events.Topics {
				a, errA := from.ReadTopic(ctx, events.TopicRequest{UserID: u, Topic: topic})
				b, errB := to.ReadTopic(ctx, events.TopicRequest{UserID: u, Topic: topic})
				if errA != nil || errB != nil || a != b {
					rt.Fatalf("topic %s of %s: %+v (%v) vs %+v (%v)", topic, u, a, errA, b, errB)
				}
			}
		}
	})
}

// A deployment whose embedder has other dimensions embeds the records again,
// says so, and stores vectors of its own dimensions; into another tenant.
func TestImportReembedsForAnotherEmbedder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, _ := apptest.Up(t)
	dst, _ := apptest.Up(t, "AGENTMEM_EMBED_DIMENSIONS=128")
	from := apptest.Client(t, src, "acme")
	for _, text := range []string{"The quarterly budget report is due Friday.", "Coffee with the finance team in Berlin."} {
		if _, err := from.Add(ctx, events.AddRequest{UserID: "u1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	archive := export(t, ctx, from, "u1")
	to := apptest.Client(t, dst, "other")
	var progress bytes.Buffer
	rep := importArchive(t, ctx, to, archive, &progress)
	if !rep.Reembedded || rep.Target.Dimensions != 128 || rep.Written.Records != 2 {
		t.Fatalf("import = %+v", rep)
	}
	if !strings.Contains(progress.String(), "re-embedding 2 records") || !strings.Contains(progress.String(), "128 dimensions") {
		t.Fatalf("progress does not say it re-embeds: %q", progress.String())
	}
	m, got := readContent(t, export(t, ctx, to, "u1"))
	if m.Embedder.Dimensions != 128 || m.Tenant != "other" || len(got.Records["u1"]) != 2 {
		t.Fatalf("re-exported: %+v, %d records", m, len(got.Records["u1"]))
	}
	for _, r := range got.Records["u1"] {
		if len(r.Vector) != 128 {
			t.Fatalf("record %s has %d dimensions after import", r.ID, len(r.Vector))
		}
	}
	res, err := to.Search(ctx, events.SearchRequest{UserID: "u1", Query: "budget report"})
	if err != nil || len(res.Results) == 0 || !strings.Contains(res.Results[0].Text, "budget") {
		t.Fatalf("search after re-embedding = %+v, %v", res, err)
	}
}

// userTraces lists what the endpoints and the stream still hold of user.
func userTraces(t testing.TB, ctx context.Context, cl *client.Client, user string) []string {
	t.Helper()
	var left []string
	note := func(format string, args ...any) { left = append(left, fmt.Sprintf(format, args...)) }
	info, err := cl.Export(ctx, events.ExportRequest{Part: events.ExportInfo})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(info.Users, user) {
		note("listed among the users")
	}
	for _, part := range []events.ExportPart{events.ExportFiles, events.ExportRecords, events.ExportSessions} {
		rep, err := cl.Export(ctx, events.ExportRequest{UserID: user, Part: part})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rep.Files) + len(rep.Records) + len(rep.Sessions); n > 0 {
			note("%d %s", n, part)
		}
	}
	for _, q := range words {
		rep, err := cl.Search(ctx, events.SearchRequest{UserID: user, Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) > 0 {
			note("search %q: %d results", q, len(rep.Results))
		}
	}
	pack, err := cl.Context(ctx, events.ContextRequest{UserID: user, Query: strings.Join(words, " ")})
	if err != nil {
		t.Fatal(err)
	}
	if pack.Core != nil || len(pack.Topics)+len(pack.Chunks) > 0 || len(pack.DailyNotes) > 0 || len(pack.EpisodicItems)+len(pack.SemanticItems)+len(pack.UserProfile) > 0 {
		note("context pack: %+v", pack)
	}
	items, err := cl.ListItems(ctx, events.ItemScopeRequest{UserID: user, Scope: events.ScopeUser})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Items) > 0 {
		note("%d items", len(items.Items))
	}
	backups, err := cl.Backups(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(backups.Backups) > 0 {
		note("%d backups", len(backups.Backups))
	}
	hist, err := cl.PolicyHistory(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Snapshots) > 0 {
		note("%d policy snapshots", len(hist.Snapshots))
	}
	n, err := cl.CountEvents(ctx, events.EventsQuery{UserID: user})
	if err != nil {
		t.Fatal(err)
	}
	if n.Count > 0 {
		note("%d events", n.Count)
	}
	return left
}

// Forget, over random operations of three users: afterwards no endpoint and
// not the stream holds anything of the user, the tenant's stream (what a replay
// reads) has none of their events, and the other users' memory and events are
// as they were.
func TestPropertyForgetErasesOnlyTheUser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stack, _ := apptest.Up(t)
	rapid.Check(t, func(rt *rapid.T) {
		tenant := freshTenant()
		users := []string{"u1", "u2", "u3"}
		cl := apptest.Client(t, stack, tenant)
		populate(rt, ctx, stack, cl, users)
		victim := rapid.SampledFrom(users).Draw(rt, "victim")
		others := map[string][]byte{}
		counts := map[string]int{}
		for _, u := range users {
			if u == victim {
				continue
			}
			others[u] = export(t, ctx, cl, u)
			n, err := cl.CountEvents(ctx, events.EventsQuery{UserID: u})
			if err != nil {
				rt.Fatal(err)
			}
			counts[u] = n.Count
		}
		before, err := cl.CountEvents(ctx, events.EventsQuery{UserID: victim})
		if err != nil {
			rt.Fatal(err)
		}
		_, had := readContent(t, export(t, ctx, cl, victim))
		removed, err := cl.Forget(ctx, victim)
		if err != nil {
			rt.Fatal(err)
		}
		if removed.Events != before.Count {
			rt.Fatalf("forget removed %d events, the user had %d", removed.Events, before.Count)
		}
		left := userTraces(t, ctx, cl, victim)
		for _, r := range had.Records[victim] {
			if m, err := cl.Get(ctx, events.GetRequest{UserID: victim, ID: r.ID}); !errors.Is(err, client.ErrNotFound) {
				left = append(left, fmt.Sprintf("get %s: %+v, %v", r.ID, m, err))
			}
			if h, err := cl.History(ctx, events.HistoryRequest{UserID: victim, ID: r.ID}); err == nil && len(h.Changes) > 0 {
				left = append(left, fmt.Sprintf("history of %s: %d changes", r.ID, len(h.Changes)))
			}
		}
		for _, kv := range had.Sessions[victim] {
			if rep, err := cl.SessionSummary(ctx, events.SessionRequest{UserID: victim, SessionID: kv.SessionID}); !errors.Is(err, client.ErrNotFound) {
				left = append(left, fmt.Sprintf("session %s: %+v, %v", kv.SessionID, rep, err))
			}
		}
		if len(left) > 0 {
			rt.Fatalf("after forget (%+v), the user still has: %v", removed, left)
		}
		err = stack.Runtime().Events.Scan(ctx, eventstore.Query{Tenant: tenant}, func(st eventstore.Stored) (bool, error) {
			if st.Envelope.UserID == victim {
				return false, fmt.Errorf("event %s of the forgotten user is in the stream", st.Envelope.ID)
			}
			return true, nil
		})
		if err != nil {
			rt.Fatal(err)
		}
		for u, want := range others {
			_, a := readContent(t, want)
			_, b := readContent(t, export(t, ctx, cl, u))
			if !reflect.DeepEqual(a, b) {
				rt.Fatalf("user %s changed by the forget of %s", u, victim)
			}
			n, err := cl.CountEvents(ctx, events.EventsQuery{UserID: u})
			if err != nil || n.Count != counts[u] {
				rt.Fatalf("user %s has %d events after, %d before (%v)", u, n.Count, counts[u], err)
			}
		}
		again, err := cl.Forget(ctx, victim)
		if err != nil || again.Total() != 0 {
			rt.Fatalf("second forget = %+v, %v", again, err)
		}
	})
}

// An archive imported under another tenant of the deployment it came from sits
// beside its source: record ids are derived anew for the new tenant (an item's
// as the item endpoints derive it), twice is once, and the source is untouched.
func TestImportBesideTheSourceUnderAnotherTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, _ := apptest.Up(t)
	src := apptest.Client(t, stack, "acme")
	for _, text := range []string{"The quarterly budget report is due Friday.", "Coffee with the finance team in Berlin."} {
		if _, err := src.Add(ctx, events.AddRequest{UserID: "u1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	item := events.MemoryItem{Scope: events.ScopeUser, Kind: events.ItemPreference, Key: "charts", Content: "Prefers bar charts.", Confidence: 0.9}
	if _, err := src.SaveItem(ctx, events.ItemRequest{UserID: "u1", Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Say(ctx, "u1", "s1", events.RoleUser, "Remember: invoices go to finance.", nil); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	archive := export(t, ctx, src, "")
	_, before := readContent(t, archive)

	cp := apptest.Client(t, stack, "acme_copy")
	importArchive(t, ctx, cp, archive, io.Discard)
	importArchive(t, ctx, cp, archive, io.Discard)
	m, copied := readContent(t, export(t, ctx, cp, ""))
	if m.Tenant != "acme_copy" || len(copied.Records["u1"]) != len(before.Records["u1"]) || !reflect.DeepEqual(copied.Files, before.Files) || len(copied.Sessions["u1"]) != 1 {
		t.Fatalf("copy: %+v, %d records (source %d), files equal %v", m, len(copied.Records["u1"]), len(before.Records["u1"]), reflect.DeepEqual(copied.Files, before.Files))
	}
	for _, r := range copied.Records["u1"] {
		if slices.ContainsFunc(before.Records["u1"], func(s events.Record) bool { return s.ID == r.ID }) {
			t.Fatalf("record %s has the same id in both tenants", r.ID)
		}
	}
	got, err := cp.GetItem(ctx, events.ItemKeyRequest{UserID: "u1", Scope: item.Scope, Kind: item.Kind, Key: item.Key})
	if err != nil || got.Content != item.Content {
		t.Fatalf("item of the copy = %+v, %v", got, err)
	}
	texts := func(cl *client.Client) []string {
		var out []string
		for _, q := range []string{"budget report", "finance Berlin"} {
			rep, err := cl.Search(ctx, events.SearchRequest{UserID: "u1", Query: q})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				out = append(out, r.Text)
			}
		}
		return out
	}
	if a, b := texts(src), texts(cp); len(a) == 0 || !reflect.DeepEqual(a, b) {
		t.Fatalf("search: source %q, copy %q", a, b)
	}
	if _, after := readContent(t, export(t, ctx, src, "")); !reflect.DeepEqual(after, before) {
		t.Fatal("the source changed")
	}
}

// Pages stay within the budget: a file larger than a page comes in chunks that
// put it back together, records and session values are spread over pages, and
// an import in small requests writes the same file back.
func TestPagesFitTheBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	cl := apptest.Client(t, stack, "acme")
	var big strings.Builder
	for i := 0; big.Len() < 50<<10; i++ {
		fmt.Fprintf(&big, "- fact %d: the %s is %s\n", i, words[i%len(words)], words[(i*7)%len(words)])
	}
	ns := docstore.Namespace{Tenant: "acme", User: "u1"}
	if err := rt.Docs.PutFile(ctx, ns, docstore.MemoryFile, 0, []byte(big.String())); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := cl.Add(ctx, events.AddRequest{UserID: "u1", Text: fmt.Sprintf("Memory %d about the %s.", i, words[i%len(words)])}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := cl.Say(ctx, "u1", fmt.Sprintf("s%d", i), events.RoleUser, "hello", nil); err != nil {
			t.Fatal(err)
		}
	}
	apptest.WaitIdle(t, stack)
	const budget = 4096
	svc, err := transfer.New(transfer.Config{PageBytes: budget, PageRecords: 50},
		transfer.Deps{JS: rt.JS, Docs: rt.Docs, Vectors: rt.Vectors, Embedder: rt.Embedder, Sessions: rt.Sessions, Events: rt.Events}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		file           []byte
		records, pages int
		sessions       int
	)
	for _, part := range []events.ExportPart{events.ExportFiles, events.ExportRecords, events.ExportSessions} {
		for cursor := ""; ; {
			rep, err := svc.Export(ctx, "acme", events.ExportRequest{UserID: "u1", Part: part, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(rep)
			if len(data) > budget+256 {
				t.Fatalf("%s page of %d bytes, budget %d", part, len(data), budget)
			}
			pages++
			for _, f := range rep.Files {
				if f.Name == docstore.MemoryFile {
					if f.Offset != len(file) {
						t.Fatalf("chunk at %d after %d bytes", f.Offset, len(file))
					}
					file = append(file, f.Data...)
				}
			}
			records += len(rep.Records)
			sessions += len(rep.Sessions)
			if rep.Next == "" {
				break
			}
			cursor = rep.Next
		}
	}
	if string(file) != big.String() || records != 40 || sessions != 3 || pages < 20 {
		t.Fatalf("%d pages: file %d bytes of %d, %d records, %d sessions", pages, len(file), big.Len(), records, sessions)
	}
	if _, err := svc.Export(ctx, "acme", events.ExportRequest{UserID: "u1", Part: events.ExportFiles, Cursor: "no-offset"}); !errors.Is(err, events.ErrInvalidRequest) {
		t.Fatalf("bad cursor: %v", err)
	}

	archive := export(t, ctx, cl, "u1")
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive)), nil }
	m, err := transfer.Check(open)
	if err != nil {
		t.Fatal(err)
	}
	other := apptest.Client(t, stack, "other")
	rep, err := transfer.Import(ctx, other, m, open, 8192, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Docs.ReadFile(ctx, docstore.Namespace{Tenant: "other", User: "u1"}, docstore.MemoryFile)
	if err != nil || string(got) != big.String() || rep.Written.Files < 8 {
		t.Fatalf("imported MEMORY.md: %d bytes of %d in %d chunks, %v", len(got), big.Len(), rep.Written.Files, err)
	}
}

// A page whose vectors are of another embedder (an import write event applied
// again by a rebuild on a deployment with another embedder) is embedded again,
// deterministically; one whose vectors are of this embedder keeps them.
func TestImportReembedsVectorsOfAnotherEmbedder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	svc, err := transfer.New(transfer.Config{}, transfer.Deps{JS: rt.JS, Docs: rt.Docs, Vectors: rt.Vectors, Embedder: rt.Embedder, Sessions: rt.Sessions, Events: rt.Events}, nil)
	if err != nil {
		t.Fatal(err)
	}
	own := svc.EmbedderInfo()
	text := "The quarterly budget report is due Friday."
	want, err := rt.Embedder.Embed(ctx, []string{text})
	if err != nil {
		t.Fatal(err)
	}
	stale := make([]float32, own.Dimensions)
	stale[0] = 1
	for _, c := range []struct {
		embedder events.EmbedderInfo
		want     []float32
	}{
		{events.EmbedderInfo{Model: own.Model + "-other", Dimensions: own.Dimensions}, want[0]},
		{own, stale},
	} {
		req := events.ImportRequest{UserID: "u1", Embedder: &c.embedder, Records: []events.Record{{ID: "6f1c2c57-9d36-4b4e-8f0e-2d7c1e5a9b10", MemoryType: events.MemorySemantic, Text: text, Vector: stale}}}
		if _, err := svc.Import(ctx, "acme", req); err != nil {
			t.Fatal(err)
		}
		rep, err := svc.Export(ctx, "acme", events.ExportRequest{UserID: "u1", Part: events.ExportRecords})
		if err != nil || len(rep.Records) != 1 {
			t.Fatalf("export = %+v, %v", rep, err)
		}
		if !slices.Equal(rep.Records[0].Vector, c.want) {
			t.Fatalf("vectors of %+v: stored %v…, want %v…", c.embedder, rep.Records[0].Vector[:4], c.want[:4])
		}
	}
}

// An import page that fits max_payload but whose write event (the page and
// the envelope around it) would not is refused 400, saying so, and writes
// nothing; the pages the client cuts leave room for the envelope.
func TestImportPageTooLargeToRecordIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	req := events.ImportRequest{UserID: "u1", Files: []events.FileChunk{{Name: "user_prefs.md"}}}
	empty, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// Base64 makes 4 bytes of 3: the request ends 32 bytes under max_payload.
	req.Files[0].Data = bytes.Repeat([]byte("x"), (int(rt.Conn.MaxPayload())-len(empty)-32)*3/4)
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.RPCSubject("acme", events.EndpointImport)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := rt.Conn.RequestWithContext(ctx, subject, data)
	if err != nil {
		t.Fatal(err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != events.RPCCodeBadRequest || !strings.Contains(msg.Header.Get("Nats-Service-Error"), "too large to record") {
		t.Fatalf("a %d-byte page: %s %q", len(data), code, msg.Header.Get("Nats-Service-Error"))
	}
	if _, err := rt.Docs.ReadFile(ctx, docstore.Namespace{Tenant: "acme", User: "u1"}, "user_prefs.md"); !errors.Is(err, docstore.ErrNotFound) {
		t.Fatalf("the refused page was written: %v", err)
	}
}
