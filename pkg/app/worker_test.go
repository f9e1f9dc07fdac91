package app_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// A worker binary's whole main path: configuration from the environment, a NATS
// connection over TCP, /healthz /readyz /metrics on http.listen, and a graceful exit 0
// on SIGTERM (E2, operations).
func TestRunWorkerServesProbesAndStopsOnSIGTERM(t *testing.T) {
	for _, name := range []string{app.Ingest, app.Retriever} {
		t.Run(name, func(t *testing.T) {
			srv := bustest.StartServerWith(t, bus.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
			httpAddr := bustest.FreeAddr(t)
			t.Setenv("AGENTMEM_NATS_URL", srv.ClientURL())
			t.Setenv("AGENTMEM_DATA_DIR", t.TempDir())
			t.Setenv("AGENTMEM_HTTP_LISTEN", httpAddr)
			t.Setenv("AGENTMEM_LOG_LEVEL", "error")

			exit := make(chan int, 1)
			go func() { exit <- app.RunWorker(name, nil, io.Discard) }()
			bustest.Eventually(t, 30*time.Second, func() error {
				select {
				case code := <-exit:
					t.Fatalf("%s exited early with %d", name, code)
				default:
				}
				code, body, err := get("http://" + httpAddr + "/readyz")
				if err != nil {
					return err
				}
				if code != http.StatusOK {
					return fmt.Errorf("readyz %d: %s", code, body)
				}
				return nil
			})
			if code, _, err := get("http://" + httpAddr + "/healthz"); err != nil || code != http.StatusOK {
				t.Fatalf("healthz = %d, %v", code, err)
			}
			if _, body, err := get("http://" + httpAddr + "/metrics"); err != nil || !strings.Contains(body, "agentmem_") {
				t.Fatalf("metrics lack agentmem series: %v", err)
			}
			// The worker is inside its signal context now (it is ready), so SIGTERM
			// starts its graceful shutdown instead of killing the test process.
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-exit:
				if code != 0 {
					t.Fatalf("%s exited with %d after SIGTERM, want 0", name, code)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not stop after SIGTERM", name)
			}
		})
	}
}

// Bad configuration is reported and the binary exits 2 without connecting anywhere.
func TestRunWorkerRejectsBadConfig(t *testing.T) {
	t.Setenv("AGENTMEM_MEMORY_AUTO_LOAD_LINES", "0")
	var stderr strings.Builder
	if code := app.RunWorker(app.Ingest, nil, &stderr); code != 2 || !strings.Contains(stderr.String(), "memory.auto_load_lines") {
		t.Fatalf("exit %d, stderr %q; want 2 naming memory.auto_load_lines", code, stderr.String())
	}
	if code := app.RunWorker(app.Ingest, []string{"--config", "/nonexistent.yaml"}, io.Discard); code != 2 {
		t.Fatalf("missing config file: exit %d, want 2", code)
	}
}

// The worker binaries' command line: --help (or -h, or Go flag's -help) exits 0, an
// unknown flag exits 2, and --config may be spelled with one dash as before.
func TestRunWorkerFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--help"}, 0, "--config"},
		{[]string{"-h"}, 0, "--config"},
		{[]string{"-help"}, 0, "--config"},
		{[]string{"--no-such-flag"}, 2, "unknown flag"},
		{[]string{"-config", "/nonexistent.yaml"}, 2, "/nonexistent.yaml"},
		{[]string{"--config=/nonexistent.yaml"}, 2, "/nonexistent.yaml"},
	} {
		var stderr strings.Builder
		if code := app.RunWorker(app.Ingest, c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.out) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.out)
		}
	}
}
