package embedded

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// MemoryPath is the Config.Path of a store that lives only in memory.
const MemoryPath = ":memory:"

// Config configures the embedded store.
type Config struct {
	// Path is the SQLite database file, created if missing; MemoryPath keeps
	// everything in memory (tests). Required.
	Path string
	// Dimensions is the dense vector length. Required; a file created with one value
	// refuses to open with another.
	Dimensions int
	// BusyTimeout is how long a statement waits for a lock held by another connection;
	// default 5s.
	BusyTimeout time.Duration
	// CheckpointInterval is how often the written WAL pages are copied into the
	// database file, in the background rather than inside a commit (and sooner once
	// the WAL is past WALRestartPages); default DefaultCheckpointInterval.
	CheckpointInterval time.Duration
	// WALRestartPages bounds the WAL file: once it holds more pages than this, a
	// checkpoint holds writes back while it copies the last ones, so that the next
	// write starts the file over; default DefaultWALRestartPages.
	WALRestartPages int
	// WriteCacheMiB is the page cache of the connection that writes; default
	// DefaultWriteCacheMiB. Why larger than SQLite's default (2 MiB): a
	// transaction's dirty pages must fit in it, or SQLite spills them into the
	// WAL mid-transaction and reads them back at the commit to checksum them
	// again (pagerStress, walRewriteChecksums). A record dirties a table page and
	// a leaf of each index; with random ids (agentmem bench's load, batches of
	// 1,000) nearly every record another id leaf, so a batch dirtied ~16 MiB and
	// the spill was 18% of the CPU profile of BenchmarkUpsertLargeStore's
	// 300,000-record prefill at 2 MiB, 5% at 16 and none at 64 (which costs
	// ~90 MB more RSS in agentmem bench). Ingest's batches (128 records,
	// time-ordered ids) dirty ~2 MiB even at 1,000,000 records. Only the
	// writer's connection has it: a partition load reads the table once, and a
	// reader's cache would only hold what it read. It costs its size in RSS once
	// the writes have filled it.
	WriteCacheMiB int
	// ANNThreshold is how many records of one memory type a partition holds
	// before its dense searches use an HNSW graph (built in the background)
	// rather than scan them all; default DefaultANNThreshold, negative never.
	ANNThreshold int
	// ANNBeam is the graph search's least beam (HNSW's ef); a search uses the
	// largest of it, the number of results asked and the graph's size over
	// annNodesPerBeam. Default DefaultANNBeam.
	ANNBeam int
	// GraphSaveNodes is how many nodes a partition's graphs gain before the
	// indexer writes their graph file again (or as many as the file held, if
	// more), besides the save at Close; default DefaultGraphSaveNodes, negative
	// only at Close. Graph files (graphfile.go) let a restarted store search
	// its graphs at once; a MemoryPath store keeps none.
	GraphSaveNodes int
	// PartitionFileMin is how many live records a loaded partition holds for
	// Close to save it in a partition file, which the next New loads instead of
	// reading the partition from SQLite (partfile.go); default
	// DefaultPartitionFileMin, negative never. A MemoryPath store keeps none.
	PartitionFileMin int
	// MaxLoadedRecords bounds the records of the partitions held in memory:
	// past it, the least recently read partitions are dropped and loaded again
	// from SQLite on their next read (evict.go). Default
	// DefaultMaxLoadedRecords, negative no bound. Records rather than bytes:
	// the count is exact and kept for free by every write, and a record's
	// cost is near constant for a deployment (its vector, 4·Dimensions bytes,
	// and a sentence or two of text); a byte estimate would still guess the
	// allocator's and the maps' share. The most recently read partition is
	// kept even when larger than the bound: size it above the records one
	// context request reads (a user's, its agent's and its tenant's).
	MaxLoadedRecords int
}

const (
	// DefaultWriteCacheMiB: see Config.WriteCacheMiB.
	DefaultWriteCacheMiB = 16
	// DefaultANNThreshold: below it, a scan of the type's records costs less
	// than a millisecond, and a graph is memory and background work for no gain.
	DefaultANNThreshold = 5000
	// DefaultANNBeam is the smallest beam measured to reach recall@10 0.98
	// against exact search on the local embedder's vectors of 20,000 records
	// (0.988; 128 gave 0.980); clustered random vectors reach 1.0 at 64
	// (BenchmarkANNRecall).
	DefaultANNBeam = 192
)

func (c *Config) setDefaults() {
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.WALRestartPages == 0 {
		c.WALRestartPages = DefaultWALRestartPages
	}
	c.WriteCacheMiB = cmp.Or(c.WriteCacheMiB, DefaultWriteCacheMiB)
	c.ANNThreshold = cmp.Or(c.ANNThreshold, DefaultANNThreshold)
	c.ANNBeam = cmp.Or(c.ANNBeam, DefaultANNBeam)
	c.GraphSaveNodes = cmp.Or(c.GraphSaveNodes, DefaultGraphSaveNodes)
	c.PartitionFileMin = cmp.Or(c.PartitionFileMin, DefaultPartitionFileMin)
	c.MaxLoadedRecords = cmp.Or(c.MaxLoadedRecords, DefaultMaxLoadedRecords)
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("Path is required"))
	}
	if strings.ContainsRune(c.Path, '?') {
		errs = append(errs, fmt.Errorf("Path %q must not contain '?'", c.Path))
	}
	if c.Dimensions < 1 {
		errs = append(errs, fmt.Errorf("Dimensions is %d, want > 0", c.Dimensions))
	}
	if c.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("BusyTimeout is %s, want >= 0", c.BusyTimeout))
	}
	if c.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("CheckpointInterval is %s, want >= 0", c.CheckpointInterval))
	}
	if c.WALRestartPages < 0 {
		errs = append(errs, fmt.Errorf("WALRestartPages is %d, want >= 0", c.WALRestartPages))
	}
	if c.WriteCacheMiB < 0 {
		errs = append(errs, fmt.Errorf("WriteCacheMiB is %d, want >= 0", c.WriteCacheMiB))
	}
	if c.ANNBeam < 0 {
		errs = append(errs, fmt.Errorf("ANNBeam is %d, want >= 0", c.ANNBeam))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: embedded: %w", vectorstore.ErrInvalidConfig, err)
	}
	return nil
}

