package bus_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

func startTCP(t *testing.T, configure func(*server.Options)) *server.Server {
	t.Helper()
	return bustest.StartServerWith(t, bus.EmbeddedConfig{Listen: "127.0.0.1:0", Configure: configure})
}

func TestConnectUserPassword(t *testing.T) {
	srv := startTCP(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "agent", Password: "s3cret-pw"}}
	})
	nc, err := bus.Connect(bus.ConnConfig{URL: srv.ClientURL(), User: "agent", Password: "s3cret-pw", Name: "t"}, zap.NewNop())
	if err != nil {
		t.Fatalf("connect with the right password: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}

	_, err = bus.Connect(bus.ConnConfig{URL: srv.ClientURL(), User: "agent", Password: "wrong-pw"}, zap.NewNop())
	if !errors.Is(err, bus.ErrConnect) {
		t.Fatalf("wrong password: got %v, want ErrConnect", err)
	}
	if !strings.Contains(err.Error(), srv.ClientURL()) {
		t.Errorf("error %q does not name the URL %s", err, srv.ClientURL())
	}
	if strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("error %q leaks the password", err)
	}
}

func TestConnectNKey(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	srv := startTCP(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := bus.Connect(bus.ConnConfig{URL: srv.ClientURL(), NKeyFile: seedFile}, zap.NewNop())
	if err != nil {
		t.Fatalf("connect with the nkey: %v", err)
	}
	nc.Close()

	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	if err := os.WriteFile(seedFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Connect(bus.ConnConfig{URL: srv.ClientURL(), NKeyFile: seedFile}, zap.NewNop()); !errors.Is(err, bus.ErrConnect) {
		t.Fatalf("unknown nkey: got %v, want ErrConnect", err)
	}
}

func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, serverCert := writeTestPKI(t, dir)
	srv := startTCP(t, func(o *server.Options) {
		o.TLS = true
		o.TLSTimeout = 5
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}
	})
	url := "tls://" + srv.Addr().String()
	nc, err := bus.Connect(bus.ConnConfig{URL: url, TLS: bus.TLSConfig{CAFile: caFile, ServerName: "localhost"}}, zap.NewNop())
	if err != nil {
		t.Fatalf("connect over TLS: %v", err)
	}
	defer nc.Close()
	if state, err := nc.TLSConnectionState(); err != nil || !state.HandshakeComplete {
		t.Fatalf("connection is not TLS: %v", err)
	}

	// Without the CA the self-signed chain must be refused.
	if _, err := bus.Connect(bus.ConnConfig{URL: url, TLS: bus.TLSConfig{ServerName: "localhost"}}, zap.NewNop()); !errors.Is(err, bus.ErrConnect) {
		t.Fatalf("unknown CA: got %v, want ErrConnect", err)
	}
}

func TestConnectConfigErrors(t *testing.T) {
	for name, cfg := range map[string]bus.ConnConfig{
		"no url":             {},
		"two auth methods":   {URL: "nats://127.0.0.1:4222", User: "u", Token: "t"},
		"password no user":   {URL: "nats://127.0.0.1:4222", Password: "p"},
		"cert without key":   {URL: "nats://127.0.0.1:4222", TLS: bus.TLSConfig{CertFile: "c.pem"}},
		"missing nkey file":  {URL: "nats://127.0.0.1:4222", NKeyFile: filepath.Join(t.TempDir(), "none")},
		"missing CA file":    {URL: "nats://127.0.0.1:4222", TLS: bus.TLSConfig{CAFile: filepath.Join(t.TempDir(), "none")}},
		"creds and nkey set": {URL: "nats://127.0.0.1:4222", CredsFile: "a", NKeyFile: "b"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := bus.Connect(cfg, nil); !errors.Is(err, bus.ErrConnect) {
				t.Fatalf("got %v, want ErrConnect", err)
			}
		})
	}
}

// Property: whatever credentials a URL embeds, a failed Connect never repeats them.
func TestConnectErrorNeverLeaksURLCredentials(t *testing.T) {
	// A port nothing listens on: take one and release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rapid.Check(t, func(rt *rapid.T) {
		user := rapid.StringMatching(`[a-z]{1,8}`).Draw(rt, "user")
		secret := rapid.StringMatching(`[A-Z0-9]{6,16}`).Draw(rt, "secret")
		withUser := rapid.Bool().Draw(rt, "withUser")
		userinfo := secret // token form: nats://TOKEN@host
		if withUser {
			userinfo = user + ":" + secret
		}
		url := fmt.Sprintf("nats://%s@%s", userinfo, addr)
		if rapid.Bool().Draw(rt, "list") {
			url = "nats://" + addr + "," + url
		}
		_, err := bus.Connect(bus.ConnConfig{URL: url}, nil)
		if !errors.Is(err, bus.ErrConnect) {
			rt.Fatalf("got %v, want ErrConnect", err)
		}
		if strings.Contains(err.Error(), secret) {
			rt.Fatalf("error %q leaks %q", err, secret)
		}
		if !strings.Contains(err.Error(), addr) {
			rt.Fatalf("error %q does not name %s", err, addr)
		}
	})
}

// writeTestPKI writes a self-signed CA to dir and returns its file and a server
// certificate for localhost signed by it.
func writeTestPKI(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agentmem test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
}
