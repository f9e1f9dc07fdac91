package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/app"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// RebuildConfig describes one rebuild.
type RebuildConfig struct {
	// Root is where the rebuild's own replay is made (as Config.Root); it is
	// dropped once the rebuild is done.
	Root string
	// Tenant, and User when set, select the namespace rebuilt.
	Tenant, User string
	// ConfigFile and Environ configure the rebuild's replay: the live
	// configuration, so that the workers decide what they decided live.
	ConfigFile string
	Environ    []string
	// Progress, Timeout: as in Config.
	Progress io.Writer
	Timeout  time.Duration
}

// RebuildSummary is what a rebuild did.
type RebuildSummary struct {
	Replay Manifest `json:"replay"`
	// Users are the users rebuilt: the selected one, or every user of the
	// tenant's stream.
	Users []string `json:"users"`
	// Files, Memories and SessionEntries count what was written to the target
	// stores (Markdown and JSON files, vector records with items, session state
	// and turn entries).
	Files          int           `json:"files"`
	Memories       int           `json:"memories"`
	SessionEntries int           `json:"session_entries"`
	Duration       time.Duration `json:"duration_ns"`
}

// Rebuild drops the derived memory of cfg's namespace in target (Markdown,
// vector memories and items, session state and turns) and makes it again from
// live, the tenant's stream: after a lost disk, or to move to other stores (a
// target configured with Qdrant and the JetStream DocStore).
//
// The stream is replayed first, into a replay of its own under Root with the
// configuration given (every worker, and the write events applied in stream
// order by pkg/writes), and only then is the target's namespace replaced by
// what the replay made, store by store. Nothing is published to the live
// stream, so the live workers have nothing to process twice; but a worker or
// retriever writing to the namespace while it is replaced would have its
// write overwritten, so a rebuild runs with the stack stopped or the
// namespace's traffic held. A user with derived memory in target but no event
// in the stream is left alone (there is nothing to rebuild it from). The
// memories' change history (memhist) is not rebuilt.
func Rebuild(ctx context.Context, cfg RebuildConfig, live *eventstore.Store, target *app.Runtime, logger *zap.Logger) (RebuildSummary, error) {
	start := time.Now()
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	name := "rebuild-" + start.UTC().Format("20060102T150405")
	m, err := Run(ctx, Config{
		Root: cfg.Root, Name: name, Tenant: cfg.Tenant, User: cfg.User,
		ConfigFile: cfg.ConfigFile, Environ: cfg.Environ, Progress: cfg.Progress, Timeout: cfg.Timeout,
	}, live, logger)
	sum := RebuildSummary{Replay: m}
	if err != nil {
		return sum, fmt.Errorf("rebuild: %w (the partial replay %s is kept; drop it with agentmem replay drop)", err, name)
	}
	sh, err := Open(ctx, cfg.Root, cfg.Tenant, name, cfg.ConfigFile, cfg.Environ, logger)
	if err != nil {
		return sum, err
	}
	if sum.Users, err = streamUsers(ctx, sh.Runtime.Events, cfg.Tenant, cfg.User); err != nil {
		_ = sh.Close()
		return sum, err
	}
	for _, u := range sum.Users {
		if err := replaceUser(ctx, sh.Runtime, target, cfg.Tenant, u, &sum); err != nil {
			_ = sh.Close()
			return sum, fmt.Errorf("rebuild %s/%s: %w", cfg.Tenant, u, err)
		}
		fmt.Fprintf(cfg.Progress, "rebuilt %s/%s\n", cfg.Tenant, u)
	}
	if err := sh.Close(); err != nil {
		return sum, err
	}
	if err := Drop(cfg.Root, cfg.Tenant, name); err != nil {
		return sum, err
	}
	sum.Duration = time.Since(start)
	fmt.Fprintf(cfg.Progress, "rebuild of %s: %d users, %d events read (%d writes applied, %d failed), %d files, %d memories, %d session entries in %s\n",
		cfg.Tenant, len(sum.Users), m.EventsRead, m.WritesApplied, m.WritesFailed, sum.Files, sum.Memories, sum.SessionEntries, sum.Duration.Round(time.Millisecond))
	return sum, nil
}

