// Package replay re-runs workers over part of a tenant's event stream into a
// shadow namespace (SPEC E6): a private stack (embedded NATS without a listener,
// filesystem Markdown, embedded vector store) under its own directory, fed the
// selected live events unchanged (ids, times), so that what the workers make of them
// can be compared with the live memory (pkg/diff) and dropped in one step.
//
// The isolation is physical, not a naming rule: the shadow stack's NATS server has
// no listener and its stores live under <root>/<tenant>/<name>, so live traffic can
// neither write to it nor read it, and the replay only reads the live stream (an
// ordered consumer; no message changes). The shadow keeps the live tenant and user
// ids, so its Markdown paths and record ids line up with the live ones.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/config"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors; returned errors wrap them.
var (
	ErrInvalidConfig = errors.New("replay: invalid configuration")
	ErrExists        = errors.New("replay: already exists")
	ErrNotFound      = errors.New("replay: not found")
)

// Workers are the workers a replay can re-run, in start order.
var Workers = []string{app.Ingest, app.Extractor, app.Consolidator}

// ManifestFile is the replay's description in its directory.
const ManifestFile = "replay.json"

// Status of a replay.
const (
	StatusRunning = "running" // started, not finished (or interrupted: run it again)
	StatusDone    = "done"
)

// Config describes one replay.
type Config struct {
	// Root holds every replay: <Root>/<tenant>/<name> (required; the command line
	// uses <data_dir>/replays).
	Root string
	// Name names the replay within the tenant: an id token.
	Name string
	// Tenant, User, Session and [Since, Until) select the live events (User and
	// Session optional; Session needs User).
	Tenant, User, Session string
	Since, Until          time.Time
	// Workers re-run; default all of Workers.
	Workers []string
	// ConfigFile and Environ are the replay's own configuration (a YAML file, "" for
	// none, and AGENTMEM_* variables), independent of the live workers'; storage and
	// listeners are pinned under the replay's directory (config.Sandbox).
	ConfigFile string
	Environ    []string
	// Progress, when set, gets a line per progress step and the summary.
	Progress io.Writer
	// PollInterval is how often the end of the workers' work is checked; default
	// 10ms. The replay waits for it after every session end and consolidation
	// request, so that the workers handle them in the live order.
	PollInterval time.Duration
	// Timeout bounds the wait for the workers after the last event; default 10m.
	Timeout time.Duration
}

