package qdrant

import (
	"context"
	"errors"
	"fmt"

	qc "github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// Sentinel errors of this package; vectorstore's sentinels are used for everything
// the Store interface defines.
var (
	// ErrInvalidConfig reports a Config that cannot work.
	ErrInvalidConfig = errors.New("vectorstore/qdrant: invalid config")
	// ErrIncompatible reports a server or an existing collection the adapter cannot
	// use: a server older than MinServerVersion, a collection without the named
	// vectors it needs, or (with SkipCreate) no collection at all. A dimension count
	// mismatch is vectorstore.ErrDimension instead.
	ErrIncompatible = errors.New("vectorstore/qdrant: incompatible server or collection")
)

// MinServerVersion is the oldest Qdrant the adapter works with: 1.16 added the
// conditional upsert (update_filter) that keeps an upsert from overwriting another
// partition's point, and the RRF k parameter. An older server would silently
// ignore both, so New refuses it.
var MinServerVersion = qc.Version{Major: 1, Minor: 16}

// backend is the vectorstore.Backend over one Qdrant collection. Safe for
// concurrent use.
type backend struct {
	cfg    Config
	client *qc.Client
	logger *zap.Logger
}

var _ vectorstore.Backend = (*backend)(nil)

// New connects to Qdrant, checks the server version and makes sure the collection
// exists with the expected layout (creating it and its payload indexes unless
// cfg.SkipCreate). The store it returns is a vectorstore.Store over one Qdrant
// collection, behind vectorstore.Validating; safe for concurrent use.
func New(ctx context.Context, cfg Config, logger *zap.Logger) (vectorstore.Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	host, port, _ := cfg.hostPort() // Validate checked it
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	client, err := qc.NewClient(&qc.Config{
		Host:      host,
		Port:      port,
		APIKey:    cfg.APIKey,
		UseTLS:    tlsCfg != nil,
		TLSConfig: tlsCfg,
		// New checks the version itself and fails instead of only logging.
		SkipCompatibilityCheck: true,
		GrpcOptions:            append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(retryInterceptor(cfg.Retries, cfg.RetryBase, cfg.sleep))}, cfg.GrpcOptions...),
	})
	if err != nil {
		return nil, fmt.Errorf("vectorstore: qdrant %s: connecting: %w", cfg.Addr, err)
	}
	s := &backend{
		cfg:    cfg,
		client: client,
		logger: logger.With(zap.String("qdrant", cfg.Addr), zap.String("collection", cfg.Collection)),
	}
	if cfg.APIKey != "" && tlsCfg == nil {
		s.logger.Warn("Qdrant API key is sent without TLS")
	}
	if err := s.start(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	return vectorstore.Validating(s), nil
}

// Dimensions implements vectorstore.Backend.
func (s *backend) Dimensions() int { return s.cfg.Dimensions }

func (s *backend) start(ctx context.Context) error {
	callCtx, cancel := s.callCtx(ctx)
	defer cancel()
	health, err := s.client.HealthCheck(callCtx)
	if err != nil {
		return s.Wrap("health check", err)
	}
	v, err := qc.ParseVersion(health.GetVersion())
	if err != nil {
		return s.Wrap("health check", fmt.Errorf("%w: server version: %w", ErrIncompatible, err))
	}
	if v.Major < MinServerVersion.Major || v.Major == MinServerVersion.Major && v.Minor < MinServerVersion.Minor {
		return s.Wrap("health check", fmt.Errorf("%w: server version %s, need %d.%d or later",
			ErrIncompatible, health.GetVersion(), MinServerVersion.Major, MinServerVersion.Minor))
	}
	created, err := s.ensureCollection(callCtx, ctx)
	if err != nil {
		return s.Wrap("collection", err)
	}
	s.logger.Info("vector store ready", zap.String("server_version", health.GetVersion()),
		zap.Int("dimensions", s.cfg.Dimensions), zap.Bool("created", created))
	return nil
}

// callCtx bounds one call by cfg.Timeout.
func (s *backend) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// opError carries the store's context. Its text is redacted of the API key (a
// server or proxy may echo request headers in an error), while Unwrap keeps
// sentinels and gRPC statuses matchable.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }

// Wrap implements vectorstore.Backend: it adds the endpoint and operation to err.
func (s *backend) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("vectorstore: qdrant %s collection %s: %s: %v", s.cfg.Addr, s.cfg.Collection, op, err)
	return &opError{msg: redact(msg, s.cfg.APIKey), err: err}
}

// Close implements vectorstore.Backend.
func (s *backend) Close() error {
	return s.Wrap("close", s.client.Close())
}

