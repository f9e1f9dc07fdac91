package inspector_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/inspector"
)

// upInspector starts a stack and the inspector over it, answering loopback names
// and hosts.
func upInspector(t *testing.T, hosts ...string) (http.Handler, *docstore.Store) {
	stack, _ := apptest.Up(t)
	rt := stack.Runtime()
	in, err := inspector.New(inspector.Config{EventStream: bus.DefaultStream, DLQStream: bus.DefaultDLQStream, Hosts: hosts},
		inspector.Deps{Conn: rt.Conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Vectors: rt.Vectors}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in, rt.Docs
}

// do sends one request from a loopback client under host; a POST carries form as
// a same-origin form would (Origin equal to Host, no Sec-Fetch-Site: what a
// browser behind DNS rebinding, or a non-browser client, sends).
func do(h http.Handler, method, host, path string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
	r.RemoteAddr = "127.0.0.1:5000"
	r.Host = host
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://"+host)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Only loopback host names and http.ui_hosts are answered: a page under another
// name that resolves to 127.0.0.1 (DNS rebinding) gets nothing, GET or POST.
func TestHostCheck(t *testing.T) {
	in, _ := upInspector(t, "mem.example.com")
	for host, want := range map[string]int{
		"localhost:9090": 200, "LOCALHOST": 200, "app.localhost:9090": 200, "127.0.0.1:9090": 200, "127.4.5.6": 200, "[::1]:9090": 200,
		"mem.example.com": 200, "MEM.Example.com:443": 200,
		"evil.example:9090": 403, "mem.example.com.evil.example": 403, "localhost.evil.example": 403, "10.0.0.1:9090": 403, "": 403,
	} {
		if got := do(in, http.MethodGet, host, "/ui/", nil).Code; got != want {
			t.Errorf("GET under Host %q: %d, want %d", host, got, want)
		}
	}
	w := do(in, http.MethodPost, "evil.example:9090", "/ui/dlq/replay", url.Values{"seq": {"1"}})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "http.ui_hosts") {
		t.Errorf("POST under a rebound Host: %d %s, want 403 naming http.ui_hosts", w.Code, w.Body)
	}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// A state-changing form is refused without the token of a page the inspector
// rendered, even when its Origin equals its Host; with it, it changes state.
func TestCSRF(t *testing.T) {
	in, docs := upInspector(t)
	ctx := context.Background()
	n := docstore.Namespace{Tenant: "acme", User: "u1"}
	if _, err := docs.SetPolicyOverrides(ctx, n, []byte(`{"retrieve_limit": 7}`)); err != nil {
		t.Fatal(err)
	}
	snap, err := docs.SetPolicyOverrides(ctx, n, []byte(`{"retrieve_limit": 9}`))
	if err != nil {
		t.Fatal(err)
	}
	const host = "localhost:9090"
	page := do(in, http.MethodGet, host, "/ui/t/acme/u/u1/policy", nil)
	m := csrfInput.FindStringSubmatch(page.Body.String())
	if page.Code != 200 || m == nil {
		t.Fatalf("policy page %d without a CSRF field: %s", page.Code, page.Body)
	}
	overrides := func() string {
		cur, _, err := docs.PolicyOverrides(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return string(cur)
	}
	for name, token := range map[string][]string{"no token": nil, "wrong token": {strings.Repeat("0", len(m[1]))}, "empty token": {""}} {
		w := do(in, http.MethodPost, host, "/ui/t/acme/u/u1/policy/rollback", url.Values{"snapshot": {snap}, "csrf": token})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "CSRF") {
			t.Errorf("rollback with %s: %d %s, want 403", name, w.Code, w.Body)
		}
		if got := overrides(); !strings.Contains(got, "9") {
			t.Errorf("rollback with %s changed the overrides to %s", name, got)
		}
	}
	w := do(in, http.MethodPost, host, "/ui/t/acme/u/u1/policy/rollback", url.Values{"snapshot": {snap}, "csrf": {m[1]}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("rollback with the page's token: %d %s, want 303", w.Code, w.Body)
	}
	if got := overrides(); !strings.Contains(got, `"retrieve_limit": 7`) {
		t.Errorf("after the rollback the overrides are %s, want the snapshot's retrieve_limit 7", got)
	}
}
