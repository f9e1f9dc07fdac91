package qdrant

// Request-shape tests: the adapter against an in-process gRPC server that records
// requests (recorder_test.go). They pin what is sent to Qdrant; Qdrant's handling of
// it is checked only by TestConformance against a real server.

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	qc "github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentmem/agentmem/pkg/embed"
	"github.com/agentmem/agentmem/pkg/vectorstore"
)

const testDims = 4

var ctx = context.Background()

// ready returns a recorder serving a current Qdrant with no collection yet.
func ready() *recorder { return &recorder{version: "1.17.1"} }

// openStore opens a store (creating its collection) on a fresh recorder.
func openStore(t *testing.T, cfg Config) (vectorstore.Store, *recorder) {
	t.Helper()
	r := ready()
	if cfg.Dimensions == 0 {
		cfg.Dimensions = testDims
	}
	s, err := newRecorded(t, r, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, r
}

// keywordMatches returns the keyword conditions among f's must conditions, by field.
func keywordMatches(f *qc.Filter) map[string]string {
	out := make(map[string]string)
	for _, c := range f.GetMust() {
		if kw, ok := c.GetField().GetMatch().GetMatchValue().(*qc.Match_Keyword); ok {
			out[c.GetField().GetKey()] = kw.Keyword
		}
	}
	return out
}

// hasIDs returns the ids of f's has_id must condition.
func hasIDs(f *qc.Filter) []string {
	var ids []string
	for _, c := range f.GetMust() {
		for _, id := range c.GetHasId().GetHasId() {
			ids = append(ids, id.GetUuid())
		}
	}
	return ids
}

func checkPartition(t *testing.T, what string, f *qc.Filter, tenant, user string) {
	t.Helper()
	kw := keywordMatches(f)
	if kw[fieldTenant] != tenant || kw[fieldUserID] != user {
		t.Errorf("%s: partition conditions tenant=%q user_id=%q, want %q/%q (filter %v)", what, kw[fieldTenant], kw[fieldUserID], tenant, user, f)
	}
}

func TestNewCreatesCollectionAndIndexes(t *testing.T) {
	_, r := openStore(t, Config{Dimensions: 384})
	creates := requests[*qc.CreateCollection](r, qc.Collections_Create_FullMethodName)
	if len(creates) != 1 {
		t.Fatalf("%d CreateCollection requests, want 1", len(creates))
	}
	c := creates[0]
	if c.GetCollectionName() != DefaultCollection {
		t.Errorf("collection %q, want %q", c.GetCollectionName(), DefaultCollection)
	}
	dense := c.GetVectorsConfig().GetParamsMap().GetMap()[vectorDense]
	if dense.GetSize() != 384 || dense.GetDistance() != qc.Distance_Cosine {
		t.Errorf("dense vector params %v, want size 384, Cosine", dense)
	}
	if len(c.GetVectorsConfig().GetParamsMap().GetMap()) != 1 {
		t.Errorf("dense vectors %v, want only %q", c.GetVectorsConfig(), vectorDense)
	}
	sparse := c.GetSparseVectorsConfig().GetMap()[vectorSparse]
	if sparse == nil || sparse.GetModifier() != qc.Modifier_Idf {
		t.Errorf("sparse vector params %v, want %q with the IDF modifier", c.GetSparseVectorsConfig(), vectorSparse)
	}

	type index struct {
		typ    qc.FieldType
		tenant bool
	}
	want := map[string]index{
		fieldTenant: {qc.FieldType_FieldTypeKeyword, true}, fieldUserID: {qc.FieldType_FieldTypeKeyword, true},
		fieldTS: {qc.FieldType_FieldTypeInteger, false}, fieldExpiresAt: {qc.FieldType_FieldTypeInteger, false},
	}
	for _, f := range []string{fieldMemoryType, fieldChatID, fieldWho, fieldScope, fieldKind, fieldKey} {
		want[f] = index{qc.FieldType_FieldTypeKeyword, false}
	}
	got := make(map[string]*qc.CreateFieldIndexCollection)
	for _, ix := range requests[*qc.CreateFieldIndexCollection](r, qc.Points_CreateFieldIndex_FullMethodName) {
		got[ix.GetFieldName()] = ix
	}
	if len(got) != len(want) {
		t.Errorf("indexes on %d fields, want %d", len(got), len(want))
	}
	for field, w := range want {
		ix := got[field]
		switch {
		case ix == nil:
			t.Errorf("no payload index on %s", field)
		case ix.GetFieldType() != w.typ || !ix.GetWait():
			t.Errorf("index on %s: type %s wait %v, want %s, wait", field, ix.GetFieldType(), ix.GetWait(), w.typ)
		case w.typ == qc.FieldType_FieldTypeKeyword && ix.GetFieldIndexParams().GetKeywordIndexParams().GetIsTenant() != w.tenant:
			t.Errorf("index on %s: is_tenant %v, want %v", field, ix.GetFieldIndexParams().GetKeywordIndexParams().GetIsTenant(), w.tenant)
		case w.typ == qc.FieldType_FieldTypeInteger && !ix.GetFieldIndexParams().GetIntegerIndexParams().GetRange():
			t.Errorf("index on %s has no range support", field)
		}
	}
}

func TestNewChecksServerAndCollection(t *testing.T) {
	good := collectionInfo(
		qc.NewVectorsConfigMap(map[string]*qc.VectorParams{vectorDense: {Size: testDims, Distance: qc.Distance_Cosine}}),
		qc.NewSparseVectorsConfig(map[string]*qc.SparseVectorParams{vectorSparse: {Modifier: qc.Modifier_Idf.Enum()}}))
	with := func(dense *qc.VectorParams, sparse *qc.SparseVectorParams) *qc.CollectionInfo {
		info := collectionInfo(qc.NewVectorsConfigMap(map[string]*qc.VectorParams{}), qc.NewSparseVectorsConfig(map[string]*qc.SparseVectorParams{}))
		if dense != nil {
			info.Config.Params.VectorsConfig = qc.NewVectorsConfigMap(map[string]*qc.VectorParams{vectorDense: dense})
		}
		if sparse != nil {
			info.Config.Params.SparseVectorsConfig = qc.NewSparseVectorsConfig(map[string]*qc.SparseVectorParams{vectorSparse: sparse})
		}
		return info
	}
	idf := &qc.SparseVectorParams{Modifier: qc.Modifier_Idf.Enum()}
	indexed := proto.Clone(good).(*qc.CollectionInfo)
	indexed.PayloadSchema = make(map[string]*qc.PayloadSchemaInfo)
	for _, ix := range payloadIndexes {
		indexed.PayloadSchema[ix.field] = &qc.PayloadSchemaInfo{Params: ix.params}
	}
	cases := []struct {
		name       string
		version    string
		info       *qc.CollectionInfo
		skipCreate bool
		want       error // nil: New succeeds
		creates    bool  // New sends CreateCollection / CreateFieldIndex
	}{
		{"existing collection without indexes", "1.17.1", good, false, nil, true},
		{"existing collection with indexes", "1.17.1", indexed, false, nil, false},
		{"existing collection, SkipCreate", "v1.16.0", good, true, nil, false},
		{"other dimension count", "1.17.1", with(&qc.VectorParams{Size: 8, Distance: qc.Distance_Cosine}, idf), false, vectorstore.ErrDimension, false},
		{"dot product", "1.17.1", with(&qc.VectorParams{Size: testDims, Distance: qc.Distance_Dot}, idf), false, ErrIncompatible, false},
		{"no dense vector", "1.17.1", with(nil, idf), false, ErrIncompatible, false},
		{"no sparse vector", "1.17.1", with(&qc.VectorParams{Size: testDims, Distance: qc.Distance_Cosine}, nil), false, ErrIncompatible, false},
		{"sparse without IDF", "1.17.1", with(&qc.VectorParams{Size: testDims, Distance: qc.Distance_Cosine}, &qc.SparseVectorParams{}), false, ErrIncompatible, false},
		{"missing collection, SkipCreate", "1.17.1", nil, true, ErrIncompatible, false},
		{"server too old", "1.15.4", good, false, ErrIncompatible, false},
		{"unparsable version", "dev", good, false, ErrIncompatible, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{version: tc.version, info: tc.info}
			_, err := newRecorded(t, r, Config{Dimensions: testDims, SkipCreate: tc.skipCreate})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("New: %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "127.0.0.1:6334") {
				t.Errorf("error %q does not name the endpoint", err)
			}
			if n := len(requests[*qc.CreateCollection](r, qc.Collections_Create_FullMethodName)); n != 0 {
				t.Errorf("%d CreateCollection requests for an existing or refused collection", n)
			}
			n := len(requests[*qc.CreateFieldIndexCollection](r, qc.Points_CreateFieldIndex_FullMethodName))
			if tc.creates != (n > 0) {
				t.Errorf("%d CreateFieldIndex requests, want them: %v", n, tc.creates)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no port":        {Config{Addr: "qdrant", Collection: "m", Dimensions: 1}, "Addr"},
		"bad port":       {Config{Addr: "qdrant:http", Collection: "m", Dimensions: 1}, "port"},
		"no host":        {Config{Addr: ":6334", Collection: "m", Dimensions: 1}, "empty host"},
		"bad collection": {Config{Addr: "q:6334", Collection: "a/b", Dimensions: 1}, "Collection"},
		"no dimensions":  {Config{Addr: "q:6334", Collection: "m"}, "Dimensions"},
		"negative time":  {Config{Addr: "q:6334", Collection: "m", Dimensions: 1, Timeout: -time.Second}, "Timeout"},
	}
	for name, tc := range cases {
		err := tc.cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %s", name, err, tc.want)
		}
	}
	if _, err := New(ctx, Config{Addr: "q:6334", Dimensions: 4, CAFile: "/nonexistent/ca.pem"}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing CAFile: %v, want ErrInvalidConfig", err)
	}
	c := Config{Dimensions: 4}
	c.setDefaults()
	if err := c.Validate(); err != nil || c.Addr != DefaultAddr || c.Collection != DefaultCollection || c.Timeout != DefaultTimeout {
		t.Errorf("defaults %+v: %v", c, err)
	}
}

// fullRecord sets every field, with nested metadata.
func fullRecord() vectorstore.Record {
	return vectorstore.Record{
		ID:     strings.ToUpper(vectorstore.DeterministicID("shape")),
		Tenant: "acme", UserID: "u1", MemoryType: vectorstore.Semantic,
		Scope: "user", Kind: "fact", Key: "sales_columns",
		Text:   "Sales files have columns date, product and amount",
		Vector: []float32{0.5, -0.5, 0.25, 1},
		TS:     time.Date(2026, 11, 22, 10, 0, 0, 1500_000, time.UTC),
		ChatID: "chat-7", Who: "alice", HitCount: 3, Confidence: 0.875,
		ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		Metadata: map[string]any{
			"source": "chat", "count": 5000, "ratio": 0.25, "ok": true, "none": nil,
			"nested": map[string]any{"list": []any{1, "x", map[string]any{}}},
		},
	}
}

func TestUpsertRequestShape(t *testing.T) {
	s, r := openStore(t, Config{})
	rec := fullRecord()
	if err := s.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	id := strings.ToLower(rec.ID)

	gets := requests[*qc.GetPoints](r, qc.Points_Get_FullMethodName)
	if len(gets) != 1 || len(gets[0].GetIds()) != 1 || gets[0].GetIds()[0].GetUuid() != id {
		t.Fatalf("ownership check %v, want one Get of %s", gets, id)
	}
	batches := requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)
	if len(batches) != 1 || !batches[0].GetWait() || len(batches[0].GetOperations()) != 1 {
		t.Fatalf("writes %v, want one waited batch with one operation", batches)
	}
	up := batches[0].GetOperations()[0].GetUpsert()
	checkPartition(t, "upsert update_filter", up.GetUpdateFilter(), "acme", "u1")
	if len(up.GetPoints()) != 1 {
		t.Fatalf("%d points, want 1", len(up.GetPoints()))
	}
	p := up.GetPoints()[0]
	if p.GetId().GetUuid() != id {
		t.Errorf("point id %v, want the canonical %s", p.GetId(), id)
	}
	vecs := p.GetVectors().GetVectors().GetVectors()
	if got := vecs[vectorDense].GetDense().GetData(); !slices.Equal(got, rec.Vector) {
		t.Errorf("dense vector %v, want %v", got, rec.Vector)
	}
	sv := embed.Sparse(rec.Text)
	if got := vecs[vectorSparse].GetSparse(); got == nil || !slices.Equal(got.GetIndices(), sv.Indices) || !slices.Equal(got.GetValues(), sv.Values) {
		t.Errorf("sparse vector %v, want embed.Sparse of the text %v", got, sv)
	}
	pl := p.GetPayload()
	for field, want := range map[string]string{
		fieldTenant: "acme", fieldUserID: "u1", fieldMemoryType: "semantic", fieldScope: "user", fieldKind: "fact",
		fieldKey: "sales_columns", fieldText: rec.Text, fieldChatID: "chat-7", fieldWho: "alice",
	} {
		if got := pl[field].GetStringValue(); got != want {
			t.Errorf("payload %s = %q, want %q", field, got, want)
		}
	}
	for field, want := range map[string]int64{
		fieldTS: rec.TS.UnixMicro(), fieldExpiresAt: rec.ExpiresAt.UnixMicro(), fieldHitCount: 3,
	} {
		if got, ok := pl[field].GetKind().(*qc.Value_IntegerValue); !ok || got.IntegerValue != want {
			t.Errorf("payload %s = %v, want integer %d", field, pl[field], want)
		}
	}
	if got := pl[fieldConfidence].GetDoubleValue(); got != 0.875 {
		t.Errorf("confidence %v", pl[fieldConfidence])
	}
	meta := pl[fieldMetadata].GetStructValue().GetFields()
	_, null := meta["none"].GetKind().(*qc.Value_NullValue)
	if meta["source"].GetStringValue() != "chat" || meta["count"].GetIntegerValue() != 5000 || meta["ratio"].GetDoubleValue() != 0.25 ||
		!meta["ok"].GetBoolValue() || !null {
		t.Errorf("metadata scalars %v", meta)
	}
	list := meta["nested"].GetStructValue().GetFields()["list"].GetListValue().GetValues()
	if len(list) != 3 || list[0].GetIntegerValue() != 1 || list[1].GetStringValue() != "x" || list[2].GetStructValue() == nil {
		t.Errorf("nested metadata %v, want an object holding [1, \"x\", {}]", meta["nested"])
	}

	// No expiry and no metadata are stored as null, not left out.
	bare := vectorstore.Record{ID: vectorstore.DeterministicID("bare"), Tenant: "acme", UserID: "u2",
		MemoryType: vectorstore.Episodic, Vector: make([]float32, testDims), TS: rec.TS}
	if err := s.Upsert(ctx, bare, fullRecord()); err != nil {
		t.Fatal(err)
	}
	batches = requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)
	ops := batches[len(batches)-1].GetOperations()
	if len(ops) != 2 {
		t.Fatalf("a batch over two partitions sent %d operations, want one per partition", len(ops))
	}
	checkPartition(t, "first partition", ops[0].GetUpsert().GetUpdateFilter(), "acme", "u2")
	checkPartition(t, "second partition", ops[1].GetUpsert().GetUpdateFilter(), "acme", "u1")
	bp := ops[0].GetUpsert().GetPoints()[0].GetPayload()
	for _, f := range []string{fieldExpiresAt, fieldMetadata} {
		if _, ok := bp[f].GetKind().(*qc.Value_NullValue); !ok {
			t.Errorf("unset %s stored as %v, want null", f, bp[f])
		}
	}
}