func (c *Config) setDefaults() {
	if len(c.Workers) == 0 {
		c.Workers = slices.Clone(Workers)
	}
	if c.PollInterval == 0 {
		c.PollInterval = 10 * time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Root == "" {
		return fmt.Errorf("%w: Root is empty", ErrInvalidConfig)
	}
	if err := events.ValidateID("name", c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.query().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Session != "" && c.User == "" {
		return fmt.Errorf("%w: a session needs its user", ErrInvalidConfig)
	}
	for _, w := range c.Workers {
		if !slices.Contains(Workers, w) {
			return fmt.Errorf("%w: unknown worker %q (want %s)", ErrInvalidConfig, w, strings.Join(Workers, ", "))
		}
	}
	if c.PollInterval < 0 || c.Timeout < 0 {
		return fmt.Errorf("%w: negative PollInterval or Timeout", ErrInvalidConfig)
	}
	return nil
}

func (c Config) query() eventstore.Query {
	return eventstore.Query{Tenant: c.Tenant, User: c.User, Session: c.Session, Since: c.Since, Until: c.Until}
}

// Manifest describes a replay: what it selected and ran, and what it made.
type Manifest struct {
	Name       string    `json:"name"`
	Tenant     string    `json:"tenant"`
	User       string    `json:"user,omitempty"`
	Session    string    `json:"session,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	Until      time.Time `json:"until,omitzero"`
	Workers    []string  `json:"workers"`
	ConfigFile string    `json:"config_file,omitempty"`
	Status     string    `json:"status"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished,omitzero"`
	// EventsRead is how many live events the selection holds; EventsFed how many
	// of them are worker input (observations, session_ended, memory_hit,
	// consolidate_requested: the workers' own output, memory_written and
	// summary_due, is made again by the replay) or writes, and were fed in this
	// run (not counting those fed by an interrupted earlier run).
	EventsRead int `json:"events_read"`
	EventsFed  int `json:"events_fed"`
	// WritesApplied counts the write events (requests to the retriever that
	// changed memory) applied in this run, in stream order after the workers were
	// done with the events before them; WritesFailed those whose apply failed,
	// as they did live (an update of a memory that did not exist): each is logged
	// and skipped.
	WritesApplied int `json:"writes_applied"`
	WritesFailed  int `json:"writes_failed,omitempty"`
	// Memories and Files count the vector memories and Markdown files of the
	// shadow namespace afterwards (all users of the selection).
	Memories int           `json:"memories"`
	Files    int           `json:"files"`
	Duration time.Duration `json:"duration_ns"`
}

// Dir is the directory of replay name of tenant under root.
func Dir(root, tenant, name string) string { return filepath.Join(root, tenant, name) }

// stackConfig is the configuration of the shadow stack in dir.
func stackConfig(file string, environ []string, dir string) (config.Config, error) {
	cfg, err := config.Load(file, config.WithOverrides(environ, config.Sandbox(dir)))
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return cfg, nil
}

// input reports whether env is worker input rather than worker output.
func input(env events.Envelope) bool {
	switch env.Type {
	case events.TypeObservation, events.TypeSessionEnded, events.TypeMemoryHit, events.TypeConsolidateRequested:
		return true
	}
	return false
}

// barrier reports an event after which the replay waits for the workers to be
// done: the end of a session and a consolidation request.
func barrier(env events.Envelope) bool {
	return env.Type == events.TypeSessionEnded || env.Type == events.TypeConsolidateRequested
}

// Run replays cfg's selection of live (the live event store) into the shadow
// namespace cfg.Name. A replay that was interrupted (status running) resumes: the
// events already in its stream are not fed again, and the workers' idempotence does
// the rest, so it ends in the state one uninterrupted run reaches (but for a write
// interrupted between its apply and its save, which is applied again). Write
// events are applied with the applier the live retriever uses (pkg/writes), each
// event id once. A finished one is
// ErrExists; drop it first.
func Run(ctx context.Context, cfg Config, live *eventstore.Store, logger *zap.Logger) (Manifest, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return Manifest{}, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	dir := Dir(cfg.Root, cfg.Tenant, cfg.Name)
	m, err := readManifest(dir)
	switch {
	case err == nil && m.Status == StatusDone:
		return m, fmt.Errorf("%w: %s of tenant %s (drop it first)", ErrExists, cfg.Name, cfg.Tenant)
	case err == nil && !sameSelection(m, cfg):
		return m, fmt.Errorf("%w: %s of tenant %s was started with another selection (drop it first)", ErrExists, cfg.Name, cfg.Tenant)
	case errors.Is(err, ErrNotFound):
		m = Manifest{Name: cfg.Name, Tenant: cfg.Tenant, User: cfg.User, Session: cfg.Session, Since: cfg.Since, Until: cfg.Until,
			Workers: cfg.Workers, ConfigFile: cfg.ConfigFile, Status: StatusRunning}
	case err != nil:
		return Manifest{}, err
	}
	start := time.Now()
	m.Started = start.UTC()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return m, fmt.Errorf("replay: %w", err)
	}
	if err := writeManifest(dir, m); err != nil {
		return m, err
	}
	scfg, err := stackConfig(cfg.ConfigFile, cfg.Environ, dir)
	if err != nil {
		return m, err
	}
	stack, err := app.Up(ctx, scfg, app.UpOptions{}, logger)
	if err != nil {
		return m, fmt.Errorf("replay: start the shadow stack: %w", err)
	}
	defer func() { _ = stack.Close() }()
	if err := stack.Restart(ctx, cfg.Workers); err != nil {
		return m, fmt.Errorf("replay: start workers %v: %w", cfg.Workers, err)
	}
	rt := stack.Runtime()
	applier, err := rt.Writes(ctx)
	if err != nil {
		return m, fmt.Errorf("replay: %w", err)
	}
	fed := map[string]bool{}
	if err := rt.Events.Scan(ctx, eventstore.Query{Tenant: cfg.Tenant}, func(st eventstore.Stored) (bool, error) {
		fed[st.Envelope.ID] = true
		return true, nil
	}); err != nil {
		return m, err
	}
	if len(fed) > 0 {
		fmt.Fprintf(cfg.Progress, "resuming: %d events already in the shadow stream\n", len(fed))
	}
	m.EventsRead, m.EventsFed, m.WritesApplied, m.WritesFailed = 0, 0, 0, 0
	users := map[string]bool{}
	busy := true // the workers may have input not handled yet (fed since they were last idle)
	err = live.Scan(ctx, cfg.query(), func(st eventstore.Stored) (bool, error) {
		m.EventsRead++
		users[st.Envelope.UserID] = true
		if (!input(st.Envelope) && st.Envelope.Type != events.TypeWrite) || fed[st.Envelope.ID] {
			return true, nil
		}
		if st.Envelope.Type == events.TypeWrite {
			// A write goes after what the workers make of the events before it,
			// as it did live; it is saved to the shadow stream after it is applied,
			// which is how a resumed replay knows it was.
			if busy {
				if err := waitIdle(ctx, rt, cfg.Workers, cfg.PollInterval); err != nil {
					return false, err
				}
				busy = false
			}
			if _, err := applier.Apply(ctx, st.Envelope); err != nil {
				if ctx.Err() != nil {
					return false, err
				}
				m.WritesFailed++
				logger.Warn("write event failed to apply; skipped", zap.String("event", st.Envelope.ID), zap.String("op", st.Envelope.Write.Op), zap.Error(err))
			} else {
				m.WritesApplied++
			}
		}
		if _, err := rt.Events.Save(ctx, st.Envelope); err != nil {
			return false, err
		}
		fed[st.Envelope.ID] = true
		m.EventsFed++
		busy = busy || st.Envelope.Type != events.TypeWrite
		if barrier(st.Envelope) {
			// What the extractor and consolidator write depends on the order they
			// handle sessions and requests in: one at a time, as they came.
			if err := waitIdle(ctx, rt, cfg.Workers, cfg.PollInterval); err != nil {
				return false, err
			}
			busy = false
		}
		if m.EventsFed%1000 == 0 {
			fmt.Fprintf(cfg.Progress, "fed %d events (%d read)\n", m.EventsFed, m.EventsRead)
		}
		return true, nil
	})
	if err != nil {
		return m, fmt.Errorf("replay: feed: %w", err)
	}
	fmt.Fprintf(cfg.Progress, "fed %d events (%d read); waiting for %s\n", m.EventsFed, m.EventsRead, strings.Join(cfg.Workers, ", "))
	waitCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := waitIdle(waitCtx, rt, cfg.Workers, cfg.PollInterval); err != nil {
		return m, err
	}
	for u := range users {
		n, err := rt.Vectors.Count(ctx, vectorstore.Filter{Tenant: cfg.Tenant, UserID: u, IncludeExpired: true})
		if err != nil {
			return m, err
		}
		m.Memories += n
		files, err := rt.Docs.Files(ctx, docNamespace(cfg.Tenant, u))
		if err != nil {
			return m, err
		}
		m.Files += len(files)
	}
	m.Status, m.Finished, m.Duration = StatusDone, time.Now().UTC(), time.Since(start)
	if err := writeManifest(dir, m); err != nil {
		return m, err
	}
	fmt.Fprintf(cfg.Progress, "replay %s: %d events read, %d fed (%d writes applied, %d failed), %d memories, %d files in %s\n",
		m.Name, m.EventsRead, m.EventsFed, m.WritesApplied, m.WritesFailed, m.Memories, m.Files, m.Duration.Round(time.Millisecond))
	return m, nil
}

func sameSelection(m Manifest, c Config) bool {
	return m.User == c.User && m.Session == c.Session && m.Since.Equal(c.Since) && m.Until.Equal(c.Until) && slices.Equal(m.Workers, c.Workers)
}

// waitIdle waits until the running workers' durables have nothing pending or
// unacknowledged, twice in a row (a handler may publish follow-up events for
// another worker just before acking).
func waitIdle(ctx context.Context, rt *app.Runtime, workers []string, interval time.Duration) error {
	var durables []string
	for _, w := range workers {
		durables = append(durables, bus.WorkerConsumer(w, bus.ConsumerDefaults{}).Durable)
	}
	quiet := 0
	for {
		var busy uint64
		for _, d := range durables {
			n, err := bus.Backlog(ctx, rt.JS, bus.DefaultStream, d)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			busy += n
		}
		if busy == 0 {
			if quiet++; quiet == 2 {
				return nil
			}
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replay: workers still have %d messages in flight: %w", busy, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func readManifest(dir string) (Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%w: %s", ErrNotFound, dir)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("replay: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("replay: %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return m, nil
}

func writeManifest(dir string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestFile)); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// List returns the tenant's replays under root, by name.
func List(root, tenant string) ([]Manifest, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	entries, err := os.ReadDir(filepath.Join(root, tenant))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var out []Manifest
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m, err := readManifest(filepath.Join(root, tenant, e.Name()))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Drop deletes the replay in one step: its directory holds everything of the
// shadow namespace (Markdown, vector records, session state and stream events in
// the shadow's own NATS store).
func Drop(root, tenant, name string) error {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := events.ValidateID("name", name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	dir := Dir(root, tenant, name)
	if _, err := readManifest(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replay: drop %s: %w", dir, err)
	}
	return nil
}
