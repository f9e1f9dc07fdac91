package natsauth_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// A revoked credential's live connection is closed within seconds of Push, with
// no restart, and it is refused at its next connect, then and after a restart
// from the new trust; the tenant's other credential keeps working throughout.
// The register lists each credential with its tenant, role and times.
func TestRevokedCredentialIsCutOffWithoutARestart(t *testing.T) {
	a := authority(t, t.TempDir())
	srv := startAuthServer(t, a)
	svc := credsFile(t, a, "")
	revoked, kept := roleCredsFile(t, a, "acme", natsauth.RoleAgent), roleCredsFile(t, a, "acme", natsauth.RoleAdmin)
	idRevoked, err := natsauth.InspectFile(revoked)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(url, creds string, opts ...nats.Option) (*nats.Conn, error) {
		copts, err := natsauth.ClientOptions(creds)
		if err != nil {
			t.Fatal(err)
		}
		return nats.Connect(url, append(copts, opts...)...)
	}
	var cutOff atomic.Value
	live, err := dial(srv.ClientURL(), revoked, nats.NoReconnect(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { cutOff.Store(err.Error()) }))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	other, err := dial(srv.ClientURL(), kept)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	if err := a.Revoke("globex", idRevoked.PublicKey); !errors.Is(err, natsauth.ErrRevoke) {
		t.Fatalf("revoking acme's key as globex's: %v, want ErrRevoke", err)
	}
	if err := a.Revoke("acme", "not-a-key"); !errors.Is(err, natsauth.ErrRevoke) {
		t.Fatalf("revoking a malformed key: %v, want ErrRevoke", err)
	}
	if err := a.Revoke("acme", idRevoked.PublicKey); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := a.Push(ctx, srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	// The error handler runs on the connection's callback goroutine, possibly
	// after the close: wait for both.
	for !live.IsClosed() || cutOff.Load() == nil {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("5s after the push: connection closed %v, error %v", live.IsClosed(), cutOff.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if msg := cutOff.Load().(string); !strings.Contains(strings.ToLower(msg), "revoked") {
		t.Errorf("the connection was closed with %q, want a revocation", msg)
	}
	if !other.IsConnected() || other.Flush() != nil {
		t.Fatal("the tenant's other credential lost its connection")
	}
	if nc, err := dial(srv.ClientURL(), revoked); err == nil {
		nc.Close()
		t.Fatal("the revoked credential connected again")
	}

	// A server started from the trust signed now (a restart) refuses it too.
	restarted := startAuthServer(t, a)
	if nc, err := dial(restarted.ClientURL(), revoked); err == nil {
		nc.Close()
		t.Fatal("the revoked credential connected after a restart")
	}
	for _, creds := range []string{kept, svc} {
		nc, err := dial(restarted.ClientURL(), creds)
		if err != nil {
			t.Fatalf("%s after a restart: %v", creds, err)
		}
		nc.Close()
	}

	listed, err := a.List("acme")
	if err != nil || len(listed) != 2 {
		t.Fatalf("acme's credentials: %+v, %v", listed, err)
	}
	got := map[string]natsauth.Credential{}
	for _, c := range listed {
		if c.Tenant != "acme" || c.IssuedAt.IsZero() || time.Since(c.IssuedAt) > time.Minute {
			t.Errorf("listed %+v", c)
		}
		got[c.Key] = c
	}
	if c := got[idRevoked.PublicKey]; c.Role != natsauth.RoleAgent || c.RevokedAt.IsZero() {
		t.Errorf("the revoked agent credential is listed as %+v", c)
	}
	idKept, _ := natsauth.InspectFile(kept)
	if c := got[idKept.PublicKey]; c.Role != natsauth.RoleAdmin || !c.RevokedAt.IsZero() {
		t.Errorf("the admin credential is listed as %+v", c)
	}
	all, err := a.List("")
	if err != nil || len(all) != 3 || all[0].Role != natsauth.RoleService || all[0].Tenant != "" {
		t.Fatalf("every credential: %+v, %v; want the service's first, then acme's two", all, err)
	}
}

// `up --auth` reuses its stored service credential at every start, so the
// register holds one however often it starts; revoked (creds revoke --service),
// its connection is cut off, and the next start issues a new one that a server
// started from the new trust accepts. Revoking needs the key's own owner.
func TestServiceCredentialIsReusedUntilRevoked(t *testing.T) {
	dir := t.TempDir()
	ids := func(a *natsauth.Authority) (string, natsauth.Identity) {
		t.Helper()
		path, err := a.WriteServiceCreds()
		if err != nil {
			t.Fatal(err)
		}
		id, err := natsauth.InspectFile(path)
		if err != nil || id.Role != natsauth.RoleService {
			t.Fatalf("service credential %+v, %v", id, err)
		}
		return path, id
	}
	a := authority(t, dir)
	path, first := ids(a)
	if _, again := ids(authority(t, dir)); again.PublicKey != first.PublicKey {
		t.Fatalf("a second start issued service key %s, want the stored %s", again.PublicKey, first.PublicKey)
	}
	if all, err := a.List(""); err != nil || len(all) != 1 || all[0].Key != first.PublicKey {
		t.Fatalf("the register after two starts: %+v, %v; want the one service credential", all, err)
	}

	srv := startAuthServer(t, a)
	copts, err := natsauth.ClientOptions(path)
	if err != nil {
		t.Fatal(err)
	}
	live, err := nats.Connect(srv.ClientURL(), append(copts, nats.NoReconnect())...)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	tenantID, err := natsauth.InspectFile(roleCredsFile(t, a, "acme", natsauth.RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke("acme", first.PublicKey); !errors.Is(err, natsauth.ErrRevoke) {
		t.Fatalf("revoking the service key as acme's: %v, want ErrRevoke", err)
	}
	if err := a.Revoke("", tenantID.PublicKey); !errors.Is(err, natsauth.ErrRevoke) {
		t.Fatalf("revoking acme's key as the service's: %v, want ErrRevoke", err)
	}
	if err := a.Revoke("", first.PublicKey); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Push(ctx, srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); !live.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the revoked service credential's connection is still open 5s after the push")
		}
	}

	path, next := ids(authority(t, dir))
	if next.PublicKey == first.PublicKey {
		t.Fatal("the next start reused the revoked service credential")
	}
	restarted := startAuthServer(t, a)
	copts, err = natsauth.ClientOptions(path)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(restarted.ClientURL(), copts...)
	if err != nil {
		t.Fatalf("the new service credential: %v", err)
	}
	nc.Close()
}
