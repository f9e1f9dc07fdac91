package inspector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func (in *Inspector) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(files, "assets")
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/{$}", in.index)
	m.HandleFunc("GET /ui/t/{tenant}/{$}", in.tenant)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/{$}", in.user)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/file/{name...}", in.file)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/memories", in.memories)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/memory/{id}", in.memory)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/session/{session}", in.session)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/event/{session}/{id}", in.event)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/policy", in.policy)
	m.HandleFunc("POST /ui/t/{tenant}/u/{user}/policy/rollback", in.rollback)
	m.HandleFunc("GET /ui/t/{tenant}/u/{user}/search", in.search)
	m.HandleFunc("GET /ui/dlq", in.dlq)
	m.HandleFunc("GET /ui/dlq/{seq}/payload", in.payload)
	m.HandleFunc("POST /ui/dlq/replay", in.replay)
	m.HandleFunc("GET /ui/tail", in.tail)
	m.HandleFunc("GET /ui/tail/events", in.tailEvents)
	// POSTs change state: they must come from a page of the inspector itself
	// (same origin, and a form it rendered with its CSRF token).
	in.mux = http.NewServeMux()
	in.mux.Handle("/", http.NewCrossOriginProtection().Handler(in.checkCSRF(m)))
}

// page is what every template gets.
type page struct {
	Title  string
	Crumbs []crumb
	Flash  string
	Data   any
}

type crumb struct{ Name, URL string }

