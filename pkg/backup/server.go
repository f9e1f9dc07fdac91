package backup

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/bus"
)

// Subjects of the backup endpoints. They are outside memrpc.<tenant>, so a
// tenant credential cannot reach them; the service credential can.
const (
	SubjectBegin = "memadmin.backup.begin"
	SubjectEnd   = "memadmin.backup.end"
)

// ObjectBucket is the object store the Server puts its copies of the vector
// store and the Markdown tree in for the client to fetch; the client deletes it.
const ObjectBucket = "agentmem_backup"

// Defaults of ServerConfig.
const (
	DefaultMaxHold = 10 * time.Minute
	DefaultDrain   = 30 * time.Second
)

// ServerConfig configures the backup endpoints.
type ServerConfig struct {
	// Stream is the event stream whose consumers are paused; default bus.DefaultStream.
	Stream string
	// MaxHold ends a hold no end request released (a client that died); default
	// DefaultMaxHold.
	MaxHold time.Duration
	// Drain bounds the wait for the messages in flight; default DefaultDrain.
	Drain time.Duration
	// Replicas of the object store bucket; default 1.
	Replicas int
	// Markdown is the filesystem Markdown tree; "" when the Markdown is in its KV
	// bucket (memory.backend jetstream), which the stream snapshots hold.
	Markdown string
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.Stream == "" {
		c.Stream = bus.DefaultStream
	}
	if c.MaxHold == 0 {
		c.MaxHold = DefaultMaxHold
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

// Validate reports configuration errors of c after defaults are applied.
func (c ServerConfig) Validate() error {
	c = c.withDefaults()
	if c.MaxHold < 0 || c.Drain < 0 || c.Replicas < 1 {
		return fmt.Errorf("%w: MaxHold %s, Drain %s and Replicas %d must be positive", ErrInvalidConfig, c.MaxHold, c.Drain, c.Replicas)
	}
	return nil
}

// FileSnapshotter is a vector store that copies itself into a file while open
// (embedded.Store).
type FileSnapshotter interface {
	Snapshot(ctx context.Context, path string) error
}

// ServerDeps are what the Server works with.
type ServerDeps struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	// HoldWrites holds the write requests until release (retrieve.Service).
	HoldWrites func() (release func())
	// Vectors copies the vector store; nil: a store the backup cannot copy
	// (begin fails with ErrUnsupported).
	Vectors FileSnapshotter
	// VectorBackend is what Vectors copies: VectorEmbedded (the default, into
	// VectorsFile) or VectorQdrant (a Qdrant value, into QdrantFile).
	VectorBackend string
}

func (d ServerDeps) vectorBackend() string {
	if d.VectorBackend == "" {
		return VectorEmbedded
	}
	return d.VectorBackend
}

// BeginReply is the answer to a begin request: the cut and the objects to fetch.
type BeginReply struct {
	ID      string   `json:"id,omitempty"`
	Cut     Cut      `json:"cut"`
	Objects []string `json:"objects,omitempty"`
	// Markdown: "filesystem" or "jetstream", as in the Manifest.
	Markdown string `json:"markdown,omitempty"`
	// Vector is the vector store's backend, as in the Manifest.
	Vector string `json:"vector,omitempty"`
	Error  string `json:"error,omitempty"`
}

// EndRequest releases the hold of the backup ID.
type EndRequest struct {
	ID string `json:"id"`
}

// Server answers the backup endpoints in the process that owns the stores.
type Server struct {
	cfg    ServerConfig
	deps   ServerDeps
	logger *zap.Logger

	mu   sync.Mutex
	hold *hold // nil: no backup running
}

// hold is a running backup: writes held and consumers paused until end.
type hold struct {
	id        string
	consumers []string
	release   func()
	timer     *time.Timer
}

// NewServer checks cfg and returns a Server; Run serves it.
func NewServer(cfg ServerConfig, deps ServerDeps, logger *zap.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Conn == nil || deps.JS == nil || deps.HoldWrites == nil {
		return nil, fmt.Errorf("%w: Conn, JS and HoldWrites are required", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Server{cfg: cfg.withDefaults(), deps: deps, logger: logger}, nil
}

// Run serves the endpoints until ctx ends, then releases a hold still running.
func (s *Server) Run(ctx context.Context) error {
	var subs []*nats.Subscription
	for subject, handle := range map[string]func(context.Context, []byte) any{SubjectBegin: s.begin, SubjectEnd: s.end} {
		sub, err := s.deps.Conn.QueueSubscribe(subject, "agentmem-backup", func(m *nats.Msg) {
			reply, _ := json.Marshal(handle(ctx, m.Data))
			_ = m.Respond(reply)
		})
		if err != nil {
			return fmt.Errorf("backup: subscribe %s: %w", subject, err)
		}
		subs = append(subs, sub)
	}
	<-ctx.Done()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		s.endHold(context.Background())
	}
	return nil
}

// begin holds the writes, pauses the consumers, waits for the messages in
// flight and copies the stores; the hold lasts until end or MaxHold.
func (s *Server) begin(ctx context.Context, _ []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		return BeginReply{Error: fmt.Sprintf("%v (%s)", ErrBusy, s.hold.id)}
	}
	if s.deps.Vectors == nil {
		return BeginReply{Error: fmt.Sprintf("%v: the vector store cannot be copied by agentmem backup (Qdrant: set vector.qdrant.http_url, its REST API, for its snapshot API)", ErrUnsupported)}
	}
	h := &hold{id: time.Now().UTC().Format("20060102T150405.000000000Z"), release: s.deps.HoldWrites()}
	s.hold = h
	reply, err := s.cut(ctx, h)
	if err != nil {
		s.endHold(ctx)
		return BeginReply{Error: err.Error()}
	}
	h.timer = time.AfterFunc(s.cfg.MaxHold, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.hold == h {
			s.logger.Warn("backup: no end request within the hold time; resuming", zap.String("id", h.id), zap.Duration("max_hold", s.cfg.MaxHold))
			s.endHold(context.Background())
		}
	})
	return reply
}