// Store is the one-machine vectorstore.Store: records in SQLite (modernc.org/sqlite, pure Go,
// WAL) as the durable copy, and every read served from memory: a (tenant, user)
// partition is loaded whole on its first read and then kept in sync by every write.
//
// Why reads never touch SQLite once a partition is loaded: a context request runs
// two searches and a scroll, and in SQLite each one cost a candidate select, a
// re-select of the winners and a JSON decode of every returned record's metadata
// (together about 90% of a search and the bulk of the retriever's latency). In
// memory a search is a scan of the partition's records.
//
// Keyword (sparse) search, the offline default, walks the query terms' posting
// lists, which every write keeps up to date (lexIndex), and reads only the
// records they reach: its cost grows with how many records share the query's
// words, not with the partition. It skips, exactly, the records that cannot
// make the asked top k (MaxScore, lexIndex.topScores). Dense search scans the records of the asked
// type exactly until the partition holds ANNThreshold of that type; from then on
// an HNSW graph of the type (annIndex, hnsw), built and extended in the
// background by the store's indexer, answers for the records it holds and an
// exact scan for the newer ones. The graphs are saved in graph files
// (graphfile.go) and come back with their partition after a restart. Nothing is
// built when the store opens: a partition is loaded on its first read (or, if
// it was large and in memory at the last Close, from its partition file in the
// background from the open on: partfile.go) and searchable at once, exactly while
// its graph catches up. With the default beam the graph's recall@10 against the
// exact scan is 0.988 (20,000 records) and 0.987 (100,000) on the local
// embedder's vectors of real prose, 1.0 on clustered random vectors
// (BenchmarkANNRecall, BENCHMARKS.md).
//
// Memory: a loaded record costs its normalised vector (4·Dimensions bytes), its
// strings, its terms and its metadata as JSON: about 2.6 KB and 8 heap objects at
// 384 dimensions with the pipeline's metadata (BenchmarkPartitionHeap), so 100,000
// records take about 260 MB. Few objects matter as much as few bytes: every GC
// cycle marks them all (see entry). The loaded records are bounded by
// Config.MaxLoadedRecords, the least recently read partitions dropped past it
// (evict.go), plus at most maxEmptyParts partitions read without records, and
// Count does not load a partition (SQLite counts it).
//
// Records returned by reads share their Vector (normalised to unit length, as
// Qdrant's cosine collections return it) with the cache and with other callers:
// treat it as read-only. Each read decodes its own Metadata. A write never changes
// a record already handed out; it replaces the cached one.
//
// Why the sparse side is BM25 in memory rather than SQLite FTS5: FTS5 was measured
// first (contentless table, terms prefixed per partition so posting lists stay
// small, MATCH built from quoted bm25.Tokenize terms). At 100,000 records its MATCH
// plus bm25() alone cost 0.2–0.6 ms per query (a seek per term per segment, and a
// docsize lookup per row), more than the whole search budget, and only a full
// 'optimize' (0.4 s, blocking writes) brought it down. Scoring the partition with
// pkg/bm25 costs microseconds, uses the exact tokenizer and scorer the Markdown
// search uses, cannot be injected into (no query language), and takes the
// partition as the corpus, so one user's statistics never depend on another's.
//
// One process owns a database file: New takes an exclusive lock on
// Path+".lock", because the in-memory partitions would go stale if another process
// wrote to the file.
//
// Every call goes through vectorstore.Validating, which checks and normalises its
// arguments before the backend sees them.
type Store struct {
	vectorstore.Store
	b *backend
}

// Checkpoint copies every committed write into the database file and empties the
// WAL; see backend.Checkpoint.
func (s *Store) Checkpoint(ctx context.Context) error { return s.b.Checkpoint(ctx) }

