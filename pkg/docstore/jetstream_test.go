package docstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/docstore/docstoretest"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/markdown"
)

func newJetStreamContext(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(bustest.Connect(t, bustest.StartServer(t)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func newJetStream(t *testing.T, js jetstream.JetStream, bucket string) *docstore.JetStream {
	t.Helper()
	b, err := docstore.NewJetStream(context.Background(), docstore.JetStreamConfig{Bucket: bucket}, js, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewJetStream: %v", err)
	}
	return b
}

func TestJetStreamConformance(t *testing.T) {
	js := newJetStreamContext(t)
	var buckets atomic.Int64
	docstoretest.RunSuite(t, func(t *testing.T) docstore.Backend {
		return newJetStream(t, js, fmt.Sprintf("docs_%d", buckets.Add(1)))
	})
}

// With a keyring every value is sealed with its user's key: the backend
// behaves the same, the bucket holds no plaintext, and once the user's key is
// erased (forget) nothing of theirs reads back while another user's does.
func TestJetStreamSealedWithTheUsersKey(t *testing.T) {
	ctx := context.Background()
	js := newJetStreamContext(t)
	ring, err := kvcas.NewKeyring(ctx, js, kvcas.KeyringConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(t *testing.T, bucket string) *docstore.JetStream {
		b, err := docstore.NewJetStream(ctx, docstore.JetStreamConfig{Bucket: bucket, Keyring: ring}, js, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var buckets atomic.Int64
	docstoretest.RunSuite(t, func(t *testing.T) docstore.Backend {
		return sealed(t, fmt.Sprintf("sealed_%d", buckets.Add(1)))
	})

	b := sealed(t, "docs")
	bob := docstore.Namespace{Tenant: acme.Tenant, User: "bob"}
	for _, ns := range []docstore.Namespace{acme, bob} {
		if err := b.Put(ctx, ns, docstore.MemoryFile, []byte("vault of "+ns.User)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := js.KeyValue(ctx, "docs")
	if err != nil {
		t.Fatal(err)
	}
	lister, err := raw.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for key := range lister.Keys() {
		e, err := raw.Get(ctx, key)
		if err != nil || bytes.Contains(e.Value(), []byte("vault")) {
			t.Fatalf("key %s holds %q (%v): not sealed", key, e.Value(), err)
		}
	}
	if err := ring.Erase(ctx, acme.Tenant, acme.User); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(ctx, acme, docstore.MemoryFile); !errors.Is(err, docstore.ErrNotFound) {
		t.Fatalf("a forgotten user's file reads %v, want ErrNotFound", err)
	}
	if data, err := b.Read(ctx, bob, docstore.MemoryFile); err != nil || string(data) != "vault of bob" {
		t.Fatalf("the other user's file: %q, %v", data, err)
	}
}

// Two processes' worth of writers, each on its own connection and backend, share
// one bucket; compare-and-set must keep every entry.
func TestJetStreamStoresOnSeparateConnectionsLoseNothing(t *testing.T) {
	const perWriter, writersPerStore = 25, 4
	srv := bustest.StartServer(t)
	var stores []*docstore.Store
	for range 2 {
		js, err := jetstream.New(bustest.Connect(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		cfg := docstore.Config{MaxLines: 1 << 20, TargetLines: 1 << 20, Now: docstoretest.NewClock().Now}
		s, err := docstore.New(cfg, newJetStream(t, js, docstore.DefaultBucket), zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range writersPerStore {
			wg.Go(func() {
				for i := range perWriter {
					e := markdown.Entry{Time: docstoretest.Start, Category: markdown.CategoryGeneral, Content: fmt.Sprintf("store %d writer %d entry %d", si, w, i)}
					if _, err := s.AppendEntries(context.Background(), acme, []markdown.Entry{e}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	data, err := stores[0].ReadFile(context.Background(), acme, docstore.MemoryFile)
	if err != nil {
		t.Fatal(err)
	}
	got, perrs := markdown.ParseEntries(string(data))
	if want := len(stores) * writersPerStore * perWriter; len(got) != want || len(perrs) > 0 {
		t.Fatalf("MEMORY.md has %d entries (%d malformed), want %d", len(got), len(perrs), want)
	}
}

// The documented key layout "<tenant>.<user>.<encoded name>", and the bucket's
// history keeping earlier revisions besides the backups.
func TestJetStreamKeyLayoutAndHistory(t *testing.T) {
	ctx := context.Background()
	js := newJetStreamContext(t)
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, newJetStream(t, js, "docs"), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1\n", "v2\n"} {
		if _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetLastLongTermCompress(ctx, acme, docstoretest.Start); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "docs")
	if err != nil {
		t.Fatal(err)
	}
	history, err := kv.History(ctx, "acme.u1.MEMORY=2Emd")
	if err != nil || len(history) != 2 || string(history[0].Value()) != "v1\n" || string(history[1].Value()) != "v2\n" {
		t.Fatalf("history of acme.u1.MEMORY=2Emd: %d revisions, %v", len(history), err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := "acme.u1.=2Elast_longterm_compress acme.u1.MEMORY=2Emd acme.u1.backups/20261123_101500_MEMORY=2Emd"
	if strings.Join(keys, " ") != want {
		t.Fatalf("keys %v, want %s", keys, want)
	}
}

func TestJetStreamRejectsTooLargeValues(t *testing.T) {
	ctx := context.Background()
	js := newJetStreamContext(t)
	b := newJetStream(t, js, "docs")
	s, err := docstore.New(docstore.Config{Now: docstoretest.NewClock().Now}, b, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, acme, docstore.MemoryFile, []byte("small\n")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), int(js.Conn().MaxPayload())+1) // text: Replace drops NUL bytes
	_, err = s.Replace(ctx, acme, docstore.MemoryFile, big)
	if !errors.Is(err, docstore.ErrTooLarge) {
		t.Fatalf("Replace with %d bytes: %v; want ErrTooLarge", len(big), err)
	}
	if !errors.Is(b.Put(ctx, acme, docstore.UserPrefsFile, big), docstore.ErrTooLarge) {
		t.Fatal("Put of a too large value must fail with ErrTooLarge")
	}
	// Exactly at the limit the value fits but the CAS header does not.
	atLimit := big[:len(big)-1]
	if err := b.Update(ctx, acme, docstore.FilePatternsFile, func([]byte, bool) ([]byte, error) { return atLimit, nil }); !errors.Is(err, docstore.ErrTooLarge) {
		t.Fatalf("Update at the payload limit: %v; want ErrTooLarge", err)
	}
	if data, err := s.ReadFile(ctx, acme, docstore.MemoryFile); err != nil || string(data) != "small\n" {
		t.Fatalf("MEMORY.md = %q, %v after a rejected replace", data, err)
	}
}

func TestJetStreamConfig(t *testing.T) {
	js := newJetStreamContext(t)
	for _, cfg := range []docstore.JetStreamConfig{{Bucket: "a.b"}, {Bucket: "a b"}, {History: 65}} {
		if _, err := docstore.NewJetStream(context.Background(), cfg, js, nil); err == nil {
			t.Fatalf("NewJetStream(%+v) accepted an invalid config", cfg)
		}
	}
	if _, err := docstore.NewJetStream(context.Background(), docstore.JetStreamConfig{}, nil, nil); err == nil {
		t.Fatal("NewJetStream accepted a nil JetStream")
	}
	// An existing bucket is bound as it is, not reconfigured.
	if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: docstore.DefaultBucket, History: 3}); err != nil {
		t.Fatal(err)
	}
	newJetStream(t, js, "")
	kv, err := js.KeyValue(context.Background(), docstore.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil || st.History() != 3 {
		t.Fatalf("bound bucket history = %d, %v; want the existing 3", st.History(), err)
	}
}

var kvKeyToken = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

func TestKeyNameEncodingIsReversibleAndValid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.StringN(1, 64, -1).Draw(rt, "name")
		token := docstore.EncodeKeyName(name)
		if !kvKeyToken.MatchString(token) {
			rt.Fatalf("encoded %q as %q, which is not one KV key token", name, token)
		}
		if back, ok := docstore.DecodeKeyName(token); !ok || back != name {
			rt.Fatalf("decode(encode(%q)) = %q, %v", name, back, ok)
		}
	})
	for _, bad := range []string{"=", "=4", "=zz", "=2e", "a=41"} { // truncated, non-hex, lower case, non-canonical
		if _, ok := docstore.DecodeKeyName(bad); ok {
			t.Fatalf("DecodeKeyName(%q) accepted a token encodeKeyName never makes", bad)
		}
	}
}

// A write from another backend between Update's read and its compare-and-set makes
// Update call fn again on the new value; a key that never settles ends in ErrConflict.
func TestJetStreamUpdateRetriesLostCompareAndSet(t *testing.T) {
	ctx := context.Background()
	js := newJetStreamContext(t)
	mine, other := newJetStream(t, js, "docs"), newJetStream(t, js, "docs")
	calls := 0
	err := mine.Update(ctx, acme, docstore.MemoryFile, func(old []byte, exists bool) ([]byte, error) {
		calls++
		if calls == 1 {
			if exists {
				return nil, fmt.Errorf("first call saw %q", old)
			}
			if err := other.Put(ctx, acme, docstore.MemoryFile, []byte("theirs")); err != nil {
				return nil, err
			}
		}
		return append(old, " + mine"...), nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("Update = %v after %d calls; want success on the second", err, calls)
	}
	if data, err := other.Read(ctx, acme, docstore.MemoryFile); err != nil || string(data) != "theirs + mine" {
		t.Fatalf("value = %q, %v; want the concurrent write kept", data, err)
	}

	calls = 0
	err = mine.Update(ctx, acme, docstore.MemoryFile, func(old []byte, _ bool) ([]byte, error) {
		calls++
		if err := other.Put(ctx, acme, docstore.MemoryFile, fmt.Appendf(nil, "theirs %d", calls)); err != nil {
			return nil, err
		}
		return []byte("mine"), nil
	})
	if !errors.Is(err, docstore.ErrConflict) || calls != 100 {
		t.Fatalf("Update under constant interference = %v after %d calls; want ErrConflict after 100", err, calls)
	}
}

// A bucket keeps 1 to 64 revisions a key (JetStream's bounds), both ends
// included; its name is a KV bucket name.
func TestJetStreamConfigValidateBounds(t *testing.T) {
	for _, c := range []struct {
		cfg docstore.JetStreamConfig
		ok  bool
	}{
		{docstore.JetStreamConfig{Bucket: "docs", History: 1}, true},
		{docstore.JetStreamConfig{Bucket: "docs", History: 64}, true},
		{docstore.JetStreamConfig{Bucket: "docs", History: 0}, false},
		{docstore.JetStreamConfig{Bucket: "docs", History: 65}, false},
		{docstore.JetStreamConfig{Bucket: "", History: 1}, false},
		{docstore.JetStreamConfig{Bucket: "a.b", History: 1}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want valid=%v", c.cfg, err, c.ok)
		}
	}
}

// A nil logger is a valid argument: the backend then logs nowhere.
func TestNewJetStreamWithoutLogger(t *testing.T) {
	_, _, js := bustest.Provisioned(t)
	b, err := docstore.NewJetStream(context.Background(), docstore.JetStreamConfig{}, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(context.Background(), docstore.Namespace{Tenant: "acme", User: "u1"}, docstore.MemoryFile, []byte("x")); err != nil {
		t.Fatal(err)
	}
}
