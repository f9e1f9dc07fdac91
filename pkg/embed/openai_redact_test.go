package embed

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Issue 22: credentials in the base URL never show in an error or a log line,
// whether the endpoint is unreachable or answers with an error.
func TestOpenAINeverShowsURLCredentials(t *testing.T) {
	const secret = "s3cr3t-pw"
	down := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr
	}()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"bad credentials for ` + r.URL.String() + ` agent:` + secret + `"}}`))
	}))
	t.Cleanup(failing.Close)
	for _, host := range []string{down, strings.TrimPrefix(failing.URL, "http://")} {
		core, logs := observer.New(zap.DebugLevel)
		o, err := NewOpenAI(OpenAIConfig{BaseURL: "http://agent:" + secret + "@" + host + "/v1", Model: "m", Dimensions: 4, Retries: 1, RetryBase: 1}, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		_, err = o.Embed(context.Background(), []string{"hello"})
		if err == nil {
			t.Fatal("no error from a failing endpoint")
		}
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrRejected) {
			t.Errorf("error %v wraps neither ErrUnavailable nor ErrRejected", err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "agent:") {
			t.Errorf("error shows the URL's credentials: %v", err)
		}
		for _, e := range logs.All() {
			line := e.Message
			for k, v := range e.ContextMap() {
				line += " " + k + "=" + toString(v)
			}
			if strings.Contains(line, secret) || strings.Contains(line, "agent:") {
				t.Errorf("log line shows the URL's credentials: %s", line)
			}
		}
		if o.Endpoint() != "http://"+host+"/v1" {
			t.Errorf("Endpoint %q", o.Endpoint())
		}
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
}