// backend is the Store behind vectorstore.Validating.
//
// Locks: checkpointMu serialises checkpoints (SQLite runs one at a time, and a
// second one fails at once instead of waiting); writeMu serialises writes and
// partition loads (SQLite allows one writer anyway), so that a partition in memory
// always matches the committed rows; cacheMu guards the partition map and the
// partitions' contents (their BM25 postings included, which every write keeps up
// to date); a partition's lazyMu guards only its lazily rebuilt id orders.
// A graph's mu (annIndex) guards the graph: searches hold it shared, the indexer
// exclusively for annBatch insertions, both under cacheMu shared.
// Order: checkpointMu, then writeMu, then cacheMu, then lazyMu or a graph's mu,
// then the indexer's queue lock; never the reverse. graphMu (graph files) comes
// before cacheMu and is never held with writeMu. evictMu (evict.go) comes
// before graphMu and cacheMu and is never held with writeMu. Reads take only
// cacheMu (shared) and a graph's mu (shared), once their partition is loaded.
type backend struct {
	cfg Config
	db  *sql.DB
	// writer begins the write transactions: a connection of its own (wconn) in
	// a file, so that its page cache (Config.WriteCacheMiB) holds the index
	// pages the writes keep touching; the pool for MemoryPath, whose one
	// connection is everything.
	writer interface {
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
	}
	wconn  *sql.Conn
	lock   *flock.Flock
	logger *zap.Logger
	closed atomic.Bool

	checkpointMu sync.Mutex
	writeMu      sync.Mutex
	cacheMu      sync.RWMutex
	parts        map[partKey]*partition
	// emptyParts are the partitions loaded without records that parts keeps,
	// oldest first, at most maxEmptyParts (keepEmpty); under writeMu and cacheMu.
	emptyParts []partKey
	indexer    *indexer
	// loaded is the records of the partitions in parts, under cacheMu; clock
	// stamps the partitions' reads (touch). Both are for eviction (evict.go),
	// which evictMu serialises; evictions counts the partitions dropped.
	loaded    int
	clock     atomic.Int64
	evictMu   sync.Mutex
	evictions atomic.Int64
	// graphMu serialises the writing and the erasure of graph files
	// (saveGraphs); it comes before cacheMu.
	graphMu sync.Mutex

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// uncheckpointed is set by every commit and cleared by the checkpointer.
	uncheckpointed atomic.Bool
	// walPath is the WAL file, "" for MemoryPath; walFull wakes the checkpointer
	// before its interval (wakeIfWALFull).
	walPath         string
	walFull         chan struct{}
	stopCheckpoints context.CancelFunc // nil for MemoryPath, which has no WAL
	checkpointsDone chan struct{}

	// partFiles are the partition files this start trusts, nil once none is
	// (partfile.go); under writeMu. stopPreload and preloadDone end and await
	// their loading (preloadPartFiles); nil when there is none.
	partFiles   *partFiles
	stopPreload context.CancelFunc
	preloadDone chan struct{}
}

var _ vectorstore.Backend = (*backend)(nil)

// maxCachedStmts bounds the prepared statement cache; statement shapes depend only
// on which filter fields are set, so real workloads use a handful.
const maxCachedStmts = 256

// New opens (creating if needed) the store at cfg.Path.
func New(cfg Config, logger *zap.Logger) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	s := &backend{
		cfg:     cfg,
		logger:  logger.With(zap.String("vectorstore", cfg.Path)),
		parts:   make(map[partKey]*partition),
		stmts:   make(map[string]*sql.Stmt),
		walFull: make(chan struct{}, 1),
	}
	if cfg.Path != MemoryPath {
		s.walPath = cfg.Path + "-wal"
		s.lock = flock.New(cfg.Path + ".lock")
		ok, err := s.lock.TryLock()
		if err != nil {
			return nil, fmt.Errorf("vectorstore: embedded %s: lock: %w", cfg.Path, err)
		}
		if !ok {
			return nil, fmt.Errorf("vectorstore: embedded %s: already open in another store or process", cfg.Path)
		}
	}
	pf := s.takePartFiles()
	if err := s.open(); err != nil {
		s.unlock()
		return nil, fmt.Errorf("vectorstore: embedded %s: %w", cfg.Path, err)
	}
	if cfg.Path != MemoryPath {
		s.startCheckpoints()
	}
	s.indexer = newIndexer(&s.cacheMu, s.saveGraphsLogged, max(0, cfg.GraphSaveNodes))
	if pf != nil {
		s.preloadPartFiles(pf)
	}
	s.logger.Info("vector store opened", zap.Int("dimensions", cfg.Dimensions))
	return &Store{Store: vectorstore.Validating(s), b: s}, nil
}

// Dimensions implements vectorstore.Backend.
func (s *backend) Dimensions() int { return s.cfg.Dimensions }

func (s *backend) open() error {
	dsn := s.cfg.Path + "?_txlock=immediate" +
		"&_pragma=busy_timeout(" + strconv.FormatInt(s.cfg.BusyTimeout.Milliseconds(), 10) + ")" +
		// page_size takes effect only while the file is new: the driver runs the
		// _pragma list before _journal_mode, whose switch to WAL creates the file.
		// A file made with another page size keeps it (changing it needs a VACUUM).
		"&_pragma=page_size(" + strconv.Itoa(pageBytes) + ")" +
		// synchronous=NORMAL in WAL mode: a commit is durable once written to the WAL
		// (it survives the process crashing), not fsynced; a power loss or OS crash
		// may lose the last commits. Checkpoints fsync, and run in the background
		// (checkpoint.go), so SQLite's own, inside the commit, is off.
		// journal_size_limit: a WAL started over is cut back to the bound, not left at
		// its largest size.
		"&_journal_mode=WAL&_synchronous=NORMAL&_pragma=wal_autocheckpoint(0)" +
		"&_pragma=journal_size_limit(" + strconv.Itoa(s.cfg.WALRestartPages*walPageBytes) + ")" +
		// temp_store(memory): a multi-row upsert keeps a statement journal of the
		// pages it changes (to undo the statement alone if a row fails), and past
		// 64 KiB SQLite spills it to a temporary file, a write syscall per page that
		// cost more than the statement saved. Nothing else here makes temporary data
		// (a VACUUM, which copies the whole file, now would in memory).
		"&_pragma=temp_store(memory)" +
		// secure_delete: a deleted row's bytes are overwritten with zeros, not left in
		// a free page or cell for the file to keep (agentmem forget erases).
		"&_pragma=secure_delete(on)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	if s.cfg.Path == MemoryPath {
		// Every connection to ":memory:" is a separate, empty database.
		db.SetMaxOpenConns(1)
	}
	// Keep connections (and the statements prepared on them) instead of reopening.
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(0)
	s.db = db
	ctx := context.Background()
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return fmt.Errorf("creating schema: %w", err)
		}
	}
	if err := s.checkDimensions(ctx); err != nil {
		db.Close()
		return err
	}
	s.writer = db
	if s.cfg.Path != MemoryPath {
		if s.wconn, err = db.Conn(ctx); err == nil {
			_, err = s.wconn.ExecContext(ctx, "PRAGMA cache_size = -"+strconv.Itoa(s.cfg.WriteCacheMiB<<10))
		}
		if err != nil {
			db.Close()
			return fmt.Errorf("write connection: %w", err)
		}
		s.writer = s.wconn
	}
	return nil
}

