package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/replay"
)

func cliClient(t *testing.T, url, tenant string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Config{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func searchTexts(t *testing.T, cl *client.Client, user string) []string {
	t.Helper()
	var out []string
	for _, q := range []string{"sales columns", "bar charts", "finance reports"} {
		rep, err := cl.Search(context.Background(), events.SearchRequest{UserID: user, Query: q})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			out = append(out, string(r.MemoryType)+" "+r.Text) // ids are derived anew in another tenant
		}
	}
	return out
}

// export and import from the command line move a tenant into a fresh
// deployment under another name, with the same search results; twice is once;
// a corrupt archive is a clear error. forget without --yes changes nothing;
// with it, the user is gone from every store and the stream, their replays are
// dropped, and the other user is untouched.
func TestExportImportForgetCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Setenv("AGENTMEM_DATA_DIR", t.TempDir()) // the CLI's own: its replays
	src, srcURL := upForCLI(t, ctx)
	dst, dstURL := upForCLI(t, ctx)
	for user, texts := range map[string][]string{
		"u1": {"My sales.csv has columns date, product and qty.", "I prefer bar charts."},
		"u2": {"Quarterly finance reports go to Berlin."},
	} {
		for _, text := range texts {
			if out, err := run(t, "observe", "--nats-url", srcURL, "--tenant", "acme", "--user", user, "--session", "s1", "--text", text); err != nil {
				t.Fatalf("observe: %v\n%s", err, out)
			}
		}
		if out, err := run(t, "end", "--nats-url", srcURL, "--tenant", "acme", "--user", user, "--session", "s1"); err != nil {
			t.Fatalf("end: %v\n%s", err, out)
		}
	}
	if out, err := run(t, "append", "--nats-url", srcURL, "--tenant", "acme", "--user", "u1", "--content", "Finance reports are due on Fridays."); err != nil {
		t.Fatalf("append: %v\n%s", err, out)
	}
	if err := app.WaitIdle(ctx, src.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(t.TempDir(), "acme.tar.gz")
	out, err := run(t, "export", "--nats-url", srcURL, "--tenant", "acme", "--out", archive)
	if err != nil || !strings.Contains(out, "2 users") || !strings.Contains(out, "exported user u1") {
		t.Fatalf("export: %v\n%s", err, out)
	}
	for range 2 {
		out, err = run(t, "import", "--nats-url", dstURL, "--in", archive, "--tenant", "acme2")
		if err != nil || !strings.Contains(out, "into tenant acme2: 2 users") {
			t.Fatalf("import: %v\n%s", err, out)
		}
	}
	from, to := cliClient(t, srcURL, "acme"), cliClient(t, dstURL, "acme2")
	for _, u := range []string{"u1", "u2"} {
		a, b := searchTexts(t, from, u), searchTexts(t, to, u)
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Fatalf("search of %s: source %q, import %q", u, a, b)
		}
	}
	if err := app.WaitIdle(ctx, dst.Runtime().JS, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	if err := os.WriteFile(bad, []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "import", "--nats-url", dstURL, "--in", bad); err == nil || !strings.Contains(err.Error(), "not a gzip file") {
		t.Fatalf("import of a corrupt archive: %v\n%s", err, out)
	}

	// Replays under the CLI's data directory: of this deployment, u1's and the
	// tenant's hold u1; "mine" of another deployment is another acme's.
	root := filepath.Join(os.Getenv("AGENTMEM_DATA_DIR"), "replays", deploymentDir(srcURL))
	elsewhere := filepath.Join(os.Getenv("AGENTMEM_DATA_DIR"), "replays", deploymentDir(dstURL))
	for dir, user := range map[string]string{
		replay.Dir(root, "acme", "mine"): "u1", replay.Dir(root, "acme", "all"): "", replay.Dir(root, "acme", "theirs"): "u2",
		replay.Dir(elsewhere, "acme", "mine"): "u1",
	} {
		name := filepath.Base(dir)
		data, _ := json.Marshal(replay.Manifest{Name: name, Tenant: "acme", User: user, Status: replay.StatusDone})
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, replay.ManifestFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	count := func(user string) int {
		rep, err := from.CountEvents(ctx, events.EventsQuery{UserID: user})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Count
	}
	before, kept := count("u1"), searchTexts(t, from, "u2")
	if out, err := run(t, "forget", "--nats-url", srcURL, "--tenant", "acme", "--user", "u1"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("forget without --yes: %v\n%s", err, out)
	}
	if count("u1") != before || before == 0 || len(searchTexts(t, from, "u1")) == 0 {
		t.Fatal("forget without --yes changed something")
	}
	out, err = run(t, "forget", "--nats-url", srcURL, "--tenant", "acme", "--user", "u1", "--yes", "--json")
	var rep forgetReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("forget: %v\n%s", err, out)
	}
	r := rep.Removed
	if r.Events != before || r.Files == 0 || r.Memories == 0 || r.SessionKeys == 0 || !reflect.DeepEqual(rep.Replays, []string{"all", "mine"}) {
		t.Fatalf("forget removed %+v", rep)
	}
	if n := count("u1"); n != 0 || len(searchTexts(t, from, "u1")) != 0 {
		t.Fatalf("after forget: %d events, search %q", n, searchTexts(t, from, "u1"))
	}
	if got := searchTexts(t, from, "u2"); !reflect.DeepEqual(got, kept) {
		t.Fatalf("u2 changed by the forget of u1: %q, was %q", got, kept)
	}
	if list, err := replay.List(root, "acme"); err != nil || len(list) != 1 || list[0].Name != "theirs" {
		t.Fatalf("replays after forget: %+v, %v", list, err)
	}
	if list, err := replay.List(elsewhere, "acme"); err != nil || len(list) != 1 || list[0].Name != "mine" {
		t.Fatalf("the forget on one deployment dropped the replays of another: %+v, %v", list, err)
	}
	out, err = run(t, "forget", "--nats-url", srcURL, "--tenant", "acme", "--user", "u1", "--yes")
	if err != nil || !strings.Contains(out, "events        0") {
		t.Fatalf("second forget: %v\n%s", err, out)
	}
}