func TestUpsertConflictWritesNothing(t *testing.T) {
	s, r := openStore(t, Config{})
	rec := fullRecord()
	id := strings.ToLower(rec.ID)
	r.mu.Lock()
	r.stored = []*qc.RetrievedPoint{{Id: qc.NewIDUUID(id), Payload: map[string]*qc.Value{
		fieldTenant: qc.NewValueString("acme"), fieldUserID: qc.NewValueString("u2"),
	}}}
	r.mu.Unlock()
	if err := s.Upsert(ctx, rec); !errors.Is(err, vectorstore.ErrConflict) {
		t.Fatalf("upsert over acme/u2's point: %v, want ErrConflict", err)
	}
	other := fullRecord()
	other.UserID = "u2"
	if err := s.Upsert(ctx, other, fullRecord()); !errors.Is(err, vectorstore.ErrConflict) {
		t.Fatalf("batch with one id for two partitions: %v, want ErrConflict", err)
	}
	if n := len(requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)); n != 0 {
		t.Fatalf("%d writes after conflicts, want none", n)
	}
}

func TestHybridQueryShape(t *testing.T) {
	s, r := openStore(t, Config{})
	stored := fullRecord()
	point, err := toPoint(mustNormalize(t, stored))
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.scored = []*qc.ScoredPoint{{Id: point.GetId(), Payload: point.GetPayload(), Score: 0.0325, Vectors: denseOutput(stored.Vector)}}
	r.mu.Unlock()

	q := vectorstore.Query{
		Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1", MemoryTypes: []vectorstore.MemoryType{vectorstore.Semantic}},
		Vector: []float32{1, 0, 0, 0}, Text: "sales columns", Mode: vectorstore.Hybrid, Limit: 5,
	}
	hits, err := s.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Score != float64(float32(0.0325)) {
		t.Fatalf("hits %+v", hits)
	}
	if d := diffRecords(hits[0].Record, mustNormalize(t, stored)); d != "" {
		t.Errorf("hit record: %s", d)
	}

	queries := requests[*qc.QueryPoints](r, qc.Points_Query_FullMethodName)
	if len(queries) != 1 {
		t.Fatalf("%d Query requests, want 1", len(queries))
	}
	qp := queries[0]
	if qp.GetLimit() != 5 || qp.GetQuery().GetRrf().GetK() != 61 {
		t.Errorf("limit %d, fusion %v: want limit 5 and RRF with k=61", qp.GetLimit(), qp.GetQuery())
	}
	checkPartition(t, "query filter", qp.GetFilter(), "acme", "u1")
	pf := qp.GetPrefetch()
	if len(pf) != 2 {
		t.Fatalf("%d prefetches, want dense and sparse", len(pf))
	}
	if pf[0].GetUsing() != vectorDense || !slices.Equal(pf[0].GetQuery().GetNearest().GetDense().GetData(), q.Vector) {
		t.Errorf("first prefetch uses %q with %v, want the dense query vector", pf[0].GetUsing(), pf[0].GetQuery())
	}
	sv := embed.Sparse(q.Text)
	if got := pf[1].GetQuery().GetNearest().GetSparse(); pf[1].GetUsing() != vectorSparse || !slices.Equal(got.GetIndices(), sv.Indices) {
		t.Errorf("second prefetch uses %q with %v, want embed.Sparse of the text", pf[1].GetUsing(), got)
	}
	for i, p := range pf {
		if p.GetLimit() != 4*5 {
			t.Errorf("prefetch %d limit %d, want 4×Limit", i, p.GetLimit())
		}
		checkPartition(t, "prefetch filter", p.GetFilter(), "acme", "u1")
	}

	// A text without index terms sends only the dense side; Sparse then sends nothing.
	q.Text = "the and of"
	if _, err := s.Search(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Mode = vectorstore.Sparse
	if hits, err := s.Search(ctx, q); err != nil || len(hits) != 0 {
		t.Fatalf("termless sparse search: %v, %v", hits, err)
	}
	queries = requests[*qc.QueryPoints](r, qc.Points_Query_FullMethodName)
	if len(queries) != 2 || len(queries[1].GetPrefetch()) != 1 || queries[1].GetPrefetch()[0].GetUsing() != vectorDense {
		t.Errorf("termless hybrid search: %d queries, last %v; want one more, dense prefetch only", len(queries), queries[len(queries)-1])
	}
}

func TestFilterMapping(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f, err := vectorstore.Filter{
		Tenant: "acme", UserID: "u1", MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic, vectorstore.Item},
		IDs:   []string{strings.ToUpper(vectorstore.DeterministicID("a"))},
		Since: now.Add(-time.Hour + time.Nanosecond), Until: now,
		ChatID: "c1", Who: "bob", Scope: "user", Kind: "fact", Key: "k1",
		Payload: map[string]any{"source": "chat", "n": 2.0, "pinned": true},
	}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	qf := toFilter(f, now)
	if len(qf.GetShould()) != 0 || len(qf.GetMustNot()) != 0 {
		t.Errorf("filter %v, want must conditions only", qf)
	}
	kw := keywordMatches(qf)
	for field, want := range map[string]string{
		fieldTenant: "acme", fieldUserID: "u1", fieldChatID: "c1", fieldWho: "bob", fieldScope: "user", fieldKind: "fact",
		fieldKey: "k1", "metadata.source": "chat",
	} {
		if kw[field] != want {
			t.Errorf("keyword %s = %q, want %q", field, kw[field], want)
		}
	}
	if got := hasIDs(qf); !slices.Equal(got, f.IDs) {
		t.Errorf("has_id %v, want %v", got, f.IDs)
	}
	var types []string
	var tsRange, expiry *qc.Range
	var n, pinned *qc.Match
	var live *qc.Filter
	for _, c := range qf.GetMust() {
		fc := c.GetField()
		switch fc.GetKey() {
		case fieldMemoryType:
			types = fc.GetMatch().GetKeywords().GetStrings()
		case fieldTS:
			tsRange = fc.GetRange()
		case "metadata.n":
			n = fc.GetMatch()
		case "metadata.pinned":
			pinned = fc.GetMatch()
		}
		if c.GetFilter() != nil {
			live = c.GetFilter()
		}
	}
	if !slices.Equal(types, []string{"episodic", "item"}) {
		t.Errorf("memory types %v", types)
	}
	// Since is rounded up to the microsecond, as the stored ts are whole microseconds.
	if tsRange.GetGte() != float64(now.Add(-time.Hour).UnixMicro()+1) || tsRange.GetLt() != float64(now.UnixMicro()) || tsRange.Gt != nil || tsRange.Lte != nil {
		t.Errorf("ts range %v", tsRange)
	}
	if n.GetInteger() != 2 || !pinned.GetBoolean() {
		t.Errorf("payload matches n=%v pinned=%v, want integer 2 and true", n, pinned)
	}
	if len(live.GetShould()) != 2 || live.GetShould()[0].GetIsEmpty().GetKey() != fieldExpiresAt ||
		live.GetShould()[1].GetField().GetRange().GetGt() != float64(now.UnixMicro()) {
		t.Errorf("expiry condition %v, want expires_at empty or > now", live)
	}

	f.ExpiredOnly = true
	for _, c := range toFilter(f, now).GetMust() {
		if c.GetFilter() != nil {
			t.Errorf("ExpiredOnly still carries the unexpired condition %v", c)
		}
		if c.GetField().GetKey() == fieldExpiresAt {
			expiry = c.GetField().GetRange()
		}
	}
	if expiry.GetLte() != float64(now.UnixMicro()) || expiry.Gt != nil {
		t.Errorf("ExpiredOnly range %v, want expires_at <= now", expiry)
	}
	f.ExpiredOnly, f.IncludeExpired = false, true
	for _, c := range toFilter(f, now).GetMust() {
		if c.GetFilter() != nil || c.GetField().GetKey() == fieldExpiresAt {
			t.Errorf("IncludeExpired still constrains expiry: %v", c)
		}
	}
}