// checkDimensions records the dimension count in a new file and refuses a file
// made with another: its vectors would not be comparable with the queries.
func (s *backend) checkDimensions(ctx context.Context) error {
	want := strconv.Itoa(s.cfg.Dimensions)
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO store_info(name, value) VALUES ('dimensions', ?) ON CONFLICT(name) DO NOTHING`, want); err != nil {
		return err
	}
	var got string
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM store_info WHERE name = 'dimensions'`).Scan(&got); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: the file holds %s-dimensional vectors, configured %s", vectorstore.ErrDimension, got, want)
	}
	return nil
}

func (s *backend) unlock() {
	if s.lock != nil {
		if err := s.lock.Unlock(); err != nil {
			s.logger.Warn("releasing the store lock", zap.Error(err))
		}
	}
}

// Close implements vectorstore.Backend. Later calls fail with ErrClosed.
func (s *backend) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopPreload != nil {
		s.stopPreload()
		<-s.preloadDone
	}
	s.indexer.close()
	// After an eviction under way, which may be saving graphs; later ones see
	// closed.
	s.evictMu.Lock()
	s.saveAllGraphs()
	s.evictMu.Unlock()
	if s.stopCheckpoints != nil {
		// The last connection's close checkpoints what is left.
		s.stopCheckpoints()
		<-s.checkpointsDone
	}
	// No write commits from the partition files to the MANIFEST, which
	// records the database file as they left it (partfile.go).
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	pf := s.savePartFiles()
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	if s.wconn != nil {
		s.wconn.Close()
	}
	err := s.db.Close()
	if pf != nil && err == nil {
		s.writeManifest(pf)
	}
	s.unlock()
	if err != nil {
		return fmt.Errorf("vectorstore: embedded %s: close: %w", s.cfg.Path, err)
	}
	return nil
}

func (s *backend) checkOpen() error {
	if s.closed.Load() {
		return vectorstore.ErrClosed
	}
	return nil
}

// cachedStmt returns a prepared statement for query from the cache, preparing it
// if the cache has room; nil when it has none. Preparing is a large share of a small
// query's cost in SQLite.
func (s *backend) cachedStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if s.stmts == nil {
		return nil, vectorstore.ErrClosed
	}
	if st, ok := s.stmts[query]; ok || len(s.stmts) >= maxCachedStmts {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.stmts[query] = st
	return st, nil
}

// txStmt binds cached, cachedStmt's statement for query, to tx, or prepares query
// on tx when the cache had no room for it. cached must be taken before the
// transaction begins, which may hold the only connection. The caller closes the
// statement.
func txStmt(ctx context.Context, tx *sql.Tx, cached *sql.Stmt, query string) (*sql.Stmt, error) {
	if cached == nil {
		return tx.PrepareContext(ctx, query)
	}
	return tx.StmtContext(ctx, cached), nil
}

// query runs a read, through the statement cache when it can.
func (s *backend) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.cachedStmt(ctx, q)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return s.db.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

// writeTx runs fn in an immediate transaction under writeMu, then (still under
// writeMu, after the commit) after, which updates the partition cache. Once
// writeMu is released, partitions the write grew past the budget are evicted.
func (s *backend) writeTx(ctx context.Context, fn func(tx *sql.Tx) error, after func()) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if err := s.lockedWriteTx(ctx, fn, after); err != nil {
		return err
	}
	s.evict()
	return nil
}

// lockedWriteTx is writeTx's part under writeMu.
func (s *backend) lockedWriteTx(ctx context.Context, fn func(tx *sql.Tx) error, after func()) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.distrustPartFiles()
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.uncheckpointed.Store(true)
	s.wakeIfWALFull()
	if after != nil {
		s.cacheMu.Lock()
		after()
		s.cacheMu.Unlock()
	}
	return nil
}

// cachedPartition returns the partition if it is loaded; the caller holds cacheMu.
func (s *backend) cachedPartition(k partKey) *partition { return s.parts[k] }

// cachePut puts rec (storedForm) with its encoded metadata, committed at rid,
// into its partition if that is loaded; the caller holds cacheMu.
func (s *backend) cachePut(rid int64, rec vectorstore.Record, meta string) {
	if p := s.parts[partKey{rec.Tenant, rec.UserID}]; p != nil {
		s.putLoaded(p, newEntry(rid, rec, meta))
	}
}

