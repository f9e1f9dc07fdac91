package kvcas_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/kvcas"
)

// onDisk reports whether any file under dir holds s.
func onDisk(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		found = found || bytes.Contains(data, []byte(s))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// jsIn is JetStream on a server storing in dir.
func jsIn(t *testing.T, dir string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(bustest.Connect(t, bustest.StartServerIn(t, dir)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// EraseStream leaves no byte of the erased subjects' messages in the stream's
// files, and keeps every message of the other subjects.
func TestEraseStreamOverwrites(t *testing.T) {
	dir := t.TempDir()
	js := jsIn(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ev", Subjects: []string{"ev.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		for _, u := range []string{"u1", "u2"} {
			if _, err := js.Publish(ctx, "ev.t."+u, fmt.Appendf(nil, "secret-of-%s %d", u, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	subjects, msgs, err := kvcas.EraseStream(ctx, js, "ev", "ev.t.u1")
	if err != nil || subjects != 1 || msgs != 40 {
		t.Fatalf("EraseStream = %d subjects, %d messages, %v; want 1, 40", subjects, msgs, err)
	}
	if onDisk(t, dir, "secret-of-u1") {
		t.Error("an erased message is still in the stream's files")
	}
	st, err := js.Stream(ctx, "ev")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("ev.>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 || info.State.Subjects["ev.t.u2"] != 40 {
		t.Errorf("kept subjects %v, want ev.t.u2 with its 40 messages", info.State.Subjects)
	}
	if m, err := st.GetLastMsgForSubject(ctx, "ev.t.u2"); err != nil || string(m.Data) != "secret-of-u2 39" {
		t.Errorf("the other subject's last message: %v", err)
	}
}

// A sealed bucket stores no plaintext of a user's values, reads them back
// (from another process's keyring too), keeps values no user owns and those
// written before it was sealed readable, and after Erase reads the user's
// values as missing while the other user's stay.
func TestSealedKV(t *testing.T) {
	dir := t.TempDir()
	js := jsIn(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	raw, err := kvcas.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: "state", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "acme.u2.old", []byte(`{"legacy":true}`)); err != nil {
		t.Fatal(err)
	}
	ring, err := kvcas.NewKeyring(ctx, js, kvcas.KeyringConfig{})
	if err != nil {
		t.Fatal(err)
	}
	kv := kvcas.Sealed(raw, ring, kvcas.OwnerAt(0))
	values := map[string]string{"acme.u1.s1": "u1 canary Zx81", "acme.u2.s1": "u2 canary Qy27", "global": "no owner"}
	for k, v := range values {
		rev, err := kv.Create(ctx, k, []byte(v+" draft"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Update(ctx, k, []byte(v), rev); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"Zx81", "Qy27"} {
		if onDisk(t, dir, s) {
			t.Errorf("%s is on disk in plaintext", s)
		}
	}
	if !onDisk(t, dir, "no owner") {
		t.Error("a value no user owns was sealed")
	}
	other, err := kvcas.NewKeyring(ctx, js, kvcas.KeyringConfig{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(kv jetstream.KeyValue, k string) (string, error) {
		e, err := kv.Get(ctx, k)
		if err != nil {
			return "", err
		}
		return string(e.Value()), nil
	}
	for k, v := range values {
		for i, r := range []jetstream.KeyValue{kv, kvcas.Sealed(raw, other, kvcas.OwnerAt(0))} {
			if got, err := read(r, k); err != nil || got != v {
				t.Errorf("keyring %d: %s = %q, %v; want %q", i, k, got, err, v)
			}
		}
	}
	if got, err := read(kv, "acme.u2.old"); err != nil || got != `{"legacy":true}` {
		t.Errorf("value written before sealing: %q, %v", got, err)
	}
	keys, err := js.Stream(ctx, kvcas.DefaultKeyringStream)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.GetLastMsgForSubject(ctx, "amkeys.acme.u1")
	if err != nil || !onDisk(t, dir, string(key.Data)) {
		t.Fatalf("u1's key: %v (or not on disk: the check below would prove nothing)", err)
	}
	if err := ring.Erase(ctx, "acme", "u1"); err != nil {
		t.Fatal(err)
	}
	if onDisk(t, dir, string(key.Data)) {
		t.Error("u1's erased key is still on disk")
	}
	// Another process reads the key again (its cache lasts seconds at most).
	later, err := kvcas.NewKeyring(ctx, js, kvcas.KeyringConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(kvcas.Sealed(raw, later, kvcas.OwnerAt(0)), "acme.u1.s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("after Erase, u1's value reads %v in another process; want ErrKeyNotFound", err)
	}
	if _, err := read(kv, "acme.u1.s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("after Erase, u1's value reads %v through the erasing keyring; want ErrKeyNotFound", err)
	}
	if got, err := read(kv, "acme.u2.s1"); err != nil || got != values["acme.u2.s1"] {
		t.Errorf("after u1's Erase, u2's value: %q, %v", got, err)
	}
}
