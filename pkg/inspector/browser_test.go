package inspector_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/demo"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/inspector"
)

// chromium returns the browser to drive, or skips the test (fails it under CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: CI must run the browser tests (.ci/run installs it: apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH: the browser tests are skipped (apt-get install -y chromium)")
	return ""
}

// browser drives one headless chromium tab; every page it loads is screenshotted,
// and the screenshots are written to the test's artifact directory if it fails.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots map[string][]byte
}

func newBrowser(t *testing.T, base string) *browser {
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	b := &browser{t: t, ctx: ctx, base: base, shots: map[string][]byte{}}
	t.Cleanup(func() {
		if t.Failed() {
			dir := t.ArtifactDir()
			for name, png := range b.shots {
				_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
			}
			t.Logf("screenshots of %d pages in %s", len(b.shots), dir)
		}
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	return b
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// open loads path and checks it is a page of the inspector (not an error) where no
// script runs but the inspector's own.
func (b *browser) open(path string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+path)); err != nil {
		b.t.Fatalf("navigate %s: %v", path, err)
	}
	b.check(path)
}

func (b *browser) check(path string) {
	b.t.Helper()
	b.shot(path)
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!!document.querySelector("main h1")`))
	if err != nil || !ok {
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("%s is not an inspector page (%v): %s", path, err, body)
	}
	scripts, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		`[...document.scripts].map(s => s.src || ("inline:" + s.textContent)).filter(s => !s.endsWith("/ui/static/tail.js")).join("|") + (window.__pwned ? "|pwned" : "")`))
	if err != nil || scripts != "" {
		b.t.Errorf("%s: scripts that are not the inspector's: %q (%v)", path, scripts, err)
	}
}

func (b *browser) shot(name string) {
	if png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)); err == nil {
		b.shots[strings.Trim(unsafeName.ReplaceAllString(name, "_"), "_")] = png
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// waitFor polls expr in the page until it is true; a poll cut short by a
// navigation (the page's JavaScript context goes away) is polled again.
func (b *browser) waitFor(expr string) {
	b.t.Helper()
	var err error
	for range 50 {
		var ok bool
		if ok, err = chromedp.Run(b.ctx, chromedp.Poll[bool](expr)); err == nil && ok {
			return
		}
		if b.ctx.Err() != nil {
			break
		}
	}
	b.t.Fatalf("waiting for %s: %v", expr, err)
}

func (b *browser) text() string { return b.eval(`document.body.innerText`) }

// click clicks sel and waits for the next page's heading.
func (b *browser) click(sel, what string) {
	b.t.Helper()
	before := b.eval(`location.href`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
	b.waitFor(fmt.Sprintf(`location.href !== %q && document.readyState === "complete" && !!document.querySelector("main h1")`, before))
	b.check(what)
}

const script = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=1">`

// seed builds a namespace through the pipeline: two sessions of observations (one
// with HTML in it), their ends, an append, a malformed event for the dead letters,
// and two policy changes.
func seed(t *testing.T, stack *app.Stack) {
	cl := apptest.Client(t, stack, "acme")
	ctx := context.Background()
	say := func(session, text string) {
		if _, err := cl.Say(ctx, "u1", session, events.RoleUser, text, map[string]any{"dia_id": "D1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	say("s1", "Remember: my sales.csv has columns date, product and qty.")
	say("s1", "I prefer bar charts for monthly sales.")
	say("s2", "Remember: my report template starts with "+script+" and a title.")
	for _, s := range []string{"s1", "s2"} {
		if _, err := cl.EndSession(ctx, "u1", s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Append(ctx, events.AppendRequest{UserID: "u1", Content: "Never trust " + script}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(stack.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A malformed event with a payload too long to show whole, and an event
	// published by hand under a user name that is not a valid id.
	if err := nc.Publish("mem.acme.obs.u1.s3", []byte(`{"not":"an event","pad":"`+strings.Repeat("x", 4000)+`"`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("mem.acme.obs.bad!user.s5", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Memory that no observation made: a user who only appended (u2), one who
	// only added a memory (u3), and a tenant whose files came by import (beta).
	if _, err := cl.Append(ctx, events.AppendRequest{UserID: "u2", Content: "Appended only."}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Add(ctx, events.AddRequest{UserID: "u3", Text: "Added only."}); err != nil {
		t.Fatal(err)
	}
	if err := stack.Runtime().Docs.AppendLongTerm(ctx, docstore.Namespace{Tenant: "beta", User: "u9"}, "- imported fact"); err != nil {
		t.Fatal(err)
	}
	n := docstore.Namespace{Tenant: "acme", User: "u1"}
	for _, p := range []string{`{"retrieve_limit": 7}`, `{"retrieve_limit": 9}`} {
		if _, err := stack.Runtime().Docs.SetPolicyOverrides(ctx, n, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	apptest.WaitIdle(t, stack)
	// The two bad events are dead-lettered by ingest before the stream is idle.
	if got := deadSubjects(t, stack); got != "mem.acme.obs.bad!user.s5 mem.acme.obs.u1.s3" {
		t.Fatalf("dead letters: %s", got)
	}
}

// deadSubjects lists the subjects of the dead letters, sorted.
func deadSubjects(t *testing.T, stack *app.Stack) string {
	t.Helper()
	dls, err := bus.ListDeadLetters(context.Background(), stack.Runtime().JS, bus.DefaultDLQStream, 10)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, d := range dls {
		subjects = append(subjects, d.Subject)
	}
	slices.Sort(subjects)
	return strings.Join(subjects, " ")
}

func serve(t *testing.T, stack *app.Stack) string {
	rt := stack.Runtime()
	in, err := inspector.New(inspector.Config{EventStream: bus.DefaultStream, DLQStream: bus.DefaultDLQStream},
		inspector.Deps{Conn: rt.Conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Vectors: rt.Vectors}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The inspector in a real browser over a namespace the pipeline built.
func TestInspectorInBrowser(t *testing.T) {
	start := time.Now()
	stack, _ := apptest.Up(t)
	seed(t, stack)
	b := newBrowser(t, serve(t, stack))
	user := "/ui/t/acme/u/u1/"

	t.Run("every page of a user is reachable by links from /ui/", func(t *testing.T) {
		b.t = t
		seen := crawl(b, "/ui/")
		for _, want := range []string{"/ui/", "/ui/t/acme/", user, user + "file/MEMORY.md", user + "file/file_patterns.md", user + "file/user_prefs.md",
			user + "memories", user + "memory/", user + "session/s1", user + "session/s2", user + "event/s1/", user + "policy", user + "search",
			"/ui/dlq", "/ui/tail"} {
			found := false
			for p := range seen {
				if p == want || (strings.HasSuffix(want, "/") && strings.HasPrefix(p, want) && want != "/ui/" && want != user && want != "/ui/t/acme/") {
					found = true
				}
			}
			if !found {
				t.Errorf("no link leads to %s; reached %d pages", want, len(seen))
			}
		}
	})

	t.Run("every tenant and user with memory is listed, invalid names are not", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		users := b.eval(`[...document.querySelectorAll("a.user")].map(a => a.getAttribute("href")).join(" ")`)
		if want := "/ui/t/acme/u/u1/ /ui/t/acme/u/u2/ /ui/t/acme/u/u3/ /ui/t/beta/u/u9/"; users != want {
			t.Errorf("users listed: %s\nwant %s", users, want)
		}
		if inv := b.eval(`(document.getElementById("invalid-names") || {}).textContent || ""`); !strings.Contains(inv, `"bad!user"`) {
			t.Errorf("the invalid user name is not reported: %q", inv)
		}
		b.open("/ui/t/beta/")
		if got := b.eval(`[...document.querySelectorAll("a.user")].map(a => a.textContent).join(" ")`); got != "u9" {
			t.Errorf("users of the imported tenant: %q", got)
		}
	})

	t.Run("memory content is shown as text", func(t *testing.T) {
		b.t = t
		b.open(user + "file/MEMORY.md")
		if !strings.Contains(b.text(), "Never trust <script>") {
			t.Errorf("MEMORY.md does not show the script as text: %s", b.text())
		}
		b.open(user + "session/s2")
		if !strings.Contains(b.text(), "<script>window.__pwned = 1</script>") {
			t.Errorf("the session does not show the script as text")
		}
		// A chat without agent turns has no empty Turns table.
		if h := b.eval(`[...document.querySelectorAll("h2")].map(h => h.textContent).join("|")`); strings.Contains(h, "Turns") {
			t.Errorf("session s2 has no turns, yet a Turns section: %s", h)
		}
		b.open(user + "memories")
		if !strings.Contains(b.text(), "<script>") {
			t.Errorf("no memory shows the script as text:\n%s", b.text())
		}
	})

	t.Run("a memory's provenance leads to its source event", func(t *testing.T) {
		b.t = t
		b.open(user + "memories")
		b.click(`a.memory`, "memory")
		if !strings.Contains(b.text(), "History") || !strings.Contains(b.text(), "hit count") {
			t.Errorf("memory page without history: %s", b.text())
		}
		if op := b.eval(`document.querySelector("table.history tr:nth-child(2) td:nth-child(2)").textContent`); !strings.HasPrefix(op, "create") {
			t.Errorf("the history does not start with the memory's creation: %q\n%s", op, b.text())
		}
		id := b.eval(`document.querySelector("a.provenance").textContent`)
		b.click(`a.provenance`, "event")
		if ev := b.eval(`document.querySelector("pre.event").textContent`); !strings.Contains(ev, id) || !strings.Contains(ev, `"observation"`) {
			t.Errorf("event page of %s shows %s", id, ev)
		}
	})

	t.Run("search shows the context pack section by section", func(t *testing.T) {
		b.t = t
		b.open(user + "search?q=" + url.QueryEscape("which columns does my sales file have?"))
		txt := b.text()
		if !strings.Contains(txt, "core (MEMORY.md)") || !strings.Contains(txt, "tokens") || !strings.Contains(txt, "qty") {
			t.Errorf("search page: %s", txt)
		}
		// MEMORY.md keeps its structure: a heading per entry, not one run-on line.
		core := `[...document.querySelectorAll("section.pack-section")].find(s => s.querySelector("h2").textContent.startsWith("core"))`
		if n := b.eval(core + `.querySelectorAll("article.markdown > *").length + ""`); n == "0" || n == "1" || n == "2" {
			t.Errorf("MEMORY.md in the context pack is %s blocks:\n%s", n, b.eval(core+`.innerHTML`))
		}
		if strings.Contains(txt, "(empty)") || !strings.Contains(b.eval(`document.getElementById("empty-sections").textContent`), "persona") {
			t.Errorf("empty sections are not folded into one line:\n%s", txt)
		}
	})

	t.Run("memories show a confidence only where one is set", func(t *testing.T) {
		b.t = t
		b.open(user + "memories")
		if strings.Contains(b.eval(`document.querySelector("table.memories tr").textContent`), "confidence") || strings.Contains(b.text(), "0.0000") {
			t.Errorf("a confidence column of zeros:\n%s", b.text())
		}
	})

	t.Run("replay a dead letter", func(t *testing.T) {
		b.t = t
		b.open("/ui/dlq")
		if !strings.Contains(b.text(), "malformed") {
			t.Errorf("dead letter without its reason: %s", b.text())
		}
		row := `[...document.querySelectorAll("table.dlq tr")].find(tr => tr.textContent.includes("mem.acme.obs.u1.s3"))`
		if head := b.eval(row + `.querySelector("pre.payload").textContent`); len(head) > 600 || !strings.HasPrefix(head, `{"not":"an event"`) {
			t.Errorf("the long payload is shown as %d characters: %.80q", len(head), head)
		}
		resp, err := http.Get(b.base + b.eval(row+`.querySelector("a.payload").getAttribute("href")`))
		if err != nil {
			t.Fatal(err)
		}
		full, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.HasSuffix(string(full), strings.Repeat("x", 4000)+`"`) {
			t.Errorf("full payload: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(full))
		}
		b.eval(row + `.querySelector("button.replay").setAttribute("id", "replay-s3"); ""`)
		b.click(`#replay-s3`, "dlq-replayed")
		if !strings.Contains(b.eval(`document.getElementById("flash").textContent`), "Replayed dead letter") {
			t.Errorf("no confirmation: %s", b.text())
		}
		// A replayed dead letter leaves the list; the replayed event is still
		// malformed, so ingest dead-letters it again, as a new dead letter.
		apptest.WaitIdle(t, stack)
		dls, err := bus.ListDeadLetters(context.Background(), stack.Runtime().JS, bus.DefaultDLQStream, 10)
		if err != nil || len(dls) != 2 || dls[0].Subject != "mem.acme.obs.bad!user.s5" || dls[1].Subject != "mem.acme.obs.u1.s3" || dls[1].Seq < 3 {
			t.Errorf("after replay: %v %+v; want the other dead letter and the new one of the replayed event", err, dls)
		}
	})

	t.Run("roll back the policy", func(t *testing.T) {
		b.t = t
		b.open(user + "policy")
		if !strings.Contains(b.eval(`document.getElementById("overrides").textContent`), "9") {
			t.Fatalf("current overrides: %s", b.text())
		}
		b.eval(`[...document.querySelectorAll("tr")].find(tr => tr.textContent.includes('"retrieve_limit": 7')).querySelector("button.rollback").setAttribute("id", "target"); ""`)
		b.click(`#target`, "policy-rolled-back")
		if got := b.eval(`document.getElementById("overrides").textContent`); !strings.Contains(got, `"retrieve_limit": 7`) {
			t.Errorf("after rollback the overrides are %s", got)
		}
		cur, _, err := stack.Runtime().Docs.PolicyOverrides(context.Background(), docstore.Namespace{Tenant: "acme", User: "u1"})
		if err != nil || !strings.Contains(string(cur), "7") {
			t.Errorf("stored overrides %s %v", cur, err)
		}
	})

	t.Run("live tail", func(t *testing.T) {
		b.t = t
		b.open("/ui/tail?tenant=acme")
		b.waitFor(`document.getElementById("tail-status").textContent === "connected: waiting for events…"`)
		if _, err := apptest.Client(t, stack, "acme").Say(context.Background(), "u1", "s4", events.RoleUser, "tail me "+script, nil); err != nil {
			t.Fatal(err)
		}
		b.waitFor(`document.getElementById("tail").textContent.includes("tail me <script>")`)
		if st := b.eval(`document.getElementById("tail-status").textContent`); !strings.HasPrefix(st, "connected: ") || !strings.HasSuffix(st, " events") && !strings.HasSuffix(st, " event") {
			t.Errorf("tail status after an event: %q", st)
		}
		b.check("tail-after")
	})
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}

// The inspector on the demo's memory (what docs/inspector.png shows): a memory of
// the sample conversation with the events it came from and its history. With
// AGENTMEM_TEST_INSPECTOR_SCREENSHOT=path the page is saved there, e.g.
//
//	AGENTMEM_TEST_INSPECTOR_SCREENSHOT=$PWD/docs/inspector.png go test -run TestInspectorOnTheDemo ./pkg/inspector/
func TestInspectorOnTheDemo(t *testing.T) {
	dir := t.TempDir()
	if _, err := demo.Run(context.Background(), dir, io.Discard, nil); err != nil {
		t.Fatal(err)
	}
	conv, err := demo.Sample()
	if err != nil {
		t.Fatal(err)
	}
	// A stack over the data the demo left behind, as `agentmem up --data-dir` would be.
	stack, _ := apptest.Up(t, "AGENTMEM_DATA_DIR="+dir)
	b := newBrowser(t, serve(t, stack))
	b.open("/ui/t/" + conv.Tenant + "/u/" + conv.UserID + "/memories")
	// The memory about the sales file: the demo's first fact.
	b.eval(`[...document.querySelectorAll("a.memory")].find(a => a.textContent.includes("sales_2026.csv")).setAttribute("id", "shown"); ""`)
	b.click(`#shown`, "demo-memory")
	if got := b.eval(`document.querySelector(".memory-text").textContent`); !strings.Contains(got, "sales_2026.csv") {
		t.Errorf("memory text: %q", got)
	}
	if n := b.eval(`document.querySelectorAll("a.provenance").length + ""`); n == "0" {
		t.Errorf("the demo's memory shows no source event:\n%s", b.text())
	}
	if op := b.eval(`document.querySelector("table.history tr:nth-child(2) td:nth-child(2)").textContent`); !strings.HasPrefix(op, "create") {
		t.Errorf("the demo's memory has no history:\n%s", b.text())
	}
	if path := os.Getenv("AGENTMEM_TEST_INSPECTOR_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// crawl follows every inspector link from start (no POSTs, no event streams) and
// returns the paths it opened.
func crawl(b *browser, start string) map[string]bool {
	seen := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 && len(seen) < 200 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		b.open(p)
		links := b.eval(`[...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href")).join("\n")`)
		for _, l := range strings.Split(links, "\n") {
			u, err := url.Parse(l)
			if err != nil || u.Host != "" || !strings.HasPrefix(u.Path, "/ui/") || strings.HasPrefix(u.Path, "/ui/static/") || strings.HasPrefix(u.Path, "/ui/tail/") ||
				strings.HasSuffix(u.Path, "/payload") { // plain text, fetched by its own test
				continue
			}
			if u.Path == "/ui/tail" {
				seen[u.Path] = true // opened by its own test: it streams
				continue
			}
			target := u.Path
			if u.RawQuery != "" {
				target += "?" + u.RawQuery
			}
			if !seen[target] {
				queue = append(queue, target)
			}
		}
	}
	return seen
}

// Without a password only loopback clients are served; with one, basic auth is
// required from everyone; a cross-origin POST is refused.
func TestAccess(t *testing.T) {
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	deps := inspector.Deps{Conn: rt.Conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Vectors: rt.Vectors}
	cfg := inspector.Config{EventStream: bus.DefaultStream, DLQStream: bus.DefaultDLQStream}
	open, err := inspector.New(cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = "s3cret-pass"
	locked, err := inspector.New(cfg, deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, remote, password string) int {
		r := httptest.NewRequest("GET", "/ui/", nil)
		r.RemoteAddr = remote
		r.Host = "localhost:9090"
		if password != "" {
			r.SetBasicAuth("admin", password)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		h                http.Handler
		remote, password string
		want             int
	}{
		{open, "127.0.0.1:5000", "", 200},
		{open, "10.1.2.3:5000", "", 403},
		{locked, "127.0.0.1:5000", "", 401},
		{locked, "10.1.2.3:5000", "wrong", 401},
		{locked, "10.1.2.3:5000", "s3cret-pass", 200},
	} {
		if got := get(c.h, c.remote, c.password); got != c.want {
			t.Errorf("%s password %q: %d, want %d", c.remote, c.password, got, c.want)
		}
	}
	r := httptest.NewRequest("POST", "/ui/dlq/replay", strings.NewReader("seq=1"))
	r.RemoteAddr = "127.0.0.1:5000"
	r.Host = "localhost:9090"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	open.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", w.Code)
	}
}

// Issue 30.7: a subject whose user token is no id ("mem.acme.obs.*.s1", stored
// before ingest dead-lettered it) lists no user named "*".
func TestTenantPageListsNoInvalidUser(t *testing.T) {
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	in, err := inspector.New(inspector.Config{EventStream: bus.DefaultStream, DLQStream: bus.DefaultDLQStream},
		inspector.Deps{Conn: rt.Conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Vectors: rt.Vectors}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apptest.Client(t, stack, "acme").Say(context.Background(), "u1", "s1", events.RoleUser, "hello", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.JS.Publish(context.Background(), "mem.acme.obs.*.s1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	r := httptest.NewRequest("GET", "/ui/t/acme/", nil)
	r.RemoteAddr = "127.0.0.1:5000"
	r.Host = "127.0.0.1:9090"
	w := httptest.NewRecorder()
	in.ServeHTTP(w, r)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "/ui/t/acme/u/u1/") || strings.Contains(body, "/ui/t/acme/u/*") || strings.Contains(body, "/ui/t/acme/u/%2A") {
		t.Fatalf("tenant page %d:\n%s", w.Code, body)
	}
}