// putLoaded puts e into p, a partition in parts, and keeps the count of
// loaded records; the caller holds cacheMu exclusively.
func (s *backend) putLoaded(p *partition, e *entry) {
	before := p.live
	p.put(e)
	s.loaded += p.live - before
	s.indexer.notify(p)
}

// read runs fn on k's partition with cacheMu held shared, loading the partition
// first if needed, and returns fn's error. fn must not keep the partition or
// change it. A partition it loaded stays pinned until fn is done, so that no
// eviction drops it in between; the eviction its load may call for runs after.
func (s *backend) read(ctx context.Context, k partKey, fn func(p *partition) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	s.cacheMu.RLock()
	p := s.parts[k]
	if p != nil {
		defer s.cacheMu.RUnlock()
		s.touch(p)
		return fn(p)
	}
	s.cacheMu.RUnlock()
	p, err := s.loadPartition(ctx, k)
	if err != nil {
		return err
	}
	err = func() error {
		defer p.pins.Add(-1)
		s.cacheMu.RLock()
		defer s.cacheMu.RUnlock()
		return fn(p)
	}()
	s.evict()
	return err
}

// loadPartition reads k's records into memory and returns the partition,
// pinned (read unpins it) and marked read. It takes writeMu so no write commits
// between reading the rows and publishing the partition. An empty partition is
// kept too, but only the newest maxEmptyParts of them (keepEmpty).
func (s *backend) loadPartition(ctx context.Context, k partKey) (*partition, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.cacheMu.RLock()
	p := s.parts[k]
	if p != nil {
		p.pins.Add(1)
		s.touch(p)
	}
	s.cacheMu.RUnlock()
	if p != nil {
		return p, nil
	}
	snap := s.loadGraphs(k)
	p = newPartition(k, max(0, s.cfg.ANNThreshold))
	var recs []*entry // with a graph file, put in its order once all are read
	put := p.put
	if snap != nil {
		put = func(e *entry) { recs = append(recs, e) }
	}
	if err := s.loadEntries(ctx, k, put); err != nil {
		return nil, err
	}
	if snap != nil {
		p.restore(snap, recs, s.cfg.Dimensions)
	}
	s.cacheMu.Lock()
	s.parts[k] = p
	s.loaded += p.live
	p.pins.Add(1)
	s.touch(p)
	if p.live > 0 {
		s.indexer.notify(p)
	} else {
		s.keepEmpty(k)
	}
	s.cacheMu.Unlock()
	s.logger.Debug("partition loaded", obs.Tenant(k.tenant), obs.User(k.userID), zap.Int("records", p.live))
	return p, nil
}

// maxEmptyParts is how many partitions without records stay loaded. A context
// request composes the agent and tenant scopes, which often hold nothing: a
// partition that is not kept is queried from SQLite again on every read of it,
// and under writeMu, so such a read waited for whatever write transaction was
// running (a batch of hit counts). Bounded, so that reads for ids without
// records (any valid id can be asked for) cannot grow the cache; an empty
// partition costs a few hundred bytes.
const maxEmptyParts = 4096

// keepEmpty records that parts keeps k's partition, loaded without records, and
// drops the oldest kept one beyond maxEmptyParts if it still has none (one
// that got records since is an ordinary partition by now). Writes keep a kept
// partition up to date as any loaded one; dropping it is safe because the
// caller holds writeMu and cacheMu, so no write is between the file and the
// partition. The caller holds both.
func (s *backend) keepEmpty(k partKey) {
	s.emptyParts = append(s.emptyParts, k)
	if len(s.emptyParts) <= maxEmptyParts {
		return
	}
	oldest := s.emptyParts[0]
	s.emptyParts = slices.Delete(s.emptyParts, 0, 1)
	if p := s.parts[oldest]; p != nil && p.live == 0 {
		delete(s.parts, oldest)
	}
}

// Wrap implements vectorstore.Backend: it adds the store's context to an error;
// sentinel errors keep matching.
func (s *backend) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("vectorstore: embedded %s: %s: %w", s.cfg.Path, op, err)
}

// upsertChunk, a power of two, is the most records one upsert statement writes. A
// statement per record spent about four fifths of its time outside SQLite's B-tree
// (database/sql's locks and Rows, the driver's binds, the RETURNING table); a
// statement of 32 rows pays that once for all of them, and its 512 parameters
// stay far below SQLite's limit (32766). 16 rows measured the same, 64 worse.
const upsertChunk = 32

// upsertSQLs[k] writes upsertChunk>>k records: a batch is written in chunks of
// upsertChunk and its rest in ever smaller powers of two, so that six statements,
// each prepared once, serve every batch length.
var upsertSQLs = func() []string {
	var qs []string
	for n := upsertChunk; n > 0; n /= 2 {
		qs = append(qs, upsertSQL(n))
	}
	return qs
}()

// upsertShape is the index in upsertSQLs of the statement for the next chunk of
// a batch with rest records left to write.
func upsertShape(rest int) int {
	return max(0, bits.Len(upsertChunk)-bits.Len(uint(rest)))
}

// upsertSQL writes n records. The conditional DO UPDATE leaves another
// partition's record alone and then returns no row, which is how a conflict is
// detected. An id twice in the statement inserts the first row and updates it
// with the second, as two statements would: the last record wins.
func upsertSQL(n int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return `INSERT INTO records (id, tenant, user_id, memory_type, scope, kind, key, text,
		vector, ts, chat_id, who, hit_count, confidence, expires_at, metadata)
	VALUES ` + strings.Repeat(row+", ", n-1) + row + `
	ON CONFLICT(id) DO UPDATE SET memory_type = excluded.memory_type, scope = excluded.scope,
		kind = excluded.kind, key = excluded.key, text = excluded.text, vector = excluded.vector,
		ts = excluded.ts, chat_id = excluded.chat_id, who = excluded.who, hit_count = excluded.hit_count,
		confidence = excluded.confidence, expires_at = excluded.expires_at, metadata = excluded.metadata
	WHERE records.tenant = excluded.tenant AND records.user_id = excluded.user_id
	RETURNING id, rid`
}