func TestDeleteCarriesPartitionFilter(t *testing.T) {
	s, r := openStore(t, Config{})
	r.mu.Lock()
	r.count = 2
	r.mu.Unlock()
	a, b := vectorstore.DeterministicID("a"), vectorstore.DeterministicID("b")
	n, err := s.Delete(ctx, "acme", "u1", a, strings.ToUpper(b))
	if err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v; want the counted 2", n, err)
	}
	counts := requests[*qc.CountPoints](r, qc.Points_Count_FullMethodName)
	deletes := requests[*qc.DeletePoints](r, qc.Points_Delete_FullMethodName)
	if len(counts) != 1 || len(deletes) != 1 {
		t.Fatalf("%d counts, %d deletes; want one each", len(counts), len(deletes))
	}
	if !counts[0].GetExact() {
		t.Error("count is not exact")
	}
	d := deletes[0]
	if !d.GetWait() || d.GetPoints().GetPoints() != nil {
		t.Fatalf("delete %v: want a waited delete by filter, never by bare ids", d)
	}
	for what, f := range map[string]*qc.Filter{"count": counts[0].GetFilter(), "delete": d.GetPoints().GetFilter()} {
		checkPartition(t, what, f, "acme", "u1")
		if got := hasIDs(f); !slices.Equal(got, []string{a, b}) {
			t.Errorf("%s has_id %v, want %v", what, got, []string{a, b})
		}
		for _, c := range f.GetMust() {
			if c.GetFilter() != nil {
				t.Errorf("%s excludes expired records: %v", what, c)
			}
		}
	}

	// Nothing counted, nothing deleted.
	r.mu.Lock()
	r.count = 0
	r.mu.Unlock()
	if n, err := s.DeleteByFilter(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1", Who: "carol"}); err != nil || n != 0 {
		t.Fatalf("DeleteByFilter = %d, %v", n, err)
	}
	if len(requests[*qc.DeletePoints](r, qc.Points_Delete_FullMethodName)) != 1 {
		t.Error("a delete was sent for a filter that counted nothing")
	}
}

