package qdrant

import (
	"context"
	"net"
	"sync"
	"testing"

	qc "github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// recorder is an in-process gRPC server implementing the parts of Qdrant's services
// the adapter calls. It records every request (and the api-key header it came
// with) and answers from canned state: it checks what the adapter sends, not what
// Qdrant would do with it.
type recorder struct {
	mu       sync.Mutex
	calls    []call
	version  string
	info     *qc.CollectionInfo // nil: no collection
	stored   []*qc.RetrievedPoint
	scrolled []*qc.RetrievedPoint
	next     *qc.PointId
	scored   []*qc.ScoredPoint
	count    uint64
	users    []string         // the facet's values
	fail     map[string]error // full method name → error to answer with
}

type call struct {
	method string // full gRPC method name, e.g. qc.Points_UpdateBatch_FullMethodName
	req    proto.Message
	apiKey []string
}

// startRecorder serves r over bufconn and returns cfg completed to reach it.
func startRecorder(t *testing.T, r *recorder, cfg Config) Config {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(r.intercept))
	qc.RegisterQdrantServer(srv, qdrantSvc{r: r})
	qc.RegisterCollectionsServer(srv, collectionsSvc{r: r})
	qc.RegisterPointsServer(srv, pointsSvc{r: r})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	// An IP literal needs no resolver; the dialer ignores the address anyway.
	cfg.Addr = "127.0.0.1:6334"
	cfg.GrpcOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})}
	return cfg
}

// newRecorded starts r and opens a store on it.
func newRecorded(t *testing.T, r *recorder, cfg Config) (vectorstore.Store, error) {
	t.Helper()
	s, err := New(context.Background(), startRecorder(t, r, cfg), zaptest.NewLogger(t))
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func (r *recorder) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, call{method: info.FullMethod, req: req.(proto.Message), apiKey: md.Get("api-key")})
	err := r.fail[info.FullMethod]
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// requests returns the recorded requests of one method (full name), in order.
func requests[T proto.Message](r *recorder, method string) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, c := range r.calls {
		if c.method == method {
			out = append(out, c.req.(T))
		}
	}
	return out
}

func (r *recorder) allCalls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func completed() *qc.UpdateResult {
	return &qc.UpdateResult{OperationId: qc.PtrOf(uint64(1)), Status: qc.UpdateStatus_Completed}
}

type qdrantSvc struct {
	qc.UnimplementedQdrantServer
	r *recorder
}

func (s qdrantSvc) HealthCheck(context.Context, *qc.HealthCheckRequest) (*qc.HealthCheckReply, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.HealthCheckReply{Title: "qdrant - vector search engine", Version: s.r.version}, nil
}

type collectionsSvc struct {
	qc.UnimplementedCollectionsServer
	r *recorder
}

func (s collectionsSvc) CollectionExists(context.Context, *qc.CollectionExistsRequest) (*qc.CollectionExistsResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.CollectionExistsResponse{Result: &qc.CollectionExists{Exists: s.r.info != nil}}, nil
}

// Create makes the collection exist with the requested vectors, so that the
// adapter's layout check sees what it asked for.
func (s collectionsSvc) Create(_ context.Context, req *qc.CreateCollection) (*qc.CollectionOperationResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.info = collectionInfo(req.GetVectorsConfig(), req.GetSparseVectorsConfig())
	return &qc.CollectionOperationResponse{Result: true}, nil
}

func (s collectionsSvc) Get(context.Context, *qc.GetCollectionInfoRequest) (*qc.GetCollectionInfoResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.GetCollectionInfoResponse{Result: s.r.info}, nil
}

func collectionInfo(dense *qc.VectorsConfig, sparse *qc.SparseVectorConfig) *qc.CollectionInfo {
	return &qc.CollectionInfo{Config: &qc.CollectionConfig{Params: &qc.CollectionParams{
		VectorsConfig: dense, SparseVectorsConfig: sparse,
	}}}
}

type pointsSvc struct {
	qc.UnimplementedPointsServer
	r *recorder
}

func (s pointsSvc) CreateFieldIndex(context.Context, *qc.CreateFieldIndexCollection) (*qc.PointsOperationResponse, error) {
	return &qc.PointsOperationResponse{Result: completed()}, nil
}

func (s pointsSvc) Get(context.Context, *qc.GetPoints) (*qc.GetResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.GetResponse{Result: s.r.stored}, nil
}

func (s pointsSvc) UpdateBatch(_ context.Context, req *qc.UpdateBatchPoints) (*qc.UpdateBatchResponse, error) {
	res := make([]*qc.UpdateResult, len(req.GetOperations()))
	for i := range res {
		res[i] = completed()
	}
	return &qc.UpdateBatchResponse{Result: res}, nil
}

func (s pointsSvc) Scroll(context.Context, *qc.ScrollPoints) (*qc.ScrollResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.ScrollResponse{Result: s.r.scrolled, NextPageOffset: s.r.next}, nil
}

func (s pointsSvc) Query(context.Context, *qc.QueryPoints) (*qc.QueryResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.QueryResponse{Result: s.r.scored}, nil
}

func (s pointsSvc) Count(context.Context, *qc.CountPoints) (*qc.CountResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return &qc.CountResponse{Result: &qc.CountResult{Count: s.r.count}}, nil
}

func (s pointsSvc) Facet(context.Context, *qc.FacetCounts) (*qc.FacetResponse, error) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	hits := make([]*qc.FacetHit, len(s.r.users))
	for i, u := range s.r.users {
		hits[i] = &qc.FacetHit{Value: &qc.FacetValue{Variant: &qc.FacetValue_StringValue{StringValue: u}}, Count: 1}
	}
	return &qc.FacetResponse{Hits: hits}, nil
}

func (s pointsSvc) Delete(context.Context, *qc.DeletePoints) (*qc.PointsOperationResponse, error) {
	return &qc.PointsOperationResponse{Result: completed()}, nil
}