// Upsert implements vectorstore.Backend; recs are written in one transaction.
//
// Metadata is encoded once: the same JSON is the row's column and the partition's
// copy, so the stored form needs no decode until a read asks for it.
func (s *backend) Upsert(ctx context.Context, recs []vectorstore.Record) error {
	norm := make([]vectorstore.Record, len(recs))
	metas := make([]string, len(recs))
	for i, n := range recs {
		var err error
		if metas[i], err = encodeMetadata(n.ID, n.Metadata); err != nil {
			return s.Wrap("upsert", err)
		}
		norm[i] = storedForm(n)
	}
	// The statements, prepared once per connection, serve every batch: parsing an
	// upsert again per call cost more than running it. The shapes this batch uses
	// are taken from the cache before the transaction, which may hold the only
	// connection.
	cached := make([]*sql.Stmt, len(upsertSQLs))
	for rest := len(norm); rest > 0; {
		k := upsertShape(rest)
		var err error
		if cached[k], err = s.cachedStmt(ctx, upsertSQLs[k]); err != nil {
			return s.Wrap("upsert", err)
		}
		rest -= upsertChunk >> k
	}
	// The transaction runs on ctx without its cancellation, which is checked before
	// each chunk instead: on a cancellable context database/sql and the driver each
	// start a goroutine per statement to watch it, about a seventh of a row's CPU
	// when each row was a statement (BenchmarkEmbeddedUpsertBatch).
	txCtx := context.WithoutCancel(ctx)
	rids := make([]int64, len(recs))
	err := s.writeTx(txCtx, func(tx *sql.Tx) error {
		stmts := make([]*sql.Stmt, len(upsertSQLs))
		defer func() {
			for _, st := range stmts {
				if st != nil {
					st.Close()
				}
			}
		}()
		// The vectors' buffer holds a whole chunk's from the start: grown by
		// appends, it was a third of an upsert's allocated bytes.
		args := rowArgs{vec: make([]byte, 0, min(len(norm), upsertChunk)*4*s.cfg.Dimensions)}
		for i := 0; i < len(norm); {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := upsertShape(len(norm) - i)
			if stmts[k] == nil {
				st, err := txStmt(txCtx, tx, cached[k], upsertSQLs[k])
				if err != nil {
					return err
				}
				stmts[k] = st
			}
			end := i + upsertChunk>>k
			if err := upsertRows(txCtx, stmts[k], &args, norm[i:end], metas[i:end], rids[i:end]); err != nil {
				return err
			}
			i = end
		}
		return nil
	}, func() {
		for i, r := range norm {
			s.cachePut(rids[i], r, metas[i])
		}
	})
	return s.Wrap("upsert", err)
}

