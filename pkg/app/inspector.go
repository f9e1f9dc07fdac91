package app

import (
	"fmt"

	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/inspector"
	"github.com/agentmem/agentmem/pkg/obs"
)

// mountInspector serves the web inspector at /ui/ on the operations server when
// http.ui is on, on the runtime's connection and stores.
func mountInspector(rt *Runtime, ops *obs.Server) error {
	if !rt.Config.HTTP.UI || rt.Config.HTTP.Listen == "" {
		return nil
	}
	pw, err := rt.Config.HTTP.UIPasswordValue()
	if err != nil {
		return fmt.Errorf("app: inspector: %w", err)
	}
	in, err := inspector.New(inspector.Config{Password: pw, Hosts: rt.Config.HTTP.UIHosts, EventStream: bus.DefaultStream, DLQStream: bus.DefaultDLQStream},
		inspector.Deps{Conn: rt.Conn, JS: rt.JS, Docs: rt.Docs, Events: rt.Events, Vectors: rt.Vectors}, rt.Logger)
	if err != nil {
		return fmt.Errorf("app: inspector: %w", err)
	}
	ops.Handle(inspector.Prefix, in)
	return nil
}
