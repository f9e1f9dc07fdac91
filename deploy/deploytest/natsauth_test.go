package deploytest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentmem/agentmem/pkg/natsauth"
)

// kedaAccountPlaceholder is what the ScaledObjects name as the JetStream account
// until an overlay patches in the AGENTMEM account's public key.
const kedaAccountPlaceholder = "REPLACE-agentmem-account"

// The NATS server of deploy/k8s runs in operator mode from the trust `agentmem creds
// server-config` prints (mounted from the Secret next to its config), with no other
// users; the workers connect with the service credential from the Secret.
func TestNATSRunsOperatorModeFromTheSecret(t *testing.T) {
	k := loadK8s(t)
	cm, ok := k.find("ConfigMap", "nats-config")
	if !ok {
		t.Fatal("no ConfigMap nats-config")
	}
	conf := decodeAs[dataObject](t, cm).Data["nats.conf"]
	if strings.Contains(conf, "authorization") || strings.Contains(conf, "password") {
		t.Errorf("nats.conf still has users of its own:\n%s", conf)
	}
	_, secrets := k.secret(t)
	for _, key := range []string{"nats-auth.conf", "nats-service-creds"} {
		if _, ok := secrets[key]; !ok {
			t.Errorf("the Secret template lacks %s", key)
		}
	}

	// Lay the files out as the StatefulSet mounts them and let nats-server parse them.
	trust := newTrust(t)
	opts := natsOptions(t, conf, trust)
	if len(opts.TrustedOperators) != 1 || opts.SystemAccount != trust.SystemAccount || len(opts.Users)+len(opts.Nkeys) != 0 {
		t.Errorf("operator mode: %d operators, system account %q, %d users", len(opts.TrustedOperators), opts.SystemAccount, len(opts.Users)+len(opts.Nkeys))
	}
	if !strings.Contains(trust.ServerConfig(), trust.Account) {
		t.Error("server-config does not name the AGENTMEM account the KEDA triggers need")
	}

	wc, ok := k.find("ConfigMap", "agentmem-config")
	if !ok {
		t.Fatal("no ConfigMap agentmem-config")
	}
	if !strings.Contains(decodeAs[dataObject](t, wc).Data["agentmem.yaml"], "creds_file: /etc/agentmem/secrets/nats-service-creds") {
		t.Error("the workers do not connect with the service credential from the Secret")
	}
}

// newTrust is the trust of a new authority, as `agentmem creds server-config`
// prints it.
func newTrust(t *testing.T) natsauth.Trust {
	t.Helper()
	trust, err := newAuthority(t).Trust()
	if err != nil {
		t.Fatal(err)
	}
	return trust
}

// newAuthority is a new credential authority in a temporary directory.
func newAuthority(t *testing.T) *natsauth.Authority {
	t.Helper()
	a, err := natsauth.New(natsauth.Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// natsConf is the nats.conf of deploy/k8s's ConfigMap.
func natsConf(t *testing.T, k k8s) string {
	t.Helper()
	cm, ok := k.find("ConfigMap", "nats-config")
	if !ok {
		t.Fatal("no ConfigMap nats-config")
	}
	return decodeAs[dataObject](t, cm).Data["nats.conf"]
}

// natsOptions lays nats.conf and the trust out as the StatefulSet mounts them and
// lets nats-server parse them.
func natsOptions(t *testing.T, conf string, trust natsauth.Trust) *server.Options {
	t.Helper()
	root := t.TempDir()
	for path, text := range map[string]string{"nats/nats.conf": conf, "nats-auth/nats-auth.conf": trust.ServerConfig()} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("POD_NAME", "nats-0")
	opts, err := server.ProcessConfigFile(filepath.Join(root, "nats/nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf with the trust: %v", err)
	}
	return opts
}

// startK8sNATS runs one node of deploy/k8s's NATS from its nats.conf and trust,
// on loopback with random client and monitoring ports. One node alone: the
// routes name pods that do not exist here.
func startK8sNATS(t *testing.T, conf string, trust natsauth.Trust) *server.Server {
	t.Helper()
	opts := natsOptions(t, conf, trust)
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT
	opts.Cluster, opts.Routes = server.ClusterOpts{}, nil
	opts.StoreDir, opts.NoLog, opts.NoSigs = t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server from the manifests is not ready")
	}
	return srv
}

// The NATS server of deploy/k8s, run from its nats.conf and a trust printed after
// a revocation, refuses the revoked credential; a credential revoked while it runs
// is cut off by `creds revoke`'s push, with no restart (deploy/README.md
// "Revoking a credential").
func TestK8sNATSHonoursRevocations(t *testing.T) {
	k := loadK8s(t)
	a := newAuthority(t)
	credsFile := func(name string) (string, natsauth.Identity) {
		creds, err := a.TenantCreds("acme", natsauth.RoleAgent)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := natsauth.WriteCreds(path, creds); err != nil {
			t.Fatal(err)
		}
		id, err := natsauth.InspectFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, id
	}
	before, beforeID := credsFile("before.creds")
	live, liveID := credsFile("live.creds")
	if err := a.Revoke("acme", beforeID.PublicKey); err != nil {
		t.Fatal(err)
	}
	trust, err := a.Trust()
	if err != nil {
		t.Fatal(err)
	}
	srv := startK8sNATS(t, natsConf(t, k), trust)
	connect := func(creds string) (*nats.Conn, error) {
		copts, err := natsauth.ClientOptions(creds)
		if err != nil {
			t.Fatal(err)
		}
		return nats.Connect(srv.ClientURL(), append(copts, nats.NoReconnect())...)
	}
	if nc, err := connect(before); err == nil {
		nc.Close()
		t.Fatal("a credential revoked before the trust was printed connected")
	}
	nc, err := connect(live)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := a.Revoke("acme", liveID.PublicKey); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Push(ctx, srv.ClientURL()); err != nil {
		t.Fatalf("push to the manifests' server: %v", err)
	}
	for start := time.Now(); !nc.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the revoked credential's connection is still open 5s after the push")
		}
	}
}