func (in *Inspector) render(w http.ResponseWriter, name string, p page) {
	t, ok := in.pages[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	var b strings.Builder
	if err := t.Execute(&b, p); err != nil {
		in.logger.Error("render", zap.String("page", name), zap.Error(err))
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(b.String()))
}

// fail answers an error as a plain-text page that says what went wrong.
func (in *Inspector) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadInput), errors.Is(err, client.ErrBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, client.ErrNotFound), errors.Is(err, docstore.ErrNotFound), errors.Is(err, jetstream.ErrMsgNotFound):
		code = http.StatusNotFound
	}
	if code == http.StatusInternalServerError {
		in.logger.Error("page failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	http.Error(w, err.Error(), code)
}

var errBadInput = errors.New("bad input")

// ns reads and validates the tenant and user of the path.
func ns(r *http.Request) (docstore.Namespace, error) {
	n := docstore.Namespace{Tenant: r.PathValue("tenant"), User: r.PathValue("user")}
	if err := events.ValidateID("tenant", n.Tenant); err != nil {
		return n, fmt.Errorf("%w: %w", errBadInput, err)
	}
	if n.User != "" || strings.Contains(r.URL.Path, "/u/") {
		if err := events.ValidateID("user", n.User); err != nil {
			return n, fmt.Errorf("%w: %w", errBadInput, err)
		}
	}
	return n, nil
}

func userURL(n docstore.Namespace) string {
	return "/ui/t/" + url.PathEscape(n.Tenant) + "/u/" + url.PathEscape(n.User) + "/"
}

func crumbs(n docstore.Namespace, more ...crumb) []crumb {
	c := []crumb{{"tenants", "/ui/"}, {n.Tenant, "/ui/t/" + url.PathEscape(n.Tenant) + "/"}}
	if n.User != "" {
		c = append(c, crumb{n.User, userURL(n)})
	}
	return append(c, more...)
}

// directory is every tenant and user with memory of any kind, and the sessions
// of each: tenants are those of the event stream's subjects
// (mem.<tenant>.obs|ended.<user>.<session>) and of the DocStore (a tenant
// brought in by import may have no events); users are those of the subjects, of
// the DocStore (append, MCP) and of the vector store. Names that are not valid
// ids (a raw publish on mem.acme.obs.*.s1) are never listed: they are kept in
// Invalid, for the page to say so.
type directory struct {
	Tenants map[string]map[string]map[string]uint64 // tenant → user → session → events
	Invalid []string
}

func (d *directory) add(tenant, user string) bool {
	for _, id := range [][2]string{{"tenant", tenant}, {"user", user}} {
		if id[1] == "" {
			continue
		}
		if err := events.ValidateID(id[0], id[1]); err != nil {
			d.Invalid = append(d.Invalid, err.Error())
			return false
		}
	}
	if d.Tenants[tenant] == nil {
		d.Tenants[tenant] = map[string]map[string]uint64{}
	}
	if user != "" && d.Tenants[tenant][user] == nil {
		d.Tenants[tenant][user] = map[string]uint64{}
	}
	return true
}

// directory lists tenant ("" for every tenant).
func (in *Inspector) directory(ctx context.Context, tenant string) (*directory, error) {
	st, err := in.deps.JS.Stream(ctx, in.cfg.EventStream)
	if err != nil {
		return nil, fmt.Errorf("event stream %s: %w", in.cfg.EventStream, err)
	}
	dir := &directory{Tenants: map[string]map[string]map[string]uint64{}}
	t := "*"
	if tenant != "" {
		t = tenant
		dir.add(tenant, "")
	}
	for _, kind := range []string{"obs", "ended"} {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("mem."+t+"."+kind+".*.*"))
		if err != nil {
			return nil, fmt.Errorf("event stream %s subjects: %w", in.cfg.EventStream, err)
		}
		for subject, n := range info.State.Subjects {
			p := strings.Split(subject, ".")
			if len(p) != 5 || !dir.add(p[1], p[3]) {
				continue
			}
			if events.ValidateID("session", p[4]) != nil {
				dir.Invalid = append(dir.Invalid, fmt.Sprintf("session %q on %s", p[4], subject))
				continue
			}
			dir.Tenants[p[1]][p[3]][p[4]] += n
		}
	}
	if tenant == "" {
		tenants, err := in.deps.Docs.Tenants(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tenants {
			dir.add(t, "")
		}
	}
	for t := range dir.Tenants {
		for _, users := range []func(context.Context, string) ([]string, error){in.deps.Docs.Users, in.deps.Vectors.Users} {
			list, err := users(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("users of %s: %w", t, err)
			}
			for _, u := range list {
				dir.add(t, u)
			}
		}
	}
	slices.Sort(dir.Invalid)
	dir.Invalid = slices.Compact(dir.Invalid)
	return dir, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type tenantRow struct {
	Name  string
	Users []string
}

// listing is a list of tenants, and the names left out of it as invalid.
type listing struct {
	Tenants []tenantRow
	Invalid []string
}

func (in *Inspector) index(w http.ResponseWriter, r *http.Request) {
	dir, err := in.directory(r.Context(), "")
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := listing{Invalid: dir.Invalid}
	for _, t := range sortedKeys(dir.Tenants) {
		d.Tenants = append(d.Tenants, tenantRow{Name: t, Users: sortedKeys(dir.Tenants[t])})
	}
	in.render(w, "index", page{Title: "agentmem inspector", Crumbs: []crumb{{"tenants", "/ui/"}}, Data: d})
}

func (in *Inspector) tenant(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	dir, err := in.directory(r.Context(), n.Tenant)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	in.render(w, "tenant", page{Title: "tenant " + n.Tenant, Crumbs: crumbs(n),
		Data: listing{Tenants: []tenantRow{{Name: n.Tenant, Users: sortedKeys(dir.Tenants[n.Tenant])}}, Invalid: dir.Invalid}})
}

type fileLink struct{ Name, URL string }

type sessionRow struct {
	ID     string
	Events uint64
}

type userData struct {
	NS             docstore.Namespace
	Base           string
	Core, Topics   []fileLink
	Notes, Backups []fileLink
	Sessions       []sessionRow
}

func (in *Inspector) user(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	names, err := in.deps.Docs.Files(r.Context(), n)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := userData{NS: n, Base: userURL(n)}
	for _, name := range names {
		l := fileLink{Name: name, URL: d.Base + "file/" + name}
		switch {
		case name == "MEMORY.md":
			d.Core = append(d.Core, l)
		case strings.HasPrefix(name, "backups/"):
			d.Backups = append(d.Backups, l)
		case strings.HasPrefix(name, "policy_snapshots/") || !strings.HasSuffix(name, ".md"):
		case strings.Contains(name, "/"):
			d.Notes = append(d.Notes, l)
		default:
			d.Topics = append(d.Topics, l)
		}
	}
	slices.Reverse(d.Notes) // newest first
	dir, err := in.directory(r.Context(), n.Tenant)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	sessions := dir.Tenants[n.Tenant][n.User]
	for _, s := range sortedKeys(sessions) {
		d.Sessions = append(d.Sessions, sessionRow{ID: s, Events: sessions[s]})
	}
	in.render(w, "user", page{Title: n.Tenant + " / " + n.User, Crumbs: crumbs(n), Data: d})
}

type fileData struct {
	Name   string
	Blocks []block
}

func (in *Inspector) file(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	data, err := in.deps.Docs.ReadFile(r.Context(), n, name)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	in.render(w, "file", page{Title: name, Crumbs: crumbs(n, crumb{name, ""}), Data: fileData{Name: name, Blocks: renderMarkdown(string(data))}})
}

type memoryRow struct {
	ID, Type, Text, Session string
	TS                      time.Time
	Hits                    int
	Confidence              float64
	URL                     string
}

func (in *Inspector) memories(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	recs, _, err := in.deps.Vectors.Scroll(r.Context(), vectorstore.Filter{Tenant: n.Tenant, UserID: n.User,
		MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Semantic}}, "", in.cfg.ListLimit)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	rows := make([]memoryRow, 0, len(recs))
	for _, rec := range recs {
		statement, _ := records.SplitContext(rec)
		rows = append(rows, memoryRow{ID: rec.ID, Type: string(rec.MemoryType), Text: statement, Session: rec.ChatID, TS: rec.TS,
			Hits: rec.HitCount, Confidence: rec.Confidence, URL: userURL(n) + "memory/" + rec.ID})
	}
	slices.SortFunc(rows, func(a, b memoryRow) int { return b.TS.Compare(a.TS) })
	// Only some memories carry a confidence (a semantic fact's); a column of
	// zeros would say nothing.
	d := memoriesData{Rows: rows, Confidence: slices.ContainsFunc(rows, func(m memoryRow) bool { return m.Confidence != 0 })}
	in.render(w, "memories", page{Title: "memories of " + n.User, Crumbs: crumbs(n, crumb{"memories", ""}), Data: d})
}

type memoriesData struct {
	Rows       []memoryRow
	Confidence bool
}

type provenance struct {
	Events  []fileLink
	Session fileLink
	Meta    string
}

type memoryData struct {
	M events.Memory
	// Statement and Context are how the memory is shown: an episode's
	// statement, and apart from it the messages said before it.
	Statement string
	Context   []string
	Metadata  string
	Prov      provenance
	History   []events.Change
	HistErr   string
}

func (in *Inspector) memory(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	cl, err := in.client(n.Tenant)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	m, err := cl.Get(r.Context(), events.GetRequest{UserID: n.User, ID: id})
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := memoryData{M: m, Metadata: pretty(m.Metadata)}
	d.Statement, d.Context = records.SplitContext(vectorstore.Record{MemoryType: vectorstore.MemoryType(m.MemoryType), Text: m.Text, Metadata: m.Metadata})
	if m.ChatID != "" && events.ValidateID("session", m.ChatID) == nil {
		d.Prov.Session = fileLink{Name: m.ChatID, URL: userURL(n) + "session/" + url.PathEscape(m.ChatID)}
		for _, ev := range records.StringList(m.Metadata[records.MetaSourceEventIDs]) {
			d.Prov.Events = append(d.Prov.Events, fileLink{Name: ev, URL: userURL(n) + "event/" + url.PathEscape(m.ChatID) + "/" + url.PathEscape(ev)})
		}
	}
	if meta := m.Metadata[records.MetaSourceMeta]; meta != nil {
		d.Prov.Meta = pretty(meta)
	}
	if h, err := cl.History(r.Context(), events.HistoryRequest{UserID: n.User, ID: id}); err != nil {
		d.HistErr = err.Error()
	} else {
		d.History = h.Changes
	}
	in.render(w, "memory", page{Title: "memory " + id, Crumbs: crumbs(n, crumb{"memories", userURL(n) + "memories"}, crumb{id, ""}), Data: d})
}

type timelineRow struct {
	TS               time.Time
	Type, Kind, Role string
	Text             string
	URL              string
}

type sessionData struct {
	ID       string
	Timeline []timelineRow
	Turns    []events.TurnRecord
	Items    []events.MemoryItem
	Summary  string
	Messages int
}

func (in *Inspector) session(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	sid := r.PathValue("session")
	cl, err := in.client(n.Tenant)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	a, err := cl.ArchiveSession(r.Context(), events.SessionRequest{UserID: n.User, SessionID: sid})
	if errors.Is(err, client.ErrNotFound) {
		// Only events the pipeline rejected (see the dead letters) are on its subject.
		in.render(w, "session", page{Title: "session " + sid, Crumbs: crumbs(n, crumb{"session " + sid, ""}),
			Flash: "The retriever knows no valid event of this session; see the dead letters.", Data: sessionData{ID: sid}})
		return
	}
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := sessionData{ID: sid, Turns: a.Turns, Items: a.Items, Summary: a.Summary}
	for _, e := range a.Events {
		row := timelineRow{TS: e.TS, Type: string(e.Type), URL: userURL(n) + "event/" + url.PathEscape(sid) + "/" + url.PathEscape(e.ID)}
		if o := e.Observation; o != nil {
			row.Kind, row.Role, row.Text = string(o.Kind), string(o.Role), observationText(o)
			if o.Kind == "" || o.Kind == events.KindMessage {
				d.Messages++
			}
		}
		if e.SessionEnded != nil {
			row.Text = e.SessionEnded.Reason
		}
		d.Timeline = append(d.Timeline, row)
	}
	if sum, err := cl.SessionSummary(r.Context(), events.SessionRequest{UserID: n.User, SessionID: sid}); err == nil && sum.Summary != "" {
		d.Summary = sum.Summary
	}
	in.render(w, "session", page{Title: "session " + sid, Crumbs: crumbs(n, crumb{"session " + sid, ""}), Data: d})
}

func observationText(o *events.Observation) string {
	switch {
	case o.ToolCall != nil:
		return o.ToolCall.Name + " " + compact(o.ToolCall.Arguments)
	case o.ToolResult != nil:
		return o.ToolResult.Name + " → " + o.ToolResult.Output
	case o.Turn != nil:
		return "turn " + o.Turn.TurnID + " " + string(o.Turn.Status)
	}
	return o.Text
}

type eventData struct {
	ID, Session, SessionURL string
	Seq                     uint64
	Subject                 string
	JSON                    string
}

func (in *Inspector) event(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	sid, id := r.PathValue("session"), r.PathValue("id")
	st, err := in.deps.Events.Get(r.Context(), n.Tenant, n.User, sid, id)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	in.render(w, "event", page{Title: "event " + id, Crumbs: crumbs(n, crumb{"session " + sid, userURL(n) + "session/" + url.PathEscape(sid)}, crumb{id, ""}),
		Data: eventData{ID: id, Session: sid, SessionURL: userURL(n) + "session/" + url.PathEscape(sid), Seq: st.Seq, Subject: st.Subject, JSON: pretty(st.Envelope)}})
}

type snapshotRow struct{ Name, JSON string }

type policyData struct {
	Base      string
	Overrides string
	Has       bool
	Snapshots []snapshotRow
}

func (in *Inspector) policy(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	in.renderPolicy(w, r, n, r.URL.Query().Get("flash"))
}

func (in *Inspector) renderPolicy(w http.ResponseWriter, r *http.Request, n docstore.Namespace, flash string) {
	ctx := r.Context()
	cur, has, err := in.deps.Docs.PolicyOverrides(ctx, n)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	names, err := in.deps.Docs.PolicySnapshots(ctx, n)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := policyData{Overrides: string(cur), Has: has, Base: userURL(n)}
	for i := len(names) - 1; i >= 0; i-- {
		data, err := in.deps.Docs.ReadFile(ctx, n, names[i])
		if err != nil {
			in.fail(w, r, err)
			return
		}
		d.Snapshots = append(d.Snapshots, snapshotRow{Name: path.Base(names[i]), JSON: string(data)})
	}
	in.render(w, "policy", page{Title: "policy of " + n.User, Crumbs: crumbs(n, crumb{"policy", ""}), Flash: flash, Data: d})
}

func (in *Inspector) rollback(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	snap := r.FormValue("snapshot")
	if err := in.deps.Docs.RestorePolicySnapshot(r.Context(), n, snap); err != nil {
		in.fail(w, r, fmt.Errorf("roll back to %s: %w", snap, err))
		return
	}
	in.logger.Info("policy rolled back", zap.String("tenant", n.Tenant), zap.String("user", n.User), zap.String("snapshot", snap))
	http.Redirect(w, r, userURL(n)+"policy?flash="+url.QueryEscape("Rolled back to "+snap+"."), http.StatusSeeOther)
}

type section struct {
	Name   string
	Tokens int
	Items  []events.PackItem
	Texts  []string
	// Markdown: the items are Markdown files or parts of them, shown as blocks
	// (headings, entries, lines) rather than run together.
	Markdown bool
}

type searchData struct {
	Base, Query string
	// Agent is the agent id whose agent scope the pack and the search
	// include; "" for the user's memory and the tenant's only.
	Agent    string
	Sections []section
	Empty    []string
	Total    int
	Prompt   string
	Results  []events.SearchResult
	Err      string
}

// tokens is the retriever's own estimate: a token per four characters.
func tokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

func (in *Inspector) search(w http.ResponseWriter, r *http.Request) {
	n, err := ns(r)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := searchData{Base: userURL(n), Query: r.URL.Query().Get("q"), Agent: r.URL.Query().Get("agent")}
	if err := events.ValidateID("agent", d.Agent); d.Agent != "" && err != nil {
		in.fail(w, r, fmt.Errorf("%w: %w", errBadInput, err))
		return
	}
	if d.Query != "" {
		cl, err := in.client(n.Tenant)
		if err != nil {
			in.fail(w, r, err)
			return
		}
		pack, err := cl.Context(r.Context(), events.ContextRequest{UserID: n.User, AgentID: d.Agent, Query: d.Query, RecordHits: events.NoHits()})
		if err != nil {
			d.Err = err.Error()
		} else {
			d.Total, d.Prompt = pack.TokenEstimate, pack.Prompt
			// Empty sections are named in one line, not shown one by one.
			for _, sec := range packSections(pack) {
				if len(sec.Items) == 0 && len(sec.Texts) == 0 {
					d.Empty = append(d.Empty, sec.Name)
				} else {
					d.Sections = append(d.Sections, sec)
				}
			}
		}
		if rep, err := cl.Search(r.Context(), events.SearchRequest{UserID: n.User, AgentID: d.Agent, Query: d.Query}); err == nil {
			d.Results = rep.Results
		}
	}
	in.render(w, "search", page{Title: "context for a query", Crumbs: crumbs(n, crumb{"search", ""}), Data: d})
}

func packSections(p events.ContextPack) []section {
	items := func(name string, list []events.PackItem, markdown bool) section {
		s := section{Name: name, Items: list, Markdown: markdown}
		for _, it := range list {
			s.Tokens += tokens(it.Text)
		}
		return s
	}
	memItems := func(name string, list []events.MemoryItem) section {
		s := section{Name: name}
		for _, it := range list {
			s.Texts = append(s.Texts, it.Key+": "+it.Content)
			s.Tokens += tokens(it.Key + ": " + it.Content)
		}
		return s
	}
	var core []events.PackItem
	if p.Core != nil {
		core = []events.PackItem{*p.Core}
	}
	out := []section{
		memItems("persona", p.Persona), memItems("user profile", p.UserProfile), memItems("session items", p.SessionItems),
		items("core (MEMORY.md)", core, true), items("topics", p.Topics, true), items("chunks", p.Chunks, true), items("daily notes", p.DailyNotes, true),
		items("episodic", p.EpisodicItems, false), items("semantic", p.SemanticItems, false),
		items("agent scope", p.AgentItems, false), items("tenant scope", p.TenantItems, false),
	}
	recent := section{Name: "recent events"}
	for _, e := range p.RecentEvents {
		if e.Obs != nil {
			t := string(e.Obs.Role) + ": " + observationText(e.Obs)
			recent.Texts = append(recent.Texts, t)
			recent.Tokens += tokens(t)
		}
	}
	out = append(out, recent)
	if p.SessionSummary != "" {
		out = append(out, section{Name: "session summary", Texts: []string{p.SessionSummary}, Tokens: tokens(p.SessionSummary)})
	}
	return out
}

type dlqData struct {
	Letters []deadLetter
}

type deadLetter struct {
	bus.DeadLetter
	// Head is the start of the payload; Full is set when that is not all of it.
	Head string
	Full bool
}

// payloadHead is how much of a payload the dead-letter list shows; the whole
// payload (up to the event size limit) has a page of its own.
const payloadHead = 512

func (in *Inspector) dlq(w http.ResponseWriter, r *http.Request) {
	dls, err := bus.ListDeadLetters(r.Context(), in.deps.JS, in.cfg.DLQStream, in.cfg.ListLimit)
	if err != nil {
		in.fail(w, r, err)
		return
	}
	d := dlqData{}
	for i := len(dls) - 1; i >= 0; i-- {
		dl := deadLetter{DeadLetter: dls[i], Head: string(dls[i].Data)}
		if len(dls[i].Data) > payloadHead {
			cut := payloadHead
			for cut > 0 && !utf8.RuneStart(dls[i].Data[cut]) {
				cut--
			}
			dl.Head, dl.Full = string(dls[i].Data[:cut])+"…", true
		}
		d.Letters = append(d.Letters, dl)
	}
	in.render(w, "dlq", page{Title: "dead letters", Crumbs: []crumb{{"tenants", "/ui/"}, {"dead letters", ""}}, Flash: r.URL.Query().Get("flash"), Data: d})
}

// deadLetter reads the dead letter at seq of the dead-letter stream.
func (in *Inspector) deadLetter(ctx context.Context, seqText string) (bus.DeadLetter, error) {
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return bus.DeadLetter{}, fmt.Errorf("%w: seq %q: %w", errBadInput, seqText, err)
	}
	return bus.GetDeadLetter(ctx, in.deps.JS, in.cfg.DLQStream, seq)
}

// payload serves a dead letter's whole payload as plain text: never as HTML,
// whatever it holds.
func (in *Inspector) payload(w http.ResponseWriter, r *http.Request) {
	dl, err := in.deadLetter(r.Context(), r.PathValue("seq"))
	if err != nil {
		in.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(dl.Data)
}

func (in *Inspector) replay(w http.ResponseWriter, r *http.Request) {
	dl, err := in.deadLetter(r.Context(), r.FormValue("seq"))
	if err != nil {
		in.fail(w, r, err)
		return
	}
	if err := bus.ReplayDeadLetter(r.Context(), in.deps.JS, dl); err != nil {
		in.fail(w, r, fmt.Errorf("replay %d: %w", dl.Seq, err))
		return
	}
	in.logger.Info("dead letter replayed", zap.Uint64("seq", dl.Seq), zap.String("subject", dl.Subject))
	http.Redirect(w, r, "/ui/dlq?flash="+url.QueryEscape(fmt.Sprintf("Replayed dead letter %d to %s.", dl.Seq, dl.Subject)), http.StatusSeeOther)
}

func pretty(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
