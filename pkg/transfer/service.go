package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/eventstore"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/memory"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/session"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// ErrInvalidConfig reports a Config or Deps that cannot work.
var ErrInvalidConfig = errors.New("transfer: invalid config")

// Config configures a Service.
type Config struct {
	// PageBytes bounds the encoded size of an export page; set it below the
	// connection's max_payload (default 700 KiB, for the 1 MiB default).
	PageBytes int
	// PageRecords is how many records a page reads from the vector store at a
	// time before cutting to PageBytes (default 200).
	PageRecords int
	// HistoryStream is the memory history stream (default memory.DefaultHistoryStream).
	HistoryStream string
	// DLQStream is the dead-letter stream (default bus.DefaultDLQStream).
	DLQStream string
	// WorkerBuckets are the KV buckets whose keys start "<tenant>.<user>"
	// (extractor, consolidator state); forget purges the user's keys there.
	WorkerBuckets []string
}

func (c *Config) setDefaults() {
	if c.PageBytes == 0 {
		c.PageBytes = 700 << 10
	}
	if c.PageRecords == 0 {
		c.PageRecords = 200
	}
	if c.HistoryStream == "" {
		c.HistoryStream = memory.DefaultHistoryStream
	}
	if c.DLQStream == "" {
		c.DLQStream = bus.DefaultDLQStream
	}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.PageBytes < 4<<10 {
		return fmt.Errorf("%w: PageBytes %d, want at least 4096", ErrInvalidConfig, c.PageBytes)
	}
	if c.PageRecords < 1 {
		return fmt.Errorf("%w: PageRecords %d, want at least 1", ErrInvalidConfig, c.PageRecords)
	}
	for _, b := range c.WorkerBuckets {
		if err := events.ValidateID("WorkerBuckets", b); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

// Deps are the stores a Service reads and writes.
type Deps struct {
	JS       jetstream.JetStream
	Docs     *docstore.Store
	Vectors  vectorstore.Store
	Embedder embed.Embedder
	Sessions *session.Store
	Events   *eventstore.Store
	// Keyring, when set, holds the keys that seal the users' KV values: forget
	// erases the user's, so what the buckets' files still hold of them is
	// unreadable.
	Keyring *kvcas.Keyring
	// ForgetLearned, when set, removes a forgotten user from where the agent
	// scopes' lessons were learned (extract.ForgetLearnedFrom) and returns how
	// many provenance records changed.
	ForgetLearned func(ctx context.Context, tenant, user string) (int, error)
}

// Service serves the export, import and forget endpoints on the stores,
// whatever their backends: everything goes through the store interfaces.
type Service struct {
	cfg    Config
	deps   Deps
	logger *zap.Logger
}

// New checks cfg and deps and returns a Service.
func New(cfg Config, deps Deps, logger *zap.Logger) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.JS == nil || deps.Docs == nil || deps.Vectors == nil || deps.Embedder == nil || deps.Sessions == nil || deps.Events == nil {
		return nil, fmt.Errorf("%w: every store of Deps is required", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Service{cfg: cfg, deps: deps, logger: logger.Named("transfer")}, nil
}

// EmbedderInfo names this deployment's embedder.
func (s *Service) EmbedderInfo() events.EmbedderInfo {
	return events.EmbedderInfo{Model: s.deps.Embedder.Name(), Dimensions: s.deps.Embedder.Dimensions()}
}

// Export answers one export page.
func (s *Service) Export(ctx context.Context, tenant string, req events.ExportRequest) (events.ExportReply, error) {
	if err := events.ValidateID("tenant", tenant); err != nil {
		return events.ExportReply{}, fmt.Errorf("%w: %w", events.ErrInvalidRequest, err)
	}
	limit := req.Limit
	if limit == 0 {
		limit = events.MaxIDsPerReq
	}
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	switch req.Part {
	case events.ExportInfo:
		users, skipped, err := s.Users(ctx, tenant)
		info := s.EmbedderInfo()
		return events.ExportReply{Embedder: &info, Users: users, SkippedUsers: skipped}, err
	case events.ExportFiles:
		return s.exportFiles(ctx, ns, req.Cursor, limit)
	case events.ExportRecords:
		return s.exportRecords(ctx, ns, req.Cursor, limit)
	default:
		return s.exportSessions(ctx, ns, req.Cursor, limit)
	}
}

// Users lists the users of tenant: those with files, records, session state or
// events. Names that are no valid id are returned apart, in skipped, and logged.
func (s *Service) Users(ctx context.Context, tenant string) (users, skipped []string, err error) {
	var all []string
	for _, list := range []func(context.Context, string) ([]string, error){s.deps.Docs.Users, s.deps.Vectors.Users, s.deps.Sessions.Users, s.deps.Events.Users} {
		some, err := list(ctx, tenant)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, some...)
	}
	slices.Sort(all)
	for _, u := range slices.Compact(all) {
		if err := events.ValidateID("user", u); err != nil {
			s.logger.Warn("a store names a user that is no valid id; skipped", zap.String("tenant", tenant), zap.Error(err))
			skipped = append(skipped, u)
			continue
		}
		users = append(users, u)
	}
	return users, skipped, nil
}

// page is a reply being filled up to a byte budget.
type page struct {
	budget, used, n, limit int
}

// fits reports whether an entry of size bytes goes in the page, and counts it if so.
// The first entry always goes in, so that a page is never empty.
func (p *page) fits(size int) bool {
	if p.n > 0 && (p.used+size > p.budget || p.n >= p.limit) {
		return false
	}
	p.used += size
	p.n++
	return true
}

// chunkOverhead bounds the JSON around a file chunk's data: the name, the offset
// and the field names.
const chunkOverhead = 64 + 255

// exportFiles pages through the namespace's files in name order. A cursor is
// "<name>@<offset>": the file and the byte to go on from.
func (s *Service) exportFiles(ctx context.Context, ns docstore.Namespace, cursor string, limit int) (events.ExportReply, error) {
	from, offset, err := parseFileCursor(cursor)
	if err != nil {
		return events.ExportReply{}, err
	}
	names, err := s.deps.Docs.Files(ctx, ns)
	if err != nil {
		return events.ExportReply{}, err
	}
	var rep events.ExportReply
	p := page{budget: s.cfg.PageBytes, limit: limit}
	for _, name := range names {
		if name < from {
			continue
		}
		if name != from {
			offset = 0
		}
		data, err := s.deps.Docs.ReadFile(ctx, ns, name)
		if errors.Is(err, docstore.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return events.ExportReply{}, err
		}
		for offset < len(data) || (offset == 0 && len(data) == 0) {
			// Base64 makes 4 bytes of 3; the chunk takes what is left of the page.
			room := max((p.budget-p.used-chunkOverhead)*3/4, 0)
			if p.n == 0 {
				room = max(room, 1)
			}
			n := min(len(data)-offset, room)
			if (n == 0 && len(data) > 0) || !p.fits(chunkOverhead+(n+2)/3*4) {
				rep.Next = name + "@" + strconv.Itoa(offset)
				return rep, nil
			}
			rep.Files = append(rep.Files, events.FileChunk{Name: name, Offset: offset, Data: data[offset : offset+n]})
			offset += n
			if len(data) == 0 {
				break
			}
		}
	}
	return rep, nil
}

func parseFileCursor(cursor string) (string, int, error) {
	if cursor == "" {
		return "", 0, nil
	}
	name, off, ok := strings.Cut(cursor, "@")
	offset, err := strconv.Atoi(off)
	if !ok || err != nil || offset < 0 {
		return "", 0, fmt.Errorf("%w: cursor %q is not a files cursor (<name>@<offset>)", events.ErrInvalidRequest, cursor)
	}
	return name, offset, nil
}

// exportRecords pages through the namespace's records, expired ones included,
// in id order; the cursor is the id to go on from.
func (s *Service) exportRecords(ctx context.Context, ns docstore.Namespace, cursor string, limit int) (events.ExportReply, error) {
	f := vectorstore.Filter{Tenant: ns.Tenant, UserID: ns.User, IncludeExpired: true}
	recs, next, err := s.deps.Vectors.Scroll(ctx, f, cursor, min(limit, s.cfg.PageRecords))
	if err != nil {
		if errors.Is(err, vectorstore.ErrInvalidFilter) {
			return events.ExportReply{}, fmt.Errorf("%w: cursor %q: %w", events.ErrInvalidRequest, cursor, err)
		}
		return events.ExportReply{}, err
	}
	rep := events.ExportReply{Next: next}
	p := page{budget: s.cfg.PageBytes, limit: limit}
	for _, r := range recs {
		w := WireRecord(r)
		data, err := json.Marshal(w)
		if err != nil {
			return events.ExportReply{}, fmt.Errorf("transfer: record %s: %w", r.ID, err)
		}
		if !p.fits(len(data)) {
			rep.Next = r.ID
			break
		}
		rep.Records = append(rep.Records, w)
	}
	return rep, nil
}

// exportSessions pages through the user's session values; the cursor is the
// session.KVCursor of the last value sent.
func (s *Service) exportSessions(ctx context.Context, ns docstore.Namespace, cursor string, limit int) (events.ExportReply, error) {
	keys, err := s.deps.Sessions.UserKeys(ctx, ns.Tenant, ns.User)
	if err != nil {
		return events.ExportReply{}, err
	}
	var rep events.ExportReply
	p := page{budget: s.cfg.PageBytes, limit: limit}
	for _, k := range keys {
		if cursor != "" && session.KVCursor(k) <= cursor {
			continue
		}
		v, err := s.deps.Sessions.ReadValue(ctx, ns.Tenant, ns.User, k)
		if errors.Is(err, session.ErrNotFound) {
			continue
		}
		if err != nil {
			return events.ExportReply{}, err
		}
		if !p.fits(len(v) + 128) {
			return rep, nil
		}
		k.Value = v
		rep.Sessions = append(rep.Sessions, k)
		rep.Next = session.KVCursor(k)
	}
	rep.Next = ""
	return rep, nil
}

// WireRecord is r as export sends it.
func WireRecord(r vectorstore.Record) events.Record {
	return events.Record{
		ID: r.ID, MemoryType: events.MemoryType(r.MemoryType), Scope: r.Scope, Kind: r.Kind, Key: r.Key,
		Text: r.Text, Vector: r.Vector, TS: r.TS, ChatID: r.ChatID, Who: r.Who, HitCount: r.HitCount,
		Confidence: r.Confidence, ExpiresAt: r.ExpiresAt, Metadata: r.Metadata,
	}
}

// storeRecord is w as the user's record in the vector store.
func storeRecord(tenant, user string, w events.Record) vectorstore.Record {
	return vectorstore.Record{
		ID: w.ID, Tenant: tenant, UserID: user, MemoryType: vectorstore.MemoryType(w.MemoryType), Scope: w.Scope, Kind: w.Kind, Key: w.Key,
		Text: w.Text, Vector: w.Vector, TS: w.TS, ChatID: w.ChatID, Who: w.Who, HitCount: w.HitCount,
		Confidence: w.Confidence, ExpiresAt: w.ExpiresAt, Metadata: w.Metadata,
	}
}

// Import writes one import page: file chunks, records and session values, each
// replacing what has its name, id or key. The records are embedded here with
// Reembed, or when their vectors are of another embedder than this one's (a
// page recorded as a write event applied again by a rebuild on another
// embedder): the vectors then come from the text alone, the same on every run.
func (s *Service) Import(ctx context.Context, tenant string, req events.ImportRequest) (events.ImportReply, error) {
	ns := docstore.Namespace{Tenant: tenant, User: req.UserID}
	var rep events.ImportReply
	for _, f := range req.Files {
		if err := s.deps.Docs.PutFile(ctx, ns, f.Name, f.Offset, f.Data); err != nil {
			return rep, invalidAs(err, docstore.ErrInvalidPath, docstore.ErrInvalidContent, docstore.ErrInvalidNamespace)
		}
		rep.Files++
	}
	if len(req.Records) > 0 {
		recs := make([]vectorstore.Record, len(req.Records))
		texts := make([]string, len(req.Records))
		for i, w := range req.Records {
			recs[i] = storeRecord(tenant, req.UserID, w)
			texts[i] = w.Text
			if req.FromTenant != "" && req.FromTenant != tenant {
				rebase(&recs[i])
			}
		}
		if req.Reembed || (req.Embedder != nil && *req.Embedder != s.EmbedderInfo()) {
			vecs, err := s.deps.Embedder.Embed(ctx, texts)
			if err != nil {
				return rep, err
			}
			for i := range recs {
				recs[i].Vector = vecs[i]
			}
		}
		if err := s.deps.Vectors.Upsert(ctx, recs...); err != nil {
			return rep, invalidAs(err, vectorstore.ErrInvalidRecord, vectorstore.ErrInvalidFilter, vectorstore.ErrDimension, vectorstore.ErrConflict)
		}
		rep.Records = len(recs)
	}
	for _, e := range req.Sessions {
		if err := s.deps.Sessions.Load(ctx, tenant, req.UserID, e); err != nil {
			return rep, err
		}
		rep.Sessions++
	}
	return rep, nil
}

// rebase gives r, imported from another tenant, the id it has in its new
// tenant: an item the one the item endpoints derive from its address, any other
// record one derived from its old id (stable, so importing twice is once), and
// the ids its metadata refers to likewise.
func rebase(r *vectorstore.Record) {
	if r.MemoryType == vectorstore.Item {
		r.ID = memory.ItemID(r.Tenant, r.UserID, events.Scope(r.Scope), events.ItemKind(r.Kind), r.Key, r.ChatID)
		return
	}
	newID := func(old string) string { return vectorstore.DeterministicID("import", r.Tenant, r.UserID, old) }
	r.ID = newID(r.ID)
	for _, key := range []string{records.MetaMergedFromIDs, records.MetaSeparatedFromIDs} {
		refs, ok := r.Metadata[key].([]any)
		if !ok {
			continue
		}
		out := make([]any, len(refs))
		for i, ref := range refs {
			if id, ok := ref.(string); ok {
				out[i] = newID(id)
			} else {
				out[i] = ref
			}
		}
		r.Metadata[key] = out
	}
}

// invalidAs marks err as the request's fault (a 400) when it wraps one of kinds.
func invalidAs(err error, kinds ...error) error {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return fmt.Errorf("%w: %w", events.ErrInvalidRequest, err)
		}
	}
	return err
}

