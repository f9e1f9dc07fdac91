package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

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
	a, err := natsauth.New(natsauth.Config{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := a.Trust()
	if err != nil {
		t.Fatal(err)
	}
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
