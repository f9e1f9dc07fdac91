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