// Users is one exact facet of user_id within the tenant, sorted.
func TestUsersFacetShape(t *testing.T) {
	s, r := openStore(t, Config{})
	r.mu.Lock()
	r.users = []string{"u2", "u1"}
	r.mu.Unlock()
	users, err := s.Users(ctx, "acme")
	if err != nil || !slices.Equal(users, []string{"u1", "u2"}) {
		t.Fatalf("Users = %v, %v", users, err)
	}
	facets := requests[*qc.FacetCounts](r, qc.Points_Facet_FullMethodName)
	if len(facets) != 1 {
		t.Fatalf("%d facet requests, want 1", len(facets))
	}
	f := facets[0]
	must := f.GetFilter().GetMust()
	if f.GetKey() != fieldUserID || !f.GetExact() || f.GetLimit() < 1000 || len(must) != 1 ||
		must[0].GetField().GetKey() != fieldTenant || must[0].GetField().GetMatch().GetKeyword() != "acme" {
		t.Fatalf("facet request %v: want an exact facet of user_id within tenant acme", f)
	}
	if _, err := s.Users(ctx, "bad tenant"); !errors.Is(err, vectorstore.ErrInvalidFilter) {
		t.Fatalf("Users of an invalid tenant: %v", err)
	}
}

func TestUpdatePayloadWritesChangedFields(t *testing.T) {
	s, r := openStore(t, Config{})
	rec := mustNormalize(t, fullRecord())
	point, err := toPoint(rec)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.scrolled = []*qc.RetrievedPoint{{Id: point.GetId(), Payload: point.GetPayload(), Vectors: denseOutput(rec.Vector)}}
	r.mu.Unlock()
	text := "weekly report on Friday"
	if err := s.UpdatePayload(ctx, "acme", "u1", rec.ID, vectorstore.Patch{
		Text: &text, HitCountDelta: 2, Metadata: map[string]any{"source": "tool", "added": 1},
	}); err != nil {
		t.Fatal(err)
	}
	scrolls := requests[*qc.ScrollPoints](r, qc.Points_Scroll_FullMethodName)
	if len(scrolls) != 1 {
		t.Fatalf("%d reads, want 1", len(scrolls))
	}
	checkPartition(t, "read", scrolls[0].GetFilter(), "acme", "u1")
	batches := requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)
	if len(batches) != 1 || len(batches[0].GetOperations()) != 2 || !batches[0].GetWait() {
		t.Fatalf("writes %v, want one waited batch: set payload, update vectors", batches)
	}
	set := batches[0].GetOperations()[0].GetSetPayload()
	checkPartition(t, "set payload", set.GetPointsSelector().GetFilter(), "acme", "u1")
	if got := hasIDs(set.GetPointsSelector().GetFilter()); !slices.Equal(got, []string{rec.ID}) {
		t.Errorf("set payload selects %v, want %s", got, rec.ID)
	}
	var keys []string
	for k := range set.GetPayload() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{fieldHitCount, fieldMetadata, fieldText}; !slices.Equal(keys, want) {
		t.Errorf("set payload keys %v, want only the changed %v", keys, want)
	}
	if set.GetPayload()[fieldHitCount].GetIntegerValue() != 5 {
		t.Errorf("hit count %v, want 3+2", set.GetPayload()[fieldHitCount])
	}
	meta := set.GetPayload()[fieldMetadata].GetStructValue().GetFields()
	if meta["source"].GetStringValue() != "tool" || meta["added"].GetIntegerValue() != 1 || meta["count"].GetIntegerValue() != 5000 {
		t.Errorf("merged metadata %v", meta)
	}
	uv := batches[0].GetOperations()[1].GetUpdateVectors()
	checkPartition(t, "update vectors", uv.GetUpdateFilter(), "acme", "u1")
	vecs := uv.GetPoints()[0].GetVectors().GetVectors().GetVectors()
	if _, ok := vecs[vectorDense]; ok || len(vecs) != 1 || !slices.Equal(vecs[vectorSparse].GetSparse().GetIndices(), embed.Sparse(text).Indices) {
		t.Errorf("updated vectors %v, want only bm25 of the new text", vecs)
	}

	// A record the read does not find is ErrNotFound, and nothing is written.
	r.mu.Lock()
	r.scrolled = nil
	r.mu.Unlock()
	if err := s.UpdatePayload(ctx, "acme", "u1", rec.ID, vectorstore.Patch{HitCountDelta: 1}); !errors.Is(err, vectorstore.ErrNotFound) {
		t.Fatalf("update of a missing record: %v, want ErrNotFound", err)
	}
	if n := len(requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)); n != 1 {
		t.Errorf("%d writes, want no new one", n)
	}
}

