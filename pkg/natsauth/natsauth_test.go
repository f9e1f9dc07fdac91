package natsauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/natsauth"
)

func authority(t testing.TB, dir string) *natsauth.Authority {
	t.Helper()
	a, err := natsauth.New(natsauth.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startAuthServer starts the embedded server in operator mode trusting a, as `agentmem
// up --auth` does, with a TCP listener.
func startAuthServer(t testing.TB, a *natsauth.Authority) *server.Server {
	t.Helper()
	trust, err := a.Trust()
	if err != nil {
		t.Fatal(err)
	}
	return bustest.StartServerWith(t, bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Auth: &trust})
}

// credsFile issues creds (a tenant's admin, or the service's for tenant "") into a file.
func credsFile(t testing.TB, a *natsauth.Authority, tenant string) string {
	t.Helper()
	return roleCredsFile(t, a, tenant, natsauth.RoleAdmin)
}

// roleCredsFile issues a credential of tenant with role (the service's for tenant
// "") into a file.
func roleCredsFile(t testing.TB, a *natsauth.Authority, tenant string, role natsauth.Role) string {
	t.Helper()
	var (
		creds []byte
		err   error
	)
	if tenant == "" {
		creds, err = a.ServiceCreds()
	} else {
		creds, err = a.TenantCreds(tenant, role)
	}
	return writeCredsFile(t, creds, err)
}

// writeCredsFile writes creds, issued with err, into a file.
func writeCredsFile(t testing.TB, creds []byte, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user.creds")
	if err := natsauth.WriteCreds(path, creds); err != nil {
		t.Fatal(err)
	}
	return path
}

// conn connects in-process with the credentials file and collects the asynchronous
// errors (permission violations) on the returned channel.
func conn(t testing.TB, srv *server.Server, creds string) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 64)
	opts, err := natsauth.ClientOptions(creds)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.InProcessServer(srv), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	nc, err := nats.Connect("", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// wantViolation waits for the permission violation of the last operation on errs.
func wantViolation(t *testing.T, what string, nc *nats.Conn, errs <-chan error) {
	t.Helper()
	_ = nc.Flush()
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("%s: got error %v, want a permissions violation", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the server did not refuse it", what)
	}
}

// provisioned starts an auth server with the event stream and a KV bucket, made by
// the service credential, and returns it with that connection.
func provisioned(t *testing.T, a *natsauth.Authority) (*server.Server, jetstream.JetStream) {
	t.Helper()
	srv := startAuthServer(t, a)
	svc, _ := conn(t, srv, credsFile(t, a, ""))
	js, err := jetstream.New(svc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.ProvisionStreams(ctx, js, bus.StreamConfig{DuplicateWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "secrets"}); err != nil {
		t.Fatal(err)
	}
	// The retriever's stand-in: answers every tenant's memrpc requests with the subject.
	if _, err := svc.QueueSubscribe("memrpc.*.>", "retriever", func(m *nats.Msg) { _ = m.Respond([]byte(m.Subject)) }); err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	return srv, js
}

// Tenant A's credential publishes its observations and session ends into the
// stream (JetStream acknowledges them on A's inbox) and gets replies to its
// requests; tenant B's credential is refused everything of A's and all JetStream.
func TestTenantIsolationOnTheEmbeddedServer(t *testing.T) {
	a := authority(t, t.TempDir())
	srv, svcJS := provisioned(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	credsA := credsFile(t, a, "acme")
	ncA, errsA := conn(t, srv, credsA)
	idA, err := natsauth.InspectFile(credsA)
	if err != nil || idA.Tenant != "acme" || !strings.HasPrefix(idA.InboxPrefix, "_INBOX_acme_") {
		t.Fatalf("identity of A: %+v, %v", idA, err)
	}
	jsA, err := jetstream.New(ncA)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"mem.acme.obs.u1.s1", "mem.acme.ended.u1.s1"} {
		if _, err := jsA.Publish(ctx, subj, []byte(`{}`)); err != nil {
			t.Fatalf("A publishes %s: %v", subj, err)
		}
	}
	stream, err := svcJS.Stream(ctx, "AGENTMEM")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %v messages (%v), want A's 2", info, err)
	}
	rep, err := ncA.Request("memrpc.acme.context", []byte(`{}`), 5*time.Second)
	if err != nil || string(rep.Data) != "memrpc.acme.context" {
		t.Fatalf("A's request: %v %v", rep, err)
	}
	select {
	case err := <-errsA:
		t.Fatalf("A was refused something: %v", err)
	default:
	}

	ncB, errsB := conn(t, srv, credsFile(t, a, "globex"))
	refused := []struct {
		what string
		do   func() error
	}{
		{"publish to A's observations", func() error { return ncB.Publish("mem.acme.obs.u1.s1", []byte(`{}`)) }},
		{"publish to A's session ends", func() error { return ncB.Publish("mem.acme.ended.u1.s1", []byte(`{}`)) }},
		{"publish A's hits", func() error { return ncB.Publish("mem.acme.hit.u1", []byte(`{}`)) }},
		{"request A's RPC", func() error {
			_, err := ncB.Request("memrpc.acme.context", []byte(`{}`), 200*time.Millisecond)
			if err == nil {
				t.Error("B got a reply from A's RPC subject")
			}
			return nil
		}},
		{"subscribe to the JetStream API", func() error { _, err := ncB.SubscribeSync("$JS.API.>"); return err }},
		{"publish to the JetStream API", func() error { return ncB.Publish("$JS.API.STREAM.INFO.AGENTMEM", nil) }},
		{"subscribe to KV", func() error { _, err := ncB.SubscribeSync("$KV.>"); return err }},
		{"subscribe to the stream's subjects", func() error { _, err := ncB.SubscribeSync("mem.>"); return err }},
		{"subscribe to A's inbox", func() error { _, err := ncB.SubscribeSync(idA.InboxPrefix + ".>"); return err }},
		{"subscribe to the default inbox", func() error { _, err := ncB.SubscribeSync("_INBOX.>"); return err }},
		{"subscribe to A's RPC subjects", func() error { _, err := ncB.SubscribeSync("memrpc.acme.>"); return err }},
	}
	for _, r := range refused {
		if err := r.do(); err != nil {
			t.Fatalf("%s: %v", r.what, err)
		}
		wantViolation(t, r.what, ncB, errsB)
	}

	// Through the JetStream API: no stream reads, no KV.
	jsB, err := jetstream.New(ncB)
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	if _, err := jsB.Stream(short, "AGENTMEM"); err == nil {
		t.Fatal("B read the stream's info")
	}
	if _, err := jsB.KeyValue(short, "secrets"); err == nil {
		t.Fatal("B opened a KV bucket")
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %v messages (%v) after B's attempts, want 2", info, err)
	}
}

// Without a credential, or with one another authority issued, the server refuses
// the connection.
func TestConnectionWithoutATrustedCredentialIsRefused(t *testing.T) {
	a := authority(t, t.TempDir())
	srv := startAuthServer(t, a)
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without a credential")
	} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("without a credential: %v, want an authorization error", err)
	}
	other := authority(t, t.TempDir())
	opts, err := natsauth.ClientOptions(credsFile(t, other, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(srv.ClientURL(), opts...); err == nil {
		nc.Close()
		t.Fatal("connected with another authority's credential")
	}
}

// For any two different tenants and roles, none of B's permissions reaches A's
// subjects or inbox; neither role may publish its own tenant's internal subjects
// (the services'), the dead letters, JetStream or KV; an agent may request
// exactly events.AgentEndpoints and an admin every endpoint; A's own permissions
// cover its observations, session ends and inbox.
func TestTenantPermissionsNeverReachAnotherTenant(t *testing.T) {
	id := rapid.StringMatching(`[A-Za-z0-9_-]{1,20}`)
	key := rapid.StringMatching(`U[A-Z2-7]{55}`)
	token := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`)
	roles := rapid.SampledFrom([]natsauth.Role{natsauth.RoleAgent, natsauth.RoleAdmin})
	rapid.Check(t, func(t *rapid.T) {
		ta, tb := id.Draw(t, "a"), id.Draw(t, "b")
		if ta == tb {
			t.Skip("same tenant")
		}
		ka, kb := key.Draw(t, "keyA"), key.Draw(t, "keyB")
		roleA, roleB := roles.Draw(t, "roleA"), roles.Draw(t, "roleB")
		permA := natsauth.TenantPermissions(ta, natsauth.InboxPrefixFor(ta, ka), roleA)
		permB := natsauth.TenantPermissions(tb, natsauth.InboxPrefixFor(tb, kb), roleB)
		u, s, e := token.Draw(t, "user"), token.Draw(t, "session"), rapid.SampledFrom(events.Endpoints).Draw(t, "endpoint")
		pubA := []string{"mem." + ta + ".obs." + u + "." + s, "mem." + ta + ".ended." + u + "." + s, "memrpc." + ta + "." + e}
		inboxA := natsauth.InboxPrefixFor(ta, ka) + "." + token.Draw(t, "inbox") + ".1"
		matches := func(allow []string, subject string) bool {
			for _, f := range allow {
				if server.SubjectMatchesFilter(subject, f) {
					return true
				}
			}
			return false
		}
		for _, subj := range append(pubA, "mem."+ta+".hit."+u, "$JS.API.STREAM.INFO.AGENTMEM", "$KV.agentmem_sessions."+u) {
			if matches(permB.Pub.Allow, subj) {
				t.Fatalf("tenant %q may publish %s", tb, subj)
			}
		}
		for _, subj := range []string{inboxA, "_INBOX." + u, "$JS.API." + u, "$KV." + u, pubA[0], pubA[2]} {
			if matches(permB.Sub.Allow, subj) {
				t.Fatalf("tenant %q may subscribe %s", tb, subj)
			}
		}
		internal := []string{
			"mem." + ta + ".write." + u, "mem." + ta + ".hit." + u, "mem." + ta + ".written." + u,
			"mem." + ta + ".summary." + u + "." + s, "mem." + ta + ".consolidate." + u,
			"memdlq." + u, "$JS.API.STREAM.PURGE.AGENTMEM", "$KV.agentmem_sessions." + u,
		}
		for _, subj := range internal {
			if matches(permA.Pub.Allow, subj) {
				t.Fatalf("tenant %q (%s) may publish its internal subject %s", ta, roleA, subj)
			}
		}
		for _, subj := range pubA[:2] {
			if !matches(permA.Pub.Allow, subj) {
				t.Fatalf("tenant %q may not publish its own %s", ta, subj)
			}
		}
		wantRPC := roleA == natsauth.RoleAdmin || slices.Contains(events.AgentEndpoints, e)
		if matches(permA.Pub.Allow, pubA[2]) != wantRPC {
			t.Fatalf("tenant %q (%s) may request %s: %v, want %v", ta, roleA, pubA[2], !wantRPC, wantRPC)
		}
		if !matches(permA.Sub.Allow, inboxA) {
			t.Fatalf("tenant %q may not receive on its inbox %s", ta, inboxA)
		}
	})
}

// The keys are created once, mode 0600, and reused: a credential issued by one
// Authority is accepted by a server trusting another loaded from the same directory.
func TestKeysPersistPrivately(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	first := authority(t, dir)
	creds := credsFile(t, first, "acme")
	second := authority(t, dir)
	if first.AccountPublicKey() != second.AccountPublicKey() {
		t.Fatal("the account key changed between loads")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 4 {
		t.Fatalf("key directory holds %v (%v), want 3 keys and the register", entries, err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", e.Name(), fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("creds mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	srv := startAuthServer(t, second)
	opts, err := natsauth.ClientOptions(creds)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("", append(opts, nats.InProcessServer(srv))...)
	if err != nil {
		t.Fatalf("a credential from the first load: %v", err)
	}
	nc.Close()
}

func TestInvalidInputIsRefused(t *testing.T) {
	if _, err := natsauth.New(natsauth.Config{}, nil); !errors.Is(err, natsauth.ErrInvalidConfig) {
		t.Fatalf("empty Dir: %v", err)
	}
	a := authority(t, t.TempDir())
	for _, tenant := range []string{"", "a.b", "a*", "a>", "../x", "a b"} {
		if _, err := a.TenantCreds(tenant, natsauth.RoleAgent); !errors.Is(err, natsauth.ErrInvalidTenant) {
			t.Errorf("tenant %q: %v, want ErrInvalidTenant", tenant, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "operator.nk"), []byte("not a seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.New(natsauth.Config{Dir: dir}, nil); !errors.Is(err, natsauth.ErrKeys) {
		t.Fatalf("corrupt key: %v, want ErrKeys", err)
	}
	if _, err := natsauth.Inspect([]byte("nothing")); !errors.Is(err, natsauth.ErrCreds) {
		t.Fatalf("garbage creds: %v, want ErrCreds", err)
	}
}
