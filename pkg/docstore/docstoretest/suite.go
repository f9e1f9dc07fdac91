// Package docstoretest is the conformance suite that every docstore.Backend passes,
// run through docstore.Store so that both backends are held to the same semantics.
package docstoretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// RunSuite runs every conformance test; newBackend returns a fresh, empty backend
// for each of them.
func RunSuite(t *testing.T, newBackend func(t *testing.T) docstore.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b docstore.Backend)
	}{
		{"FreshNamespaceIsEmpty", testFreshNamespaceIsEmpty},
		{"ConcurrentAppendEntriesLoseNothing", testConcurrentAppendEntriesLoseNothing},
		{"ConcurrentBackendUpdatesLoseNothing", testConcurrentBackendUpdatesLoseNothing},
		{"UpdateCallbackErrorWritesNothing", testUpdateCallbackErrorWritesNothing},
		{"CapacityKeepsNewestWholeEntries", testCapacityKeepsNewestWholeEntries},
		{"EnforceCapacity", testEnforceCapacity},
		{"ReplaceBacksUpPreviousContentEveryTime", testReplaceBacksUpEveryTime},
		{"Restore", testRestore},
		{"RoutingOfCategories", testRouting},
		{"IdempotentReappend", testIdempotentReappend},
		{"InvalidEntriesRejected", testInvalidEntriesRejected},
		{"HeadReturnsMinOfNAndLines", testHeadReturnsMinOfNAndLines},
		{"LongTermAppend", testLongTermAppend},
		{"DailyNotes", testDailyNotes},
		{"RecentDailyNotesWindow", testRecentDailyNotesWindow},
		{"PolicyOverridesSnapshotsRestore", testPolicyOverrides},
		{"LastCompressStamp", testLastCompressStamp},
		{"EscapingNamesAndNamespacesRejected", testEscapesRejected},
		{"AppendEntriesParsesBackToAppendedEntries", testAppendEntriesRoundTrip},
		{"ReadIfChangedSeesEveryWrite", testReadIfChangedSeesEveryWrite},
		{"PutFileUsersDeleteNamespace", testPutFileUsersDeleteNamespace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend(t)) })
	}
}

// Start is the fixed time every clock of the suite starts at.
var Start = time.Date(2026, 11, 23, 10, 15, 0, 0, time.UTC)