// upsertRows writes recs with st, an upsertSQLs statement of len(recs) rows, and
// sets rids to their rows' rids. The rows come back by id, in no promised order:
// an id twice in recs comes back twice with one rid, and a record that comes back
// fewer times than it appears was refused, a conflict.
func upsertRows(ctx context.Context, st *sql.Stmt, args *rowArgs, recs []vectorstore.Record, metas []string, rids []int64) error {
	args.reset()
	for i, r := range recs {
		args.add(r, metas[i])
	}
	rows, err := st.QueryContext(ctx, args.vals...)
	if err != nil {
		return err
	}
	defer rows.Close()
	written := make([]bool, len(recs))
	for rows.Next() {
		var (
			id  string
			rid int64
		)
		if err := rows.Scan(&id, &rid); err != nil {
			return err
		}
		for i, r := range recs {
			if !written[i] && r.ID == id {
				rids[i], written[i] = rid, true
				break
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, r := range recs {
		if !written[i] {
			return fmt.Errorf("%w: record %s", vectorstore.ErrConflict, r.ID)
		}
	}
	return nil
}

// Get implements vectorstore.Backend.
func (s *backend) Get(ctx context.Context, f vectorstore.Filter) ([]vectorstore.Record, error) {
	m := newMatcher(f, time.Now())
	var out []vectorstore.Record
	err := s.read(ctx, partKey{f.Tenant, f.UserID}, func(p *partition) error {
		for j, id := range f.IDs {
			d, ok := p.byID[id]
			// An id asked twice is returned once.
			if ok && m.match(p.docs[d]) && !slices.Contains(f.IDs[:j], id) {
				r, err := p.docs[d].record()
				if err != nil {
					return err
				}
				out = append(out, r)
			}
		}
		return nil
	})
	return out, s.Wrap("get", err)
}

// Scroll implements vectorstore.Backend.
func (s *backend) Scroll(ctx context.Context, f vectorstore.Filter, offset string, limit int) ([]vectorstore.Record, string, error) {
	m := newMatcher(f, time.Now())
	var (
		recs []vectorstore.Record
		next string
	)
	err := s.read(ctx, partKey{f.Tenant, f.UserID}, func(p *partition) error {
		page := p.selectEntries(m, offset, limit+1)
		if len(page) > limit {
			next = page[limit].rec.ID
			page = page[:limit]
		}
		recs = make([]vectorstore.Record, len(page))
		for i, e := range page {
			var err error
			if recs[i], err = e.record(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", s.Wrap("scroll", err)
	}
	return recs, next, nil
}

// updateSQL rewrites a record's columns but id, tenant and user_id, which never
// change; a NULL vector keeps the stored one.
const updateSQL = `UPDATE records SET memory_type = ?, scope = ?, kind = ?, key = ?, text = ?,
		vector = coalesce(?, vector), ts = ?, chat_id = ?, who = ?, hit_count = ?, confidence = ?, expires_at = ?, metadata = ?
	WHERE rid = ?`

// vectorArg is the index of the vector among rowArgs.set's values.
const vectorArg = 8

// patched is a record as an update writes it: its rid, its stored form and its
// encoded metadata. normalized marks a record read from its loaded partition
// whose vector the patch leaves alone: its Vector is the cache's normalised copy,
// neither written back nor normalised again.
type patched struct {
	rid        int64
	rec        vectorstore.Record
	meta       string
	normalized bool
}

// UpdatePayloads implements vectorstore.Backend in one transaction: every patched record is
// read (from its partition when that is loaded, else by one select), every patch
// is applied and validated, then each row is rewritten and the transaction
// commits once. A patch that fails validation rolls the whole transaction back.
// Per record, a batch costs one row write; the transaction and its commit (most
// of a single update's cost) are shared. Under writeMu a loaded partition holds
// exactly the committed rows, so reading it instead of SQLite is exact, and it
// saves the select, which was most of a batch's cost when the records' pages had
// left SQLite's cache.
func (s *backend) UpdatePayloads(ctx context.Context, tenant, userID string, ids []string, byID map[string]vectorstore.Patch) ([]string, error) {
	// Both statements are prepared once, and the select's shape does not depend
	// on the number of ids (one JSON list parameter): parsing them again per call
	// cost as much as running them, and hit-count updates come by the thousand.
	now := time.Now()
	where, args := whereFilter(vectorstore.Filter{Tenant: tenant, UserID: userID, IDs: ids}, now)
	selectSQL := `SELECT ` + recordCols + ` FROM records r WHERE ` + where
	cachedSelect, err := s.cachedStmt(ctx, selectSQL)
	if err != nil {
		return nil, s.Wrap("update", err)
	}
	cachedUpdate, err := s.cachedStmt(ctx, updateSQL)
	if err != nil {
		return nil, s.Wrap("update", err)
	}
	var out []patched
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		upd, err := txStmt(ctx, tx, cachedUpdate, updateSQL)
		if err != nil {
			return err
		}
		defer upd.Close()
		var loaded bool
		out, loaded, err = s.patchLoaded(partKey{tenant, userID}, ids, byID, now)
		if err == nil && !loaded {
			out, err = readPatched(ctx, tx, cachedSelect, selectSQL, args, byID, s.cfg.Dimensions)
		}
		if err != nil {
			return err
		}
		var args rowArgs
		for i, p := range out {
			vals := args.set(p.rec, p.meta)
			if byID[p.rec.ID].Vector == nil {
				vals[vectorArg] = nil
			}
			// vals[3:] skips id, tenant and user_id, which never change.
			if _, err := upd.ExecContext(ctx, append(vals[3:], p.rid)...); err != nil {
				return err
			}
			out[i].rec = storedForm(p.rec)
		}
		return nil
	}, func() {
		for _, p := range out {
			if !p.normalized {
				s.cachePut(p.rid, p.rec, p.meta)
			} else if part := s.cachedPartition(partKey{tenant, userID}); part != nil {
				s.putLoaded(part, newEntryNormalized(p.rid, p.rec, p.meta))
			}
		}
	})
	if err != nil {
		return nil, s.Wrap("update", err)
	}
	found := make(map[string]bool, len(out))
	for _, p := range out {
		found[p.rec.ID] = true
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// patchLoaded returns the unexpired records of ids in k's partition with their
// patches from byID applied, read from the partition; loaded is false (and out
// nil) when the partition is not in memory. The caller holds writeMu.
func (s *backend) patchLoaded(k partKey, ids []string, byID map[string]vectorstore.Patch, now time.Time) (out []patched, loaded bool, err error) {
	s.cacheMu.RLock()
	defer s.cacheMu.RUnlock()
	p := s.cachedPartition(k)
	if p == nil {
		return nil, false, nil
	}
	m := newMatcher(vectorstore.Filter{Tenant: k.tenant, UserID: k.userID, IDs: ids}, now)
	for _, id := range ids {
		d, ok := p.byID[id]
		if !ok || !m.match(p.docs[d]) {
			continue
		}
		e, patch := p.docs[d], byID[id]
		rec, meta, err := applyPatch(e.rec, e.meta, patch, s.cfg.Dimensions)
		if err != nil {
			return nil, true, err
		}
		out = append(out, patched{rid: e.rid, rec: rec, meta: meta, normalized: patch.Vector == nil})
	}
	return out, true, nil
}

// readPatched reads the rows query (cached, or prepared on tx) selects with args
// and returns each with its patch from byID applied. Every row is read before any
// is written, so no write runs beside an open cursor.
func readPatched(ctx context.Context, tx *sql.Tx, cached *sql.Stmt, query string, args []any, byID map[string]vectorstore.Patch, dims int) ([]patched, error) {
	sel, err := txStmt(ctx, tx, cached, query)
	if err != nil {
		return nil, err
	}
	defer sel.Close()
	rows, err := sel.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []patched
	for rows.Next() {
		rec, rid, meta, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		if rec, meta, err = applyPatch(rec, meta, byID[rec.ID], dims); err != nil {
			return nil, err
		}
		out = append(out, patched{rid: rid, rec: rec, meta: meta})
	}
	return out, rows.Err()
}

// applyPatch returns rec, whose metadata is meta (encodeMetadata), and its
// metadata with p applied. Metadata is decoded and encoded again only when p
// changes it: a hit-count update keeps the stored JSON.
func applyPatch(rec vectorstore.Record, meta string, p vectorstore.Patch, dims int) (vectorstore.Record, string, error) {
	if p.Text != nil {
		rec.Text = *p.Text
	}
	if p.Vector != nil {
		rec.Vector = p.Vector
	}
	if p.Metadata != nil {
		merged, err := decodeMetadata(meta)
		if err != nil {
			return rec, "", fmt.Errorf("record %s: stored metadata: %w", rec.ID, err)
		}
		if merged == nil {
			merged = make(map[string]any, len(p.Metadata))
		}
		maps.Copy(merged, p.Metadata)
		if meta, err = encodeMetadata(rec.ID, merged); err != nil {
			return rec, "", err
		}
	}
	rec.HitCount = max(0, rec.HitCount+p.HitCountDelta)
	if p.Confidence != nil {
		rec.Confidence = *p.Confidence
	}
	if p.ExpiresAt != nil {
		rec.ExpiresAt = *p.ExpiresAt
	}
	rec, err := rec.Normalize(dims)
	return rec, meta, err
}

// Delete implements vectorstore.Backend.
func (s *backend) Delete(ctx context.Context, f vectorstore.Filter) (int, error) {
	n, err := s.deleteWhere(ctx, f)
	return n, s.Wrap("delete", err)
}

// DeleteByFilter implements vectorstore.Backend. It is an erasure (a user's or
// a tenant's memory): once rows went, the WAL, which still holds the pages as
// they were before, is checkpointed and truncated, so that with secure_delete
// no byte of them is left in either file.
//
// The partition's graph file goes too: it holds no text or vector, but it was
// made from the erased records. A partition still loaded writes its graphs
// again at Close if records are left.
func (s *backend) DeleteByFilter(ctx context.Context, f vectorstore.Filter) (int, error) {
	n, err := s.deleteWhere(ctx, f)
	if err != nil || n == 0 {
		return n, s.Wrap("delete by filter", err)
	}
	if err := s.eraseGraphs(partKey{f.Tenant, f.UserID}); err != nil {
		return n, s.Wrap("delete by filter", err)
	}
	return n, s.Checkpoint(ctx)
}

// TermDocs implements vectorstore.Backend from the partition's keyword index.
func (s *backend) TermDocs(ctx context.Context, tenant, userID string, terms []string) ([]int, error) {
	var out []int
	err := s.read(ctx, partKey{tenant, userID}, func(p *partition) error {
		out = p.lex.termDocs(terms)
		return nil
	})
	return out, s.Wrap("term docs", err)
}

// Users implements vectorstore.Backend from SQLite, whose partition index
// leads with (tenant, user_id).
func (s *backend) Users(ctx context.Context, tenant string) ([]string, error) {
	rows, err := s.query(ctx, `SELECT DISTINCT user_id FROM records WHERE tenant = ? ORDER BY user_id`, tenant)
	if err != nil {
		return nil, s.Wrap("users", err)
	}
	defer rows.Close()
	var users []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, s.Wrap("users", err)
		}
		users = append(users, u)
	}
	return users, s.Wrap("users", rows.Err())
}

func (s *backend) deleteWhere(ctx context.Context, f vectorstore.Filter) (int, error) {
	var rids []int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		where, args := whereFilter(f, time.Now())
		rows, err := tx.QueryContext(ctx, `DELETE FROM records AS r WHERE `+where+` RETURNING rid`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var rid int64
			if err := rows.Scan(&rid); err != nil {
				rows.Close()
				return err
			}
			rids = append(rids, rid)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return rows.Err()
	}, func() {
		if p := s.cachedPartition(partKey{f.Tenant, f.UserID}); p != nil {
			before := p.live
			for _, rid := range rids {
				p.remove(rid)
			}
			s.loaded += p.live - before
			// A compaction may have dropped the graphs.
			s.indexer.notify(p)
		}
	})
	if err != nil {
		return 0, err
	}
	return len(rids), nil
}

// Count implements vectorstore.Backend.
func (s *backend) Count(ctx context.Context, f vectorstore.Filter) (int, error) {
	now := time.Now()
	k := partKey{f.Tenant, f.UserID}
	s.cacheMu.RLock()
	if p := s.cachedPartition(k); p != nil {
		defer s.cacheMu.RUnlock()
		return len(p.candidates(newMatcher(f, now))), nil
	}
	s.cacheMu.RUnlock()
	// A partition not in memory is counted by SQLite rather than loaded: counting
	// every user (as a dashboard or the bench does) would otherwise load the whole
	// store into memory. whereFilter has the matcher's semantics.
	where, args := whereFilter(f, now)
	var n int
	rows, err := s.query(ctx, `SELECT count(*) FROM records r WHERE `+where, args...)
	if err != nil {
		return 0, s.Wrap("count", err)
	}
	defer rows.Close()
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err == nil {
		err = rows.Err()
	}
	return n, s.Wrap("count", err)
}
