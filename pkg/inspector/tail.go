package inspector

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
)

// tailLine is what the live tail shows of one event.
type tailLine struct {
	Subject string `json:"subject"`
	Type    string `json:"type"`
	TS      string `json:"ts"`
	Text    string `json:"text"`
}

func (in *Inspector) tail(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" {
		if err := events.ValidateID("tenant", tenant); err != nil {
			in.fail(w, r, fmt.Errorf("%w: %w", errBadInput, err))
			return
		}
	}
	in.render(w, "tail", page{Title: "live tail", Crumbs: []crumb{{"tenants", "/ui/"}, {"live tail", ""}}, Data: tenant})
}

// tailEvents streams every event published on mem.> (or mem.<tenant>.>) as
// server-sent events, one JSON tailLine each, until the browser goes away. A slow
// browser misses events rather than holding the connection's memory.
func (in *Inspector) tailEvents(w http.ResponseWriter, r *http.Request) {
	subject := "mem.>"
	if t := r.URL.Query().Get("tenant"); t != "" {
		if err := events.ValidateID("tenant", t); err != nil {
			in.fail(w, r, fmt.Errorf("%w: %w", errBadInput, err))
			return
		}
		subject = "mem." + t + ".>"
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := make(chan *nats.Msg, 256)
	sub, err := in.deps.Conn.ChanSubscribe(subject, ch)
	if err != nil {
		in.fail(w, r, fmt.Errorf("subscribe %s: %w", subject, err))
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(256, 8<<20)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": tailing "+subject+"\n\n")
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case m := <-ch:
			line := tailLine{Subject: m.Subject}
			if env, err := events.Decode(m.Data); err == nil {
				line.Type, line.TS = string(env.Type), env.TS.UTC().Format("15:04:05")
				if env.Observation != nil {
					line.Text = string(env.Observation.Role) + ": " + observationText(env.Observation)
				}
			} else {
				line.Type, line.Text = "undecodable", err.Error()
			}
			data, err := json.Marshal(line)
			if err != nil {
				in.logger.Debug("tail encode", zap.Error(err))
				continue
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