// cut pauses the consumers of h, waits until none has a message in flight and
// copies the stores into the object store.
func (s *Server) cut(ctx context.Context, h *hold) (BeginReply, error) {
	stream, err := s.deps.JS.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return BeginReply{}, fmt.Errorf("backup: stream %s: %w", s.cfg.Stream, err)
	}
	// A pause with a deadline: if this process dies holding it, the consumers
	// resume by themselves.
	until := time.Now().Add(s.cfg.MaxHold)
	// The workers' durable consumers; readers' ephemeral ones change nothing.
	infos := stream.ListConsumers(ctx)
	for ci := range infos.Info() {
		if ci.Config.Durable == "" {
			continue
		}
		if _, err := s.deps.JS.PauseConsumer(ctx, s.cfg.Stream, ci.Name, until); err != nil {
			return BeginReply{}, fmt.Errorf("backup: pause consumer %s: %w", ci.Name, err)
		}
		h.consumers = append(h.consumers, ci.Name)
	}
	if err := infos.Err(); err != nil {
		return BeginReply{}, fmt.Errorf("backup: list consumers of %s: %w", s.cfg.Stream, err)
	}
	floors, err := s.drain(ctx, stream, h.consumers)
	if err != nil {
		return BeginReply{}, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return BeginReply{}, fmt.Errorf("backup: stream %s: %w", s.cfg.Stream, err)
	}
	reply := BeginReply{ID: h.id, Cut: Cut{Stream: s.cfg.Stream, Sequence: info.State.LastSeq, Consumers: floors}, Markdown: "jetstream", Vector: s.deps.vectorBackend()}
	if reply.Objects, err = s.copyStores(ctx); err != nil {
		return BeginReply{}, err
	}
	if s.cfg.Markdown != "" {
		reply.Markdown = "filesystem"
	}
	return reply, nil
}

// drain waits until no consumer has a message delivered and not acknowledged,
// and returns each one's ack floor.
func (s *Server) drain(ctx context.Context, stream jetstream.Stream, consumers []string) (map[string]uint64, error) {
	deadline := time.Now().Add(s.cfg.Drain)
	for {
		floors, busy, pending := map[string]uint64{}, "", 0
		for _, name := range consumers {
			c, err := stream.Consumer(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("backup: consumer %s: %w", name, err)
			}
			ci := c.CachedInfo()
			floors[name] = ci.AckFloor.Stream
			if ci.NumAckPending > 0 && busy == "" {
				busy, pending = name, ci.NumAckPending
			}
		}
		if busy == "" {
			return floors, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: consumer %s still has %d after %s; try again (nothing was copied)", ErrNotDrained, busy, pending, s.cfg.Drain)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// copyStores puts the vector store's copy and the Markdown tree's into the
// object store and returns their names.
func (s *Server) copyStores(ctx context.Context) ([]string, error) {
	tmp, err := os.MkdirTemp("", "agentmem-backup-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	vectors := VectorsFile
	if s.deps.vectorBackend() == VectorQdrant {
		vectors = QdrantFile
	}
	if err := s.deps.Vectors.Snapshot(ctx, filepath.Join(tmp, vectors)); err != nil {
		return nil, fmt.Errorf("backup: copy the vector store: %w", err)
	}
	objects := []string{vectors}
	if s.cfg.Markdown != "" {
		if err := tarDir(s.cfg.Markdown, filepath.Join(tmp, MarkdownFile)); err != nil {
			return nil, fmt.Errorf("backup: copy the Markdown tree: %w", err)
		}
		objects = append(objects, MarkdownFile)
	}
	store, err := s.deps.JS.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: ObjectBucket, Description: "agentmem backup in progress", Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("backup: object store %s: %w", ObjectBucket, err)
	}
	for _, name := range objects {
		if err := putFile(ctx, store, name, filepath.Join(tmp, name)); err != nil {
			return nil, fmt.Errorf("backup: put %s: %w", name, err)
		}
	}
	return objects, nil
}

// putFile puts the file at path into store as name (PutFile would name it by
// its path).
func putFile(ctx context.Context, store jetstream.ObjectStore, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = store.Put(ctx, jetstream.ObjectMeta{Name: name}, f)
	return err
}

// end releases the hold the request names.
func (s *Server) end(ctx context.Context, data []byte) any {
	var req EndRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return BeginReply{Error: fmt.Sprintf("backup: bad end request: %v", err)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil || s.hold.id != req.ID {
		return BeginReply{Error: fmt.Sprintf("backup: no backup %q is running (it may have passed its hold time)", req.ID)}
	}
	s.endHold(ctx)
	return BeginReply{ID: req.ID}
}

// endHold resumes the consumers and the writes; s.mu is held.
func (s *Server) endHold(ctx context.Context) {
	h := s.hold
	s.hold = nil
	if h.timer != nil {
		h.timer.Stop()
	}
	for _, name := range h.consumers {
		if _, err := s.deps.JS.ResumeConsumer(ctx, s.cfg.Stream, name); err != nil {
			// The pause's deadline resumes it anyway.
			s.logger.Error("backup: resume consumer", zap.String("consumer", name), zap.Error(err))
		}
	}
	h.release()
}

// tarDir writes the regular files under dir into a tar file at path.
func tarDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // no Markdown written yet
	}
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