func TestUpdatePayloadsBatchShape(t *testing.T) {
	s, r := openStore(t, Config{})
	first := mustNormalize(t, fullRecord())
	second := first
	second.ID, second.HitCount = vectorstore.DeterministicID("second"), 0
	var stored []*qc.RetrievedPoint
	for _, rec := range []vectorstore.Record{first, second} {
		point, err := toPoint(rec)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, &qc.RetrievedPoint{Id: point.GetId(), Payload: point.GetPayload(), Vectors: denseOutput(rec.Vector)})
	}
	r.mu.Lock()
	r.scrolled = stored
	r.mu.Unlock()
	absent := vectorstore.DeterministicID("absent")
	text := "weekly report on Friday"
	missing, err := s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{
		first.ID:                   {HitCountDelta: 1},
		strings.ToUpper(second.ID): {Text: &text, Vector: []float32{1, 0, 0, 0}},
		absent:                     {HitCountDelta: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{absent}) {
		t.Errorf("missing %v, want [%s]", missing, absent)
	}
	scrolls := requests[*qc.ScrollPoints](r, qc.Points_Scroll_FullMethodName)
	if len(scrolls) != 1 || scrolls[0].GetLimit() != 3 {
		t.Fatalf("reads %v, want one scroll of the 3 ids", scrolls)
	}
	checkPartition(t, "read", scrolls[0].GetFilter(), "acme", "u1")
	wantIDs := []string{first.ID, second.ID, absent}
	slices.Sort(wantIDs)
	if got := hasIDs(scrolls[0].GetFilter()); !slices.Equal(got, wantIDs) {
		t.Errorf("read selects %v, want every patched id, canonical and sorted: %v", got, wantIDs)
	}
	batches := requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)
	if len(batches) != 1 || !batches[0].GetWait() || len(batches[0].GetOperations()) != 3 {
		t.Fatalf("writes %v, want one waited batch: a set payload per record, one update vectors", batches)
	}
	ops := batches[0].GetOperations()
	for i, want := range []struct {
		id       string
		hitCount int64
	}{{first.ID, 4}, {second.ID, 0}} {
		set := ops[i].GetSetPayload()
		checkPartition(t, "set payload", set.GetPointsSelector().GetFilter(), "acme", "u1")
		if got := hasIDs(set.GetPointsSelector().GetFilter()); !slices.Equal(got, []string{want.id}) {
			t.Errorf("set payload %d selects %v, want %s", i, got, want.id)
		}
		if hc, ok := set.GetPayload()[fieldHitCount]; ok != (want.hitCount > 0) || hc.GetIntegerValue() != want.hitCount {
			t.Errorf("set payload %d hit count %v, want %d (set only when it changes)", i, hc, want.hitCount)
		}
	}
	uv := ops[2].GetUpdateVectors()
	checkPartition(t, "update vectors", uv.GetUpdateFilter(), "acme", "u1")
	if len(uv.GetPoints()) != 1 || uv.GetPoints()[0].GetId().GetUuid() != second.ID {
		t.Errorf("vectors updated for %v, want only %s", uv.GetPoints(), second.ID)
	}

	// Validation fails the whole batch before anything is written: a wrong-length
	// vector before the read, an invalid result after it.
	nan := math.NaN()
	for name, c := range map[string]struct {
		patch vectorstore.Patch
		want  error
	}{
		"wrong-length vector": {vectorstore.Patch{Vector: []float32{1}}, vectorstore.ErrDimension},
		"NaN confidence":      {vectorstore.Patch{Confidence: &nan}, vectorstore.ErrInvalidRecord},
	} {
		_, err := s.UpdatePayloads(ctx, "acme", "u1", map[string]vectorstore.Patch{first.ID: {HitCountDelta: 1}, second.ID: c.patch})
		if !errors.Is(err, c.want) {
			t.Errorf("batch with a %s: %v, want %v", name, err, c.want)
		}
	}
	if n := len(requests[*qc.UpdateBatchPoints](r, qc.Points_UpdateBatch_FullMethodName)); n != 1 {
		t.Errorf("%d writes after invalid batches, want no new one", n)
	}
	if n := len(requests[*qc.ScrollPoints](r, qc.Points_Scroll_FullMethodName)); n != 2 {
		t.Errorf("%d reads, want one more (for the NaN batch only)", n)
	}
}