// Clock is a settable clock for docstore.Config.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at Start.
func NewClock() *Clock { return &Clock{t: Start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

var ns = docstore.Namespace{Tenant: "acme", User: "u1"}

// unbounded is a Config whose capacity never drops entries, for tests that count them.
func unbounded(clk *Clock) docstore.Config {
	return docstore.Config{MaxLines: 1 << 30, TargetLines: 1 << 30, Now: clk.Now}
}

func newStore(t *testing.T, b docstore.Backend, cfg docstore.Config) *docstore.Store {
	t.Helper()
	s, err := docstore.New(cfg, b, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("docstore.New: %v", err)
	}
	return s
}

func entry(minute int, c markdown.Category, content string) markdown.Entry {
	return markdown.Entry{Time: Start.Add(time.Duration(minute) * time.Minute), Category: c, Content: content}
}

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// parseFile reads and parses a file, failing the test on malformed entries.
func parseFile(t fataler, s *docstore.Store, n docstore.Namespace, name string) []markdown.Entry {
	t.Helper()
	data, err := s.ReadFile(context.Background(), n, name)
	if errors.Is(err, docstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	entries, perrs := markdown.ParseEntries(string(data))
	if len(perrs) > 0 {
		t.Fatalf("%s has malformed entries: %v", name, perrs)
	}
	return entries
}

func readString(t fataler, s *docstore.Store, n docstore.Namespace, name string) string {
	t.Helper()
	data, err := s.ReadFile(context.Background(), n, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(data)
}

func sameEntries(a, b []markdown.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if markdown.FormatEntry(a[i]) != markdown.FormatEntry(b[i]) {
			return false
		}
	}
	return true
}

func appendedTotal(res docstore.AppendResult) int {
	n := 0
	for _, c := range res.Appended {
		n += c
	}
	return n
}

func mustErrorIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func testFreshNamespaceIsEmpty(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	for _, dir := range []string{"", docstore.BackupsDir, docstore.PolicySnapshotsDir, "202611"} {
		names, err := b.List(ctx, ns, dir)
		if err != nil || len(names) != 0 {
			t.Fatalf("List(%q) of a fresh namespace = %v, %v; want empty", dir, names, err)
		}
	}
	_, err := b.Read(ctx, ns, docstore.MemoryFile)
	mustErrorIs(t, err, docstore.ErrNotFound, "Read of a missing file")
	if err := b.Delete(ctx, ns, docstore.MemoryFile); err != nil {
		t.Fatalf("Delete of a missing file: %v", err)
	}
	if files, err := s.Files(ctx, ns); err != nil || len(files) != 0 {
		t.Fatalf("Files = %v, %v; want empty", files, err)
	}
	if backups, err := s.Backups(ctx, ns); err != nil || len(backups) != 0 {
		t.Fatalf("Backups = %v, %v; want empty", backups, err)
	}
	if _, ok, err := s.PolicyOverrides(ctx, ns); ok || err != nil {
		t.Fatalf("PolicyOverrides = ok %v, %v; want none", ok, err)
	}
	if notes, err := s.RecentDailyNotes(ctx, ns, 7); err != nil || len(notes) != 0 {
		t.Fatalf("RecentDailyNotes = %v, %v; want none", notes, err)
	}
}

func testConcurrentAppendEntriesLoseNothing(t *testing.T, b docstore.Backend) {
	const writers, perWriter = 8, 50
	s := newStore(t, b, unbounded(NewClock()))
	var (
		wg       sync.WaitGroup
		appended atomic.Int64
		errs     = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				c := markdown.CategoryGeneral
				if i%2 == 1 {
					c = markdown.CategoryErrorSolution
				}
				res, err := s.AppendEntries(context.Background(), ns, []markdown.Entry{entry(i, c, fmt.Sprintf("writer %d entry %d", w, i))})
				if err != nil {
					errs <- fmt.Errorf("writer %d entry %d: %w", w, i, err)
					return
				}
				appended.Add(int64(res.Appended[docstore.MemoryFile]))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if appended.Load() != writers*perWriter {
		t.Fatalf("AppendEntries reported %d appended, want %d", appended.Load(), writers*perWriter)
	}
	got := parseFile(t, s, ns, docstore.MemoryFile)
	if len(got) != writers*perWriter {
		t.Fatalf("MEMORY.md has %d entries, want %d", len(got), writers*perWriter)
	}
	// Every entry exactly once, and each writer's entries in the order it wrote them.
	next := make(map[int]int)
	for _, e := range got {
		var w, i int
		if _, err := fmt.Sscanf(e.Content, "writer %d entry %d", &w, &i); err != nil {
			t.Fatalf("unexpected entry %q", e.Content)
		}
		if i != next[w] {
			t.Fatalf("writer %d: found entry %d where %d was due", w, i, next[w])
		}
		next[w]++
	}
}

func testConcurrentBackendUpdatesLoseNothing(t *testing.T, b docstore.Backend) {
	const writers, perWriter = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	increment := func(old []byte, exists bool) ([]byte, error) {
		n := 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(old)); err != nil {
				return nil, err
			}
		}
		return []byte(strconv.Itoa(n + 1)), nil
	}
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				if err := b.Update(context.Background(), ns, docstore.MemoryFile, increment); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	data, err := b.Read(context.Background(), ns, docstore.MemoryFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != strconv.Itoa(writers*perWriter) {
		t.Fatalf("counter = %q after %d increments", data, writers*perWriter)
	}
}

func testUpdateCallbackErrorWritesNothing(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	boom := errors.New("boom")
	err := b.Update(ctx, ns, docstore.MemoryFile, func([]byte, bool) ([]byte, error) { return nil, boom })
	mustErrorIs(t, err, boom, "Update whose callback fails")
	if _, err := b.Read(ctx, ns, docstore.MemoryFile); !errors.Is(err, docstore.ErrNotFound) {
		t.Fatalf("file written although the callback failed: %v", err)
	}
	if err := b.Put(ctx, ns, docstore.MemoryFile, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	err = b.Update(ctx, ns, docstore.MemoryFile, func(old []byte, exists bool) ([]byte, error) {
		if !exists || string(old) != "v1" {
			return nil, fmt.Errorf("callback got %q, exists=%v; want \"v1\", true", old, exists)
		}
		return nil, boom
	})
	mustErrorIs(t, err, boom, "Update whose callback fails")
	if data, err := b.Read(ctx, ns, docstore.MemoryFile); err != nil || string(data) != "v1" {
		t.Fatalf("after a failed update the file is %q, %v; want \"v1\"", data, err)
	}
}

// bulkEntry has content of 1 to 3 lines, so entries differ in size.
func bulkEntry(i int) markdown.Entry {
	lines := make([]string, 1+i%3)
	for j := range lines {
		lines[j] = fmt.Sprintf("fact %d line %d", i, j)
	}
	return entry(i, markdown.CategoryGeneral, strings.Join(lines, "\n"))
}

func testCapacityKeepsNewestWholeEntries(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	var all []markdown.Entry
	dropped := 0
	for batch := range 20 {
		var es []markdown.Entry
		for i := range 10 {
			es = append(es, bulkEntry(batch*10+i))
		}
		all = append(all, es...)
		res, err := s.AppendEntries(ctx, ns, es)
		if err != nil {
			t.Fatal(err)
		}
		dropped += res.Dropped
		lines := markdown.CountLines(readString(t, s, ns, docstore.MemoryFile))
		if lines > docstore.DefaultMaxLines {
			t.Fatalf("batch %d: MEMORY.md has %d lines, over the bound of %d", batch, lines, docstore.DefaultMaxLines)
		}
		if res.Dropped > 0 && lines > docstore.DefaultTargetLines {
			t.Fatalf("batch %d: trimmed MEMORY.md has %d lines, want at most %d", batch, lines, docstore.DefaultTargetLines)
		}
	}
	got := parseFile(t, s, ns, docstore.MemoryFile)
	if dropped == 0 || len(got)+dropped != len(all) {
		t.Fatalf("%d entries kept + %d dropped, want %d in all with some dropped", len(got), dropped, len(all))
	}
	if !sameEntries(got, all[len(all)-len(got):]) {
		t.Fatalf("kept entries are not the newest %d whole entries", len(got))
	}
}

func testEnforceCapacity(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	if n, err := s.EnforceCapacity(ctx, ns); n != 0 || err != nil {
		t.Fatalf("EnforceCapacity on a missing file = %d, %v; want 0, nil", n, err)
	}
	var all []markdown.Entry
	for i := range 200 {
		all = append(all, bulkEntry(i))
	}
	if _, err := s.Replace(ctx, ns, docstore.MemoryFile, []byte(markdown.FormatEntries(all))); err != nil {
		t.Fatal(err)
	}
	n, err := s.EnforceCapacity(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	doc := readString(t, s, ns, docstore.MemoryFile)
	got := parseFile(t, s, ns, docstore.MemoryFile)
	if lines := markdown.CountLines(doc); lines > docstore.DefaultTargetLines {
		t.Fatalf("MEMORY.md has %d lines after EnforceCapacity, want at most %d", lines, docstore.DefaultTargetLines)
	}
	if n == 0 || len(got)+n != len(all) || !sameEntries(got, all[n:]) {
		t.Fatalf("dropped %d, kept %d: want the newest entries kept and the count to add up to %d", n, len(got), len(all))
	}
	if n, err := s.EnforceCapacity(ctx, ns); n != 0 || err != nil {
		t.Fatalf("second EnforceCapacity = %d, %v; want 0, nil", n, err)
	}
}

func testReplaceBacksUpEveryTime(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	clk := NewClock()
	s := newStore(t, b, docstore.Config{Now: clk.Now})
	versions := []string{"v1\n", "v2\n", "v3\n", "v4\n"}
	wantBackups := []string{"", "backups/20261123_101500_MEMORY.md", "backups/20261123_101500_1_MEMORY.md", "backups/20261123_101501_MEMORY.md"}
	for i, v := range versions {
		if i == 3 {
			clk.Advance(time.Second)
		}
		backup, err := s.Replace(ctx, ns, docstore.MemoryFile, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		if backup != wantBackups[i] {
			t.Fatalf("replace %d: backup %q, want %q", i, backup, wantBackups[i])
		}
		if i > 0 {
			if got := readString(t, s, ns, backup); got != versions[i-1] {
				t.Fatalf("backup %s holds %q, want the previous content %q", backup, got, versions[i-1])
			}
		}
		if got := readString(t, s, ns, docstore.MemoryFile); got != v {
			t.Fatalf("MEMORY.md = %q after replace, want %q", got, v)
		}
	}
	backups, err := s.Backups(ctx, ns)
	if err != nil || strings.Join(backups, ",") != strings.Join(wantBackups[1:], ",") {
		t.Fatalf("Backups = %v, %v; want %v oldest first", backups, err, wantBackups[1:])
	}

	// Topic files and daily notes are backed up under their base names.
	for _, name := range []string{docstore.FilePatternsFile, "202611/20261123.md"} {
		for _, v := range []string{"old\n", "new\n"} {
			if _, err := s.Replace(ctx, ns, name, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		want := "backups/20261123_101501_" + name[strings.LastIndexByte(name, '/')+1:]
		if got := readString(t, s, ns, want); got != "old\n" {
			t.Fatalf("backup %s = %q, want \"old\\n\"", want, got)
		}
	}
	_, err = s.Replace(ctx, ns, docstore.PolicyOverridesFile, []byte("{}"))
	mustErrorIs(t, err, docstore.ErrInvalidPath, "Replace of policy_overrides.json")
}

func testRestore(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	for _, v := range []string{"v1\n", "v2\n"} {
		if _, err := s.Replace(ctx, ns, docstore.MemoryFile, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	backups, err := s.Backups(ctx, ns)
	if err != nil || len(backups) != 1 {
		t.Fatalf("Backups = %v, %v; want one", backups, err)
	}
	// A bare base name is accepted too.
	if err := s.Restore(ctx, ns, strings.TrimPrefix(backups[0], "backups/")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, s, ns, docstore.MemoryFile); got != "v1\n" {
		t.Fatalf("MEMORY.md = %q after restore, want \"v1\\n\"", got)
	}
	after, err := s.Backups(ctx, ns)
	if err != nil || len(after) != 2 {
		t.Fatalf("Backups after restore = %v, %v; want the restore's own backup too", after, err)
	}
	if got := readString(t, s, ns, after[1]); got != "v2\n" {
		t.Fatalf("restore's backup %s = %q, want the overwritten \"v2\\n\"", after[1], got)
	}
	mustErrorIs(t, s.Restore(ctx, ns, "backups/20200101_000000_MEMORY.md"), docstore.ErrNotFound, "Restore of a missing backup")
	mustErrorIs(t, s.Restore(ctx, ns, "MEMORY.md"), docstore.ErrInvalidPath, "Restore of a non-backup")
}

func testRouting(t *testing.T, b docstore.Backend) {
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	es := []markdown.Entry{
		entry(0, markdown.CategoryFilePattern, "sales.csv: date, product, qty"),
		entry(1, markdown.CategoryUserPref, "charts in blue"),
		entry(2, markdown.CategoryErrorSolution, "KeyError 'qty': strip header spaces"),
		entry(3, markdown.CategoryGeneral, "works in Berlin"),
	}
	res, err := s.AppendEntries(context.Background(), ns, es)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]markdown.Entry{
		docstore.FilePatternsFile: {es[0]},
		docstore.UserPrefsFile:    {es[1]},
		docstore.MemoryFile:       {es[2], es[3]},
	}
	for file, w := range want {
		if res.Appended[file] != len(w) {
			t.Fatalf("Appended[%s] = %d, want %d", file, res.Appended[file], len(w))
		}
		if got := parseFile(t, s, ns, file); !sameEntries(got, w) {
			t.Fatalf("%s holds %v, want %v", file, got, w)
		}
		if docstore.RouteCategory(w[0].Category) != file {
			t.Fatalf("RouteCategory(%s) = %s, want %s", w[0].Category, docstore.RouteCategory(w[0].Category), file)
		}
	}
}

func testIdempotentReappend(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	es := []markdown.Entry{
		entry(0, markdown.CategoryGeneral, "a"),
		entry(0, markdown.CategoryGeneral, "b"),
		entry(1, markdown.CategoryUserPref, "c"),
	}
	if _, err := s.AppendEntries(ctx, ns, es); err != nil {
		t.Fatal(err)
	}
	before := readString(t, s, ns, docstore.MemoryFile)
	res, err := s.AppendEntries(ctx, ns, es)
	if err != nil || res.Skipped != 3 || appendedTotal(res) != 0 {
		t.Fatalf("redelivery: %+v, %v; want all 3 skipped", res, err)
	}
	if after := readString(t, s, ns, docstore.MemoryFile); after != before {
		t.Fatalf("redelivery changed MEMORY.md:\n%s\nwas:\n%s", after, before)
	}
	// Same time and content in another category, or the same entry twice in a call.
	other := entry(0, markdown.CategoryErrorSolution, "a")
	res, err = s.AppendEntries(ctx, ns, []markdown.Entry{es[0], other, other})
	if err != nil || appendedTotal(res) != 1 || res.Skipped != 2 {
		t.Fatalf("partial redelivery: %+v, %v; want 1 appended, 2 skipped", res, err)
	}
	if got := parseFile(t, s, ns, docstore.MemoryFile); !sameEntries(got, []markdown.Entry{es[0], es[1], other}) {
		t.Fatalf("MEMORY.md holds %v", got)
	}
}

func testInvalidEntriesRejected(t *testing.T, b docstore.Backend) {
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	for _, e := range []markdown.Entry{
		entry(0, "gossip", "x"),
		entry(0, markdown.CategoryGeneral, ""),
		entry(0, markdown.CategoryGeneral, "a\n---\nb"),
		{Category: markdown.CategoryGeneral, Content: "no time"},
	} {
		_, err := s.AppendEntries(context.Background(), ns, []markdown.Entry{entry(5, markdown.CategoryGeneral, "fine"), e})
		mustErrorIs(t, err, docstore.ErrInvalidContent, fmt.Sprintf("AppendEntries(%+v)", e))
	}
	if files, err := s.Files(context.Background(), ns); err != nil || len(files) != 0 {
		t.Fatalf("a rejected call wrote %v, %v", files, err)
	}
}

func testHeadReturnsMinOfNAndLines(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	const autoLoad = 7
	s := newStore(t, b, docstore.Config{AutoLoadLines: autoLoad, Now: NewClock().Now})
	if head, err := s.Head(ctx, ns, 0); head != "" || err != nil {
		t.Fatalf("Head of a missing MEMORY.md = %q, %v; want \"\", nil", head, err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		lines := rapid.SliceOfN(rapid.StringMatching(`[a-z #]{0,12}`), 0, 40).Draw(rt, "lines")
		n := rapid.IntRange(-2, 50).Draw(rt, "n")
		doc := ""
		for _, l := range lines {
			doc += l + "\n"
		}
		if err := b.Put(ctx, ns, docstore.MemoryFile, []byte(doc)); err != nil {
			rt.Fatal(err)
		}
		head, err := s.Head(ctx, ns, n)
		if err != nil {
			rt.Fatal(err)
		}
		want := n
		if n <= 0 {
			want = autoLoad
		}
		want = min(want, len(lines))
		if got := markdown.CountLines(head); got != want || !strings.HasPrefix(doc, head) {
			rt.Fatalf("Head(%d) of %d lines = %d lines %q; want the first %d", n, len(lines), got, head, want)
		}
	})
}

func testLongTermAppend(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	clk := NewClock()
	s := newStore(t, b, docstore.Config{Now: clk.Now})
	e := entry(0, markdown.CategoryGeneral, "existing fact")
	if _, err := s.AppendEntries(ctx, ns, []markdown.Entry{e}); err != nil {
		t.Fatal(err)
	}
	before := readString(t, s, ns, docstore.MemoryFile)
	if err := s.AppendLongTerm(ctx, ns, "Prefers metric units."); err != nil {
		t.Fatal(err)
	}
	day1 := clk.Now()
	clk.Advance(24 * time.Hour)
	if err := s.AppendLongTerm(ctx, ns, "Moved to Lisbon."); err != nil {
		t.Fatal(err)
	}
	doc := readString(t, s, ns, docstore.MemoryFile)
	first := markdown.FormatLongTerm(day1, "Prefers metric units.")
	second := markdown.FormatLongTerm(clk.Now(), "Moved to Lisbon.")
	i, j := strings.Index(doc, first), strings.Index(doc, second)
	if !strings.HasPrefix(doc, before) || i < len(before) || j < i+len(first) {
		t.Fatalf("long-term appends must follow the existing content in order; MEMORY.md:\n%s", doc)
	}
	// One format in MEMORY.md: a long-term append is an entry of category
	// general, dated, beside the extractor's.
	appended := []markdown.Entry{e, {Time: day1, Category: markdown.CategoryGeneral, Content: "Prefers metric units."},
		{Time: clk.Now(), Category: markdown.CategoryGeneral, Content: "Moved to Lisbon."}}
	if got := parseFile(t, s, ns, docstore.MemoryFile); !sameEntries(got, appended) {
		t.Fatalf("entries after long-term appends: %v, want %v", got, appended)
	}
	mustErrorIs(t, s.AppendLongTerm(ctx, ns, " \n"), docstore.ErrInvalidContent, "AppendLongTerm of nothing")
	if readString(t, s, ns, docstore.MemoryFile) != doc {
		t.Fatal("a rejected long-term append changed MEMORY.md")
	}
}

func testDailyNotes(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	clk := NewClock()
	s := newStore(t, b, docstore.Config{Now: clk.Now})
	t1 := clk.Now()
	name, err := s.AppendToday(ctx, ns, "Opened sales.csv.")
	if err != nil || name != "202611/20261123.md" {
		t.Fatalf("AppendToday = %q, %v; want 202611/20261123.md", name, err)
	}
	clk.Advance(time.Hour)
	if name2, err := s.AppendToday(ctx, ns, "Plotted it."); err != nil || name2 != name {
		t.Fatalf("second AppendToday = %q, %v; want the same note %q", name2, err, name)
	}
	doc := readString(t, s, ns, name)
	first, second := markdown.FormatDailyNote(t1, "Opened sales.csv."), markdown.FormatDailyNote(clk.Now(), "Plotted it.")
	if !strings.HasPrefix(doc, first) || !strings.HasSuffix(doc, second) || len(doc) < len(first)+len(second) {
		t.Fatalf("daily note does not hold both appends in order:\n%s", doc)
	}
	clk.Advance(14 * time.Hour) // past midnight UTC
	if name3, err := s.AppendToday(ctx, ns, "Next day."); err != nil || name3 != "202611/20261124.md" {
		t.Fatalf("AppendToday the next day = %q, %v", name3, err)
	}
	if readString(t, s, ns, name) != doc {
		t.Fatal("the next day's append changed yesterday's note")
	}
}

func testRecentDailyNotesWindow(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	clk := NewClock()
	s := newStore(t, b, docstore.Config{Now: clk.Now})
	today := Start
	// Notes 6 days ago to tomorrow, except yesterday, and two in earlier months:
	// windows of one, two and four month directories.
	for _, d := range []int{-83, -26, -6, -5, -4, -3, -2, 0, 1} {
		clk.Set(today.AddDate(0, 0, d))
		if _, err := s.AppendToday(ctx, ns, fmt.Sprintf("note of day %d", d)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(today)
	check := func(days int, wantDays ...int) {
		t.Helper()
		notes, err := s.RecentDailyNotes(ctx, ns, days)
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) != len(wantDays) {
			t.Fatalf("RecentDailyNotes(%d) gave %d notes, want %d", days, len(notes), len(wantDays))
		}
		for i, d := range wantDays {
			day := time.Date(2026, 11, 23+d, 0, 0, 0, 0, time.UTC) // normalised across months
			n := notes[i]
			if !n.Day.Equal(day) || n.Name != markdown.DailyNoteName(day) || !strings.Contains(n.Content, fmt.Sprintf("note of day %d", d)) {
				t.Fatalf("RecentDailyNotes(%d)[%d] = %+v, want the note of %s", days, i, n, day.Format(time.DateOnly))
			}
		}
	}
	check(0)
	check(1, 0)
	check(3, 0, -2)
	check(30, 0, -2, -3, -4, -5, -6, -26)
	check(90, 0, -2, -3, -4, -5, -6, -26, -83)
}

func testPolicyOverrides(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	overrides := func() string {
		t.Helper()
		data, ok, err := s.PolicyOverrides(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<none>"
		}
		return string(data)
	}
	snapshotValue := func(name string) map[string]int {
		t.Helper()
		var m map[string]int
		if err := json.Unmarshal([]byte(readString(t, s, ns, name)), &m); err != nil {
			t.Fatalf("snapshot %s: %v", name, err)
		}
		return m
	}
	if got := overrides(); got != "<none>" {
		t.Fatalf("fresh overrides = %s", got)
	}
	first, second := `{"retrieve_limit":5}`, `{"retrieve_limit":7}`
	s1, err := s.SetPolicyOverrides(ctx, ns, []byte(first))
	if err != nil || s1 != "policy_snapshots/20261123_101500.json" || len(snapshotValue(s1)) != 0 {
		t.Fatalf("first SetPolicyOverrides: snapshot %q, %v; want an empty-object snapshot at 20261123_101500", s1, err)
	}
	s2, err := s.SetPolicyOverrides(ctx, ns, []byte(second))
	if err != nil || s2 != "policy_snapshots/20261123_101500_1.json" || snapshotValue(s2)["retrieve_limit"] != 5 {
		t.Fatalf("second SetPolicyOverrides: snapshot %q, %v; want one holding the first overrides", s2, err)
	}
	if got := overrides(); got != second {
		t.Fatalf("overrides = %s, want %s", got, second)
	}
	if err := s.RestorePolicySnapshot(ctx, ns, s2); err != nil {
		t.Fatal(err)
	}
	if got := overrides(); got != first {
		t.Fatalf("overrides after restoring %s = %s, want %s", s2, got, first)
	}
	if err := s.DeletePolicyOverrides(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if got := overrides(); got != "<none>" {
		t.Fatalf("overrides after delete = %s", got)
	}
	snaps, err := s.PolicySnapshots(ctx, ns)
	if err != nil || len(snaps) != 4 || snaps[0] != s1 || snaps[1] != s2 {
		t.Fatalf("PolicySnapshots = %v, %v; want 4, oldest first", snaps, err)
	}
	if snapshotValue(snaps[2])["retrieve_limit"] != 7 || snapshotValue(snaps[3])["retrieve_limit"] != 5 {
		t.Fatalf("restore and delete must snapshot what they replace: %v, %v", snapshotValue(snaps[2]), snapshotValue(snaps[3]))
	}
	for _, bad := range []string{`[1]`, `null`, `nope`, `"x"`, ``} {
		_, err := s.SetPolicyOverrides(ctx, ns, []byte(bad))
		mustErrorIs(t, err, docstore.ErrInvalidContent, "SetPolicyOverrides("+bad+")")
	}
	if after, _ := s.PolicySnapshots(ctx, ns); len(after) != len(snaps) || overrides() != "<none>" {
		t.Fatal("a rejected SetPolicyOverrides wrote something")
	}
	mustErrorIs(t, s.RestorePolicySnapshot(ctx, ns, "MEMORY.md"), docstore.ErrInvalidPath, "RestorePolicySnapshot of a non-snapshot")
}

func testLastCompressStamp(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	if _, ok, err := s.LastLongTermCompress(ctx, ns); ok || err != nil {
		t.Fatalf("fresh stamp: ok %v, %v", ok, err)
	}
	want := time.Date(2026, 11, 23, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	if err := s.SetLastLongTermCompress(ctx, ns, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LastLongTermCompress(ctx, ns)
	if err != nil || !ok || !got.Equal(want) {
		t.Fatalf("stamp = %v, %v, %v; want %v", got, ok, err, want)
	}
	if err := b.Put(ctx, ns, docstore.LastCompressFile, []byte("yesterday")); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.LastLongTermCompress(ctx, ns)
	mustErrorIs(t, err, docstore.ErrInvalidContent, "unparsable stamp")
}

// EscapingNames are names that must never reach storage.
var EscapingNames = []string{
	"", ".", "..", "../x", "/etc/passwd", "a/../../b", "x\x00y", `C:\x`, `..\..\x`,
	"MEMORY.md/", "./MEMORY.md", "backups/../MEMORY.md", "backups//x", "notes.txt",
	"202611/20261199.md", "202612/20261123.md", "backups/x_MEMORY.md", "policy_snapshots/x.json",
	"~/MEMORY.md", "MEMORY.md\n",
}

// EscapingNamespaces are namespaces that must never reach storage.
var EscapingNamespaces = []docstore.Namespace{
	{Tenant: "a.b", User: "u1"}, {Tenant: "acme", User: ".."}, {Tenant: "", User: "u1"},
	{Tenant: "acme", User: "a/b"}, {Tenant: "*", User: "u1"}, {Tenant: "acme", User: ">"},
	{Tenant: "acme", User: "u1\x00"},
}

func testEscapesRejected(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, docstore.Config{Now: NewClock().Now})
	keep := func([]byte, bool) ([]byte, error) { return []byte("x"), nil }
	for _, name := range EscapingNames {
		what := fmt.Sprintf("name %q", name)
		mustErrorIs(t, docstore.ValidateName(name), docstore.ErrInvalidPath, "ValidateName("+what+")")
		_, err := s.ReadFile(ctx, ns, name)
		mustErrorIs(t, err, docstore.ErrInvalidPath, "ReadFile "+what)
		_, err = s.Replace(ctx, ns, name, []byte("x"))
		mustErrorIs(t, err, docstore.ErrInvalidPath, "Replace "+what)
		mustErrorIs(t, s.Restore(ctx, ns, name), docstore.ErrInvalidPath, "Restore "+what)
		mustErrorIs(t, s.RestorePolicySnapshot(ctx, ns, name), docstore.ErrInvalidPath, "RestorePolicySnapshot "+what)
		_, err = b.Read(ctx, ns, name)
		mustErrorIs(t, err, docstore.ErrInvalidPath, "Backend.Read "+what)
		mustErrorIs(t, b.Put(ctx, ns, name, []byte("x")), docstore.ErrInvalidPath, "Backend.Put "+what)
		mustErrorIs(t, b.Update(ctx, ns, name, keep), docstore.ErrInvalidPath, "Backend.Update "+what)
		mustErrorIs(t, b.Delete(ctx, ns, name), docstore.ErrInvalidPath, "Backend.Delete "+what)
		if name != "" {
			_, err = b.List(ctx, ns, name)
			if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\x00\\") {
				mustErrorIs(t, err, docstore.ErrInvalidPath, "Backend.List "+what)
			}
		}
	}
	e := []markdown.Entry{entry(0, markdown.CategoryGeneral, "x")}
	for _, bad := range EscapingNamespaces {
		what := fmt.Sprintf("namespace %+v", bad)
		_, err := s.AppendEntries(ctx, bad, e)
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "AppendEntries "+what)
		mustErrorIs(t, s.AppendLongTerm(ctx, bad, "x"), docstore.ErrInvalidNamespace, "AppendLongTerm "+what)
		_, err = s.AppendToday(ctx, bad, "x")
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "AppendToday "+what)
		_, err = s.Replace(ctx, bad, docstore.MemoryFile, []byte("x"))
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "Replace "+what)
		_, err = s.SetPolicyOverrides(ctx, bad, []byte("{}"))
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "SetPolicyOverrides "+what)
		mustErrorIs(t, s.SetLastLongTermCompress(ctx, bad, time.Now()), docstore.ErrInvalidNamespace, "SetLastLongTermCompress "+what)
		_, err = s.Head(ctx, bad, 1)
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "Head "+what)
		_, err = s.Files(ctx, bad)
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "Files "+what)
		mustErrorIs(t, b.Put(ctx, bad, docstore.MemoryFile, []byte("x")), docstore.ErrInvalidNamespace, "Backend.Put "+what)
		mustErrorIs(t, b.Update(ctx, bad, docstore.MemoryFile, keep), docstore.ErrInvalidNamespace, "Backend.Update "+what)
		_, err = b.List(ctx, bad, "")
		mustErrorIs(t, err, docstore.ErrInvalidNamespace, "Backend.List "+what)
	}
	// Nothing was written anywhere a valid namespace could see it, including the
	// namespaces that a dotted tenant would alias in a subject-based key space.
	for _, n := range []docstore.Namespace{ns, {Tenant: "a", User: "b"}, {Tenant: "acme", User: "u1"}} {
		if files, err := b.List(ctx, n, ""); err != nil || len(files) != 0 {
			t.Fatalf("namespace %+v holds %v, %v after rejected writes", n, files, err)
		}
	}
}

func testAppendEntriesRoundTrip(t *testing.T, b docstore.Backend) {
	s := newStore(t, b, unbounded(NewClock()))
	categories := []markdown.Category{markdown.CategoryFilePattern, markdown.CategoryUserPref, markdown.CategoryErrorSolution, markdown.CategoryGeneral}
	var cases atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		n := docstore.Namespace{Tenant: "prop", User: fmt.Sprintf("case%d", cases.Add(1))}
		pool := rapid.SliceOfNDistinct(rapid.Custom(func(rt *rapid.T) markdown.Entry {
			return entry(rapid.IntRange(0, 5).Draw(rt, "minute"), rapid.SampledFrom(categories).Draw(rt, "category"),
				rapid.StringMatching(`[a-z]{1,6}( [a-z]{1,6}){0,3}(\n[A-Za-z ,.:]{0,20}){0,2}\n?[a-z]{1,6}`).Draw(rt, "content"))
		}), 1, 12, markdown.FormatEntry).Draw(rt, "pool")
		calls := rapid.SliceOfN(rapid.SliceOfN(rapid.SampledFrom(pool), 0, 5), 1, 6).Draw(rt, "calls")

		want := make(map[string][]markdown.Entry)
		seen := make(map[string]bool)
		total, appended, skipped := 0, 0, 0
		for _, call := range calls {
			res, err := s.AppendEntries(context.Background(), n, call)
			if err != nil {
				rt.Fatal(err)
			}
			appended += appendedTotal(res)
			skipped += res.Skipped
			total += len(call)
			for _, e := range call {
				if key := markdown.FormatEntry(e); !seen[key] {
					seen[key] = true
					file := docstore.RouteCategory(e.Category)
					want[file] = append(want[file], e)
				}
			}
		}
		if appended != len(seen) || skipped != total-len(seen) {
			rt.Fatalf("reported %d appended, %d skipped; want %d and %d", appended, skipped, len(seen), total-len(seen))
		}
		for _, file := range []string{docstore.MemoryFile, docstore.FilePatternsFile, docstore.UserPrefsFile} {
			if got := parseFile(rt, s, n, file); !sameEntries(got, want[file]) {
				rt.Fatalf("%s parses to %v, want %v", file, got, want[file])
			}
		}
	})
}

// testReadIfChangedSeesEveryWrite: a reader that keeps what ReadIfChanged returned
// sees every write, whichever way it was made and even when the size stays the
// same, and is told "unchanged" only for the version it holds.
func testReadIfChangedSeesEveryWrite(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	s := newStore(t, b, unbounded(NewClock()))
	name := docstore.MemoryFile
	_, _, _, err := s.ReadFileIfChanged(ctx, ns, name, docstore.Version{})
	mustErrorIs(t, err, docstore.ErrNotFound, "ReadIfChanged of a missing file")

	var held docstore.Version
	expect := func(step, want string) {
		t.Helper()
		data, v, changed, err := s.ReadFileIfChanged(ctx, ns, name, held)
		if err != nil || !changed || string(data) != want {
			t.Fatalf("after %s: ReadIfChanged = %q, changed %v, %v; want %q, changed", step, data, changed, err, want)
		}
		// Asked again at the version it gave: unchanged, or the same content again
		// from a backend that cannot vouch for it.
		data, again, changed, err := s.ReadFileIfChanged(ctx, ns, name, v)
		switch {
		case err != nil:
			t.Fatalf("after %s: second ReadIfChanged: %v", step, err)
		case !changed && (v == docstore.Version{} || again != v):
			t.Fatalf("after %s: unchanged at version %v, reported as %v", step, v, again)
		case changed && string(data) != want:
			t.Fatalf("after %s: second ReadIfChanged = %q; want %q", step, data, want)
		}
		held = again
	}
	put := func(text string) {
		t.Helper()
		if err := b.Put(ctx, ns, name, []byte(text)); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	put("version 1\n")
	expect("a Put", "version 1\n")
	put("version 2\n") // same size
	expect("a Put of the same size", "version 2\n")
	if err := b.Update(ctx, ns, name, func([]byte, bool) ([]byte, error) { return []byte("version 3\n"), nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	expect("an Update", "version 3\n")
	if _, err := s.Replace(ctx, ns, name, []byte("version 4\n")); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	expect("a Replace", "version 4\n")
	if err := b.Delete(ctx, ns, name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, _, _, err = s.ReadFileIfChanged(ctx, ns, name, held)
	mustErrorIs(t, err, docstore.ErrNotFound, "ReadIfChanged of a deleted file")
	put("version 5\n")
	expect("a Put after a Delete", "version 5\n")
}

// testPutFileUsersDeleteNamespace checks the export/import/forget primitives:
// PutFile restores bytes exactly (also in chunks), Users lists the namespaces of
// a tenant, Tenants the tenants, DeleteNamespace leaves nothing of one namespace and every other.
func testPutFileUsersDeleteNamespace(t *testing.T, b docstore.Backend) {
	ctx := context.Background()
	clk := NewClock()
	s := newStore(t, b, unbounded(clk))
	other := docstore.Namespace{Tenant: ns.Tenant, User: "u2"}
	elsewhere := docstore.Namespace{Tenant: "other", User: ns.User}
	for _, n := range []docstore.Namespace{ns, other, elsewhere} {
		if err := s.AppendLongTerm(ctx, n, "- fact of "+n.User); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Replace(ctx, ns, docstore.MemoryFile, []byte("# replaced\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(ctx, ns, docstore.UserPrefsFile, 0, []byte("- likes ")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(ctx, ns, docstore.UserPrefsFile, len("- likes "), []byte("tea\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadFile(ctx, ns, docstore.UserPrefsFile); err != nil || string(got) != "- likes tea\n" {
		t.Fatalf("chunked PutFile = %q, %v", got, err)
	}
	if err := s.PutFile(ctx, ns, docstore.UserPrefsFile, 100, []byte("x")); !errors.Is(err, docstore.ErrInvalidContent) {
		t.Fatalf("PutFile past the end: %v, want ErrInvalidContent", err)
	}
	if err := s.PutFile(ctx, ns, "../escape.md", 0, []byte("x")); !errors.Is(err, docstore.ErrInvalidPath) {
		t.Fatalf("PutFile outside the layout: %v, want ErrInvalidPath", err)
	}
	users, err := s.Users(ctx, ns.Tenant)
	if err != nil || !slices.Equal(users, []string{ns.User, other.User}) {
		t.Fatalf("Users = %v, %v", users, err)
	}
	if tenants, err := s.Tenants(ctx); err != nil || !slices.Equal(tenants, []string{ns.Tenant, elsewhere.Tenant}) {
		t.Fatalf("Tenants = %v, %v; want %s and %s", tenants, err, ns.Tenant, elsewhere.Tenant)
	}
	files, err := s.Files(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteNamespace(ctx, ns)
	if err != nil || n != len(files) || n < 3 {
		t.Fatalf("DeleteNamespace = %d, %v; the namespace had %v", n, err, files)
	}
	if left, err := s.Files(ctx, ns); err != nil || len(left) != 0 {
		t.Fatalf("files left: %v, %v", left, err)
	}
	if users, err := s.Users(ctx, ns.Tenant); err != nil || !slices.Equal(users, []string{other.User}) {
		t.Fatalf("Users after delete = %v, %v", users, err)
	}
	for _, n := range []docstore.Namespace{other, elsewhere} {
		if got, err := s.Head(ctx, n, 0); err != nil || !strings.Contains(got, "fact of "+n.User) {
			t.Fatalf("namespace %v after another's delete: %q, %v", n, got, err)
		}
	}
	if n, err := s.DeleteNamespace(ctx, ns); err != nil || n != 0 {
		t.Fatalf("second DeleteNamespace = %d, %v", n, err)
	}
}
