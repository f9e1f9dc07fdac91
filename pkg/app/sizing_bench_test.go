package app_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// BenchmarkSizing measures the disk the stack takes per observation, per
// memory and per byte of Markdown (docs/operations.md, "Sizing"): users'
// sessions of chat messages about 150 bytes long go through the whole stack
// (offline models), then
//
//   - stream-B/event: the AGENTMEM stream's bytes (the observations and what
//     the workers derived from them) per observation;
//   - jetstream-B/event: the embedded server's whole store directory (every
//     stream and KV bucket with their indexes) per observation;
//   - vector-B/memory: vectors.db (and its WAL) per record it holds;
//   - markdown-disk/live: the Markdown directory on disk (backups, policy
//     files) over the bytes of the live files (MEMORY.md, topic files, notes).
//
// Run with
//
//	go test -run '^$' -bench Sizing -benchtime 1x ./pkg/app/
func BenchmarkSizing(b *testing.B) {
	const users, sessions, messages = 10, 5, 40
	stack, cfg := apptest.Up(b)
	cl := apptest.Client(b, stack, "acme")
	ctx := context.Background()
	observations := 0
	for b.Loop() {
		for u := range users {
			for s := range sessions {
				user, session := fmt.Sprintf("u%d", u), fmt.Sprintf("s%d", s)
				for m := range messages {
					text := fmt.Sprintf("Remember: the %s report number %d goes to the finance team every %s as a bar chart with a dark theme.",
						[]string{"sales", "stock", "payroll", "travel"}[m%4], m, []string{"Monday", "Friday", "month end"}[m%3])
					if _, err := cl.Say(ctx, user, session, events.RoleUser, text, nil); err != nil {
						b.Fatal(err)
					}
					observations++
				}
				if _, err := cl.EndSession(ctx, user, session); err != nil {
					b.Fatal(err)
				}
			}
		}
		apptest.WaitIdle(b, stack)
	}
	rt := stack.Runtime()
	stream, err := rt.JS.Stream(ctx, bus.DefaultStream)
	if err != nil {
		b.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	memories := 0
	for u := range users {
		n, err := rt.Vectors.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: fmt.Sprintf("u%d", u), IncludeExpired: true})
		if err != nil {
			b.Fatal(err)
		}
		memories += n
	}
	live, all := 0, 0
	err = filepath.WalkDir(cfg.Memory.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		all += int(fi.Size())
		if strings.HasSuffix(p, ".md") && !strings.Contains(p, string(filepath.Separator)+"backups"+string(filepath.Separator)) {
			live += int(fi.Size())
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(info.State.Bytes)/float64(observations), "stream-B/event")
	b.ReportMetric(float64(dirBytes(b, cfg.NATS.Embedded.StoreDir))/float64(observations), "jetstream-B/event")
	b.ReportMetric(float64(fileBytes(cfg.Vector.Path)+fileBytes(cfg.Vector.Path+"-wal"))/float64(max(memories, 1)), "vector-B/memory")
	b.ReportMetric(float64(memories)/float64(observations), "memories/event")
	b.ReportMetric(float64(all)/float64(max(live, 1)), "markdown-disk/live")
	b.ReportMetric(float64(live)/float64(observations), "markdown-B/event")
}

func fileBytes(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n += fileBytes(p)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