// streamUsers are the users of the tenant's events in st (the replay's
// stream), or just user when set.
func streamUsers(ctx context.Context, st *eventstore.Store, tenant, user string) ([]string, error) {
	if user != "" {
		return []string{user}, nil
	}
	seen := map[string]bool{}
	err := st.Scan(ctx, eventstore.Query{Tenant: tenant}, func(s eventstore.Stored) (bool, error) {
		seen[s.Envelope.UserID] = true
		return true, nil
	})
	users := make([]string, 0, len(seen))
	for u := range seen {
		users = append(users, u)
	}
	slices.Sort(users)
	return users, err
}

// replaceUser replaces the user's files, vector records and session entries in
// target by those of the replay in from.
func replaceUser(ctx context.Context, from, target *app.Runtime, tenant, user string, sum *RebuildSummary) error {
	n, err := target.Docs.ReplaceNamespace(ctx, from.Docs, docNamespace(tenant, user))
	sum.Files += n
	if err != nil {
		return err
	}
	n, err = replaceVectors(ctx, from.Vectors, target.Vectors, vectorstore.Filter{Tenant: tenant, UserID: user, IncludeExpired: true})
	sum.Memories += n
	if err != nil {
		return err
	}
	n, err = target.Sessions.ReplaceUser(ctx, from.Sessions, tenant, user)
	sum.SessionEntries += n
	return err
}

// replaceVectors makes the records f selects in target those of from in one
// swap: both sides are read first, the rebuilt records written over the old
// ones, then the old ones the rebuild does not have deleted. When a step fails
// the old records are written back and the new ones deleted, so the user's
// memories are left as they were. It returns how many records it copied.
func replaceVectors(ctx context.Context, from, target vectorstore.Store, f vectorstore.Filter) (int, error) {
	fresh, err := scrollAll(ctx, from, f)
	if err != nil {
		return 0, err
	}
	old, err := scrollAll(ctx, target, f)
	if err != nil {
		return 0, err
	}
	ids := func(recs []vectorstore.Record, skip []vectorstore.Record) []string {
		seen := make(map[string]bool, len(skip))
		for _, r := range skip {
			seen[r.ID] = true
		}
		var out []string
		for _, r := range recs {
			if !seen[r.ID] {
				out = append(out, r.ID)
			}
		}
		return out
	}
	err = upsert(ctx, target, fresh)
	if err == nil {
		err = remove(ctx, target, f, ids(old, fresh))
	}
	if err != nil {
		if rerr := errors.Join(upsert(ctx, target, old), remove(ctx, target, f, ids(fresh, old))); rerr != nil {
			return 0, fmt.Errorf("replace memories: %w; putting them back failed too, they are half replaced: %w", err, rerr)
		}
		return 0, fmt.Errorf("replace memories: %w; they are as they were", err)
	}
	return len(fresh), nil
}

// scrollAll reads every record f selects.
func scrollAll(ctx context.Context, s vectorstore.Store, f vectorstore.Filter) ([]vectorstore.Record, error) {
	var all []vectorstore.Record
	offset := ""
	for {
		recs, next, err := s.Scroll(ctx, f, offset, 256)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
		if next == "" {
			return all, nil
		}
		offset = next
	}
}

func upsert(ctx context.Context, s vectorstore.Store, recs []vectorstore.Record) error {
	if len(recs) == 0 {
		return nil
	}
	return s.Upsert(ctx, recs...)
}

func remove(ctx context.Context, s vectorstore.Store, f vectorstore.Filter, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.Delete(ctx, f.Tenant, f.UserID, ids...)
	return err
}