func TestScrollPaging(t *testing.T) {
	s, r := openStore(t, Config{})
	next := vectorstore.DeterministicID("next")
	r.mu.Lock()
	r.next = qc.NewIDUUID(next)
	r.mu.Unlock()
	from := vectorstore.DeterministicID("from")
	_, got, err := s.Scroll(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}, strings.ToUpper(from), 7)
	if err != nil || got != next {
		t.Fatalf("Scroll next = %q, %v; want %s", got, err, next)
	}
	sc := requests[*qc.ScrollPoints](r, qc.Points_Scroll_FullMethodName)[0]
	if sc.GetOffset().GetUuid() != from || sc.GetLimit() != 7 || sc.GetOrderBy() != nil {
		t.Errorf("scroll request %v, want offset %s, limit 7, id order", sc, from)
	}
}

func TestAPIKeyHeaderNeverInErrors(t *testing.T) {
	const key = "s3cr3t-api-key"
	s, r := openStore(t, Config{APIKey: key})
	r.mu.Lock()
	// A server or proxy that echoes the header in its error must not leak it.
	r.fail = map[string]error{qc.Points_Count_FullMethodName: status.Error(codes.Unauthenticated, "bad api-key "+key)}
	r.mu.Unlock()
	_, err := s.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Count: %v, want the Unauthenticated status, still matchable", err)
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("error text holds the API key: %q", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:6334") || !strings.Contains(err.Error(), DefaultCollection) {
		t.Errorf("error %q does not name the endpoint and collection", err)
	}
	calls := r.allCalls()
	if len(calls) < 4 {
		t.Fatalf("only %d calls recorded", len(calls))
	}
	for _, c := range calls {
		if !slices.Equal(c.apiKey, []string{key}) {
			t.Errorf("%s sent api-key %v, want exactly the key", c.method, c.apiKey)
		}
	}
}