// Forget erases the user everywhere this deployment keeps something of them and
// counts what it removed. The events go first, so that no worker derives new
// memory from them while the stores are emptied; a user still sending
// observations while forgotten leaves what arrives after.
func (s *Service) Forget(ctx context.Context, tenant string, req events.ForgetRequest) (events.ForgetReply, error) {
	var (
		rep events.ForgetReply
		err error
	)
	user := req.UserID
	if rep.Events, err = s.deps.Events.DeleteUser(ctx, tenant, user); err != nil {
		return rep, err
	}
	if rep.DeadLetters, err = bus.DeleteUserDeadLetters(ctx, s.deps.JS, s.cfg.DLQStream, tenant, user); err != nil {
		return rep, err
	}
	if rep.Files, err = s.deps.Docs.DeleteNamespace(ctx, docstore.Namespace{Tenant: tenant, User: user}); err != nil {
		return rep, err
	}
	all := vectorstore.Filter{Tenant: tenant, UserID: user, IncludeExpired: true}
	items := all
	items.MemoryTypes = []vectorstore.MemoryType{vectorstore.Item}
	if rep.Items, err = s.deps.Vectors.Count(ctx, items); err != nil {
		return rep, err
	}
	n, err := s.deps.Vectors.DeleteByFilter(ctx, all)
	if err != nil {
		return rep, err
	}
	rep.Memories = max(n-rep.Items, 0)
	if rep.SessionKeys, rep.Turns, err = s.deps.Sessions.DeleteUser(ctx, tenant, user); err != nil {
		return rep, err
	}
	for _, b := range s.cfg.WorkerBuckets {
		n, err := kvcas.PurgeKeys(ctx, s.deps.JS, b, tenant+"."+user, tenant+"."+user+".>")
		if err != nil {
			return rep, err
		}
		rep.WorkerKeys += n
	}
	if s.deps.ForgetLearned != nil {
		if rep.Provenance, err = s.deps.ForgetLearned(ctx, tenant, user); err != nil {
			return rep, err
		}
	}
	if _, rep.History, err = kvcas.EraseStream(ctx, s.deps.JS, s.cfg.HistoryStream, memory.HistoryUserFilter(tenant, user)); err != nil {
		return rep, err
	}
	if s.deps.Keyring != nil {
		if err := s.deps.Keyring.Erase(ctx, tenant, user); err != nil {
			return rep, err
		}
	}
	s.logger.Info("forgot user", zap.String("tenant", tenant), zap.String("user", user), zap.Any("removed", rep))
	return rep, nil
}