// ensureCollection creates the collection if needed and allowed, then checks its
// layout and (unless SkipCreate) its payload indexes. It reports whether it created
// the collection. ctx bounds the collection calls; each index creation is bounded
// separately under parent.
func (s *backend) ensureCollection(ctx, parent context.Context) (bool, error) {
	exists, err := s.client.CollectionExists(ctx, s.cfg.Collection)
	if err != nil {
		return false, err
	}
	created := false
	if !exists {
		if s.cfg.SkipCreate {
			return false, fmt.Errorf("%w: collection %q does not exist and SkipCreate is set", ErrIncompatible, s.cfg.Collection)
		}
		err := s.client.CreateCollection(ctx, s.createRequest())
		if err != nil {
			// Another replica starting at the same time may have created it first.
			if again, err2 := s.client.CollectionExists(ctx, s.cfg.Collection); err2 != nil || !again {
				return false, err
			}
		} else {
			created = true
		}
	}
	info, err := s.client.GetCollectionInfo(ctx, s.cfg.Collection)
	if err != nil {
		return false, err
	}
	if err := checkLayout(info, s.cfg.Dimensions); err != nil {
		return false, err
	}
	if s.cfg.SkipCreate {
		return false, nil
	}
	// Only missing indexes are created, so this also completes a collection whose
	// creator stopped half way, and a restart sends no index requests at all.
	for _, ix := range payloadIndexes {
		if _, ok := info.GetPayloadSchema()[ix.field]; ok {
			continue
		}
		if err := s.createIndex(parent, ix); err != nil {
			return false, fmt.Errorf("payload index %s: %w", ix.field, err)
		}
	}
	return created, nil
}

// createIndex gets a timeout of its own: building an index on a large existing
// collection can take as long as a call is allowed to.
func (s *backend) createIndex(ctx context.Context, ix payloadIndex) error {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	_, err := s.client.CreateFieldIndex(ctx, &qc.CreateFieldIndexCollection{
		CollectionName:   s.cfg.Collection,
		Wait:             qc.PtrOf(true),
		FieldName:        ix.field,
		FieldType:        qc.PtrOf(ix.typ),
		FieldIndexParams: ix.params,
	})
	return err
}

// createRequest is the collection layout: a named dense vector compared by cosine,
// and a named sparse vector whose IDF Qdrant applies at query time (the BM25 IDF
// that embed.Sparse leaves out).
func (s *backend) createRequest() *qc.CreateCollection {
	return &qc.CreateCollection{
		CollectionName: s.cfg.Collection,
		VectorsConfig: qc.NewVectorsConfigMap(map[string]*qc.VectorParams{
			vectorDense: {Size: uint64(s.cfg.Dimensions), Distance: qc.Distance_Cosine},
		}),
		SparseVectorsConfig: qc.NewSparseVectorsConfig(map[string]*qc.SparseVectorParams{
			vectorSparse: {Modifier: qc.Modifier_Idf.Enum()},
		}),
	}
}

type payloadIndex struct {
	field  string
	typ    qc.FieldType
	params *qc.PayloadIndexParams
}

// payloadIndexes are the indexed payload fields. tenant and user_id are tenant
// indexes (is_tenant): Qdrant then lays out storage per tenant and builds the
// dense index per partition, since every query filters on both. ts and expires_at
// are integers (Unix microseconds) with range indexes: exact at microsecond
// precision, and compared the same way as the embedded store.
var payloadIndexes = func() []payloadIndex {
	keyword := func(field string, tenant bool) payloadIndex {
		return payloadIndex{field, qc.FieldType_FieldTypeKeyword,
			qc.NewPayloadIndexParamsKeyword(&qc.KeywordIndexParams{IsTenant: qc.PtrOf(tenant)})}
	}
	integer := func(field string) payloadIndex {
		return payloadIndex{field, qc.FieldType_FieldTypeInteger,
			qc.NewPayloadIndexParamsInt(&qc.IntegerIndexParams{Lookup: qc.PtrOf(false), Range: qc.PtrOf(true)})}
	}
	return []payloadIndex{
		keyword(fieldTenant, true), keyword(fieldUserID, true), keyword(fieldMemoryType, false),
		integer(fieldTS), keyword(fieldChatID, false), keyword(fieldWho, false), keyword(fieldScope, false),
		keyword(fieldKind, false), keyword(fieldKey, false), integer(fieldExpiresAt),
	}
}()

// checkLayout verifies an existing collection has the vectors the adapter writes.
func checkLayout(info *qc.CollectionInfo, dims int) error {
	params := info.GetConfig().GetParams()
	dense := params.GetVectorsConfig().GetParamsMap().GetMap()[vectorDense]
	if dense == nil {
		return fmt.Errorf("%w: no dense vector named %q", ErrIncompatible, vectorDense)
	}
	if dense.GetSize() != uint64(dims) {
		return fmt.Errorf("%w: the collection holds %d-dimensional vectors, configured %d",
			vectorstore.ErrDimension, dense.GetSize(), dims)
	}
	if dense.GetDistance() != qc.Distance_Cosine {
		return fmt.Errorf("%w: vector %q uses %s distance, want Cosine", ErrIncompatible, vectorDense, dense.GetDistance())
	}
	sparse := params.GetSparseVectorsConfig().GetMap()[vectorSparse]
	if sparse == nil {
		return fmt.Errorf("%w: no sparse vector named %q", ErrIncompatible, vectorSparse)
	}
	if sparse.GetModifier() != qc.Modifier_Idf {
		return fmt.Errorf("%w: sparse vector %q has modifier %s, want Idf", ErrIncompatible, vectorSparse, sparse.GetModifier())
	}
	return nil
}

// checkUpdates turns a write that was not completed into an error: with wait set,
// Qdrant answers Completed once the change is applied.
func checkUpdates(results ...*qc.UpdateResult) error {
	for _, r := range results {
		if r.GetStatus() != qc.UpdateStatus_Completed {
			return fmt.Errorf("update %d not completed: status %s", r.GetOperationId(), r.GetStatus())
		}
	}
	return nil
}

// isNotFound reports Qdrant's answer for a point that vanished mid-update.
func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
