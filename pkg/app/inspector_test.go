package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
)

// With http.ui the operations server serves the inspector at /ui/ beside the
// probes; without it (the workers' default) /ui/ does not exist.
func TestOperationsServerMountsTheInspector(t *testing.T) {
	for _, ui := range []bool{true, false} {
		addr := bustest.FreeAddr(t)
		env := []string{"AGENTMEM_HTTP_LISTEN=" + addr}
		if ui {
			env = append(env, "AGENTMEM_HTTP_UI=true")
		}
		apptest.Up(t, env...)
		resp, err := http.Get("http://" + addr + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if ui && (resp.StatusCode != 200 || !strings.Contains(string(body), "agentmem inspector")) {
			t.Errorf("http.ui on: %d %s", resp.StatusCode, body)
		}
		if !ui && resp.StatusCode != http.StatusNotFound {
			t.Errorf("http.ui off: /ui/ answers %d", resp.StatusCode)
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err != nil || resp.StatusCode != 200 {
			t.Errorf("readyz: %v", err)
		} else {
			_ = resp.Body.Close()
		}
	}
}