func TestClosedStore(t *testing.T) {
	s, r := openStore(t, Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	before := len(r.allCalls())
	if _, err := s.Count(ctx, vectorstore.Filter{Tenant: "acme", UserID: "u1"}); !errors.Is(err, vectorstore.ErrClosed) {
		t.Errorf("Count after Close: %v, want ErrClosed", err)
	}
	if err := s.Upsert(ctx, fullRecord()); !errors.Is(err, vectorstore.ErrClosed) {
		t.Errorf("Upsert after Close: %v, want ErrClosed", err)
	}
	if n := len(r.allCalls()); n != before {
		t.Errorf("%d calls after Close", n-before)
	}
}

func mustNormalize(t *testing.T, r vectorstore.Record) vectorstore.Record {
	t.Helper()
	n, err := r.Normalize(testDims)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// denseOutput is how Qdrant returns a point's dense vector.
func denseOutput(v []float32) *qc.VectorsOutput {
	return &qc.VectorsOutput{VectorsOptions: &qc.VectorsOutput_Vectors{Vectors: &qc.NamedVectorsOutput{
		Vectors: map[string]*qc.VectorOutput{vectorDense: {Vector: &qc.VectorOutput_Dense{Dense: &qc.DenseVector{Data: v}}}},
	}}}
}

// TestSparseExpansionShape: expansion terms join the sparse query vector at
// their weight, a term of the text keeps the text's value, and TermDocs
// answers "unknown" without a request.
func TestSparseExpansionShape(t *testing.T) {
	s, r := openStore(t, Config{})
	q := vectorstore.Query{
		Filter: vectorstore.Filter{Tenant: "acme", UserID: "u1"}, Text: "instruments",
		Expansion: []vectorstore.WeightedTerm{{Term: "guitar", Weight: 0.25}, {Term: "instrument", Weight: 0.5}},
		Mode:      vectorstore.Sparse, Limit: 5,
	}
	if _, err := s.Search(ctx, q); err != nil {
		t.Fatal(err)
	}
	queries := requests[*qc.QueryPoints](r, qc.Points_Query_FullMethodName)
	if len(queries) != 1 {
		t.Fatalf("%d Query requests, want 1", len(queries))
	}
	got := queries[0].GetQuery().GetNearest().GetSparse()
	want := embed.Sparse("instruments").With("guitar", 0.25)
	if !slices.Equal(got.GetIndices(), want.Indices) || !slices.Equal(got.GetValues(), want.Values) {
		t.Errorf("sparse query %v, want %+v (the text's term at its own value, guitar at 0.25)", got, want)
	}
	if docs, err := s.TermDocs(ctx, "acme", "u1", []string{"guitar"}); err != nil || docs != nil {
		t.Errorf("TermDocs = %v, %v; want nil (unknown)", docs, err)
	}
}
