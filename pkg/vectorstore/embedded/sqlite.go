package embedded

import (
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// schema is the embedded store's layout. rid is the SQLite rowid (declared so VACUUM
// keeps it); id is the public UUID, whose unique index the upsert's ON CONFLICT
// needs. Reads are served from the in-memory partitions, so SQLite is only asked
// for a whole partition (its load), for ids (UpdatePayloads of a partition not
// loaded) and for a partition's rows to delete: records_partition_type serves
// all of them. Every index costs
// each insert a b-tree descent and dirty pages in the WAL, so files made before
// this layout lose the ones nothing uses any more (the DROPs below): with them,
// writing a record cost about twice as much.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS records (
		rid INTEGER PRIMARY KEY,
		id TEXT NOT NULL UNIQUE,
		tenant TEXT NOT NULL,
		user_id TEXT NOT NULL,
		memory_type TEXT NOT NULL,
		scope TEXT NOT NULL,
		kind TEXT NOT NULL,
		key TEXT NOT NULL,
		text TEXT NOT NULL,
		vector BLOB NOT NULL,
		ts INTEGER NOT NULL,
		chat_id TEXT NOT NULL,
		who TEXT NOT NULL,
		hit_count INTEGER NOT NULL,
		confidence REAL NOT NULL,
		expires_at INTEGER,
		metadata TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS records_partition_type ON records(tenant, user_id, memory_type, expires_at)`,
	`DROP INDEX IF EXISTS records_partition_ts`,
	`DROP INDEX IF EXISTS records_partition_id`,
	`CREATE TABLE IF NOT EXISTS store_info (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
}

// pageBytes is the page size of a new database file. A record's row (a
// 384-dimension vector is 1.5 KiB; with an episode's text and metadata, ~2.3 KiB)
// does not fit twice in a 4 KiB page, so with SQLite's default each record took a
// page of its own, 57% used; an 8 KiB page holds three. Every page a commit
// changes is written to the WAL and copied again by the checkpoint, so fewer
// pages per record is less of both.
const pageBytes = 8192

// recordCols are the columns scanRecord reads, rid first.
const recordCols = `r.rid, r.id, r.tenant, r.user_id, r.memory_type, r.scope, r.kind, r.key, r.text,
	r.vector, r.ts, r.chat_id, r.who, r.hit_count, r.confidence, r.expires_at, r.metadata`

// rowArgs builds the column values of records in the same slices, one
// statement's rows after another's. Reusing them is safe because the driver
// copies every argument (modernc.org/sqlite binds texts and blobs into its own
// memory) before the statement returns; a fresh 4·Dimensions-byte vector per row
// was most of a write's garbage.
type rowArgs struct {
	vals []any
	vec  []byte
}

// set returns the column values of rec in schema order, from id to metadata (last:
// meta, rec's metadata as encodeMetadata gives it), valid until the next set.
func (a *rowArgs) set(rec vectorstore.Record, meta string) []any {
	a.reset()
	return a.add(rec, meta)
}

// reset drops the values of the records added so far.
func (a *rowArgs) reset() { a.vals, a.vec = a.vals[:0], a.vec[:0] }

// add appends the column values of rec, as set gives them, to those of the
// records added since the last reset, and returns them all.
func (a *rowArgs) add(rec vectorstore.Record, meta string) []any {
	var expires any
	if !rec.ExpiresAt.IsZero() {
		expires = rec.ExpiresAt.UnixMicro()
	}
	if meta == "" {
		meta = "null"
	}
	// Growing a.vec may move it; the earlier rows' vectors stay valid in the old
	// array, which nothing writes to any more.
	start := len(a.vec)
	a.vec = appendVector(a.vec, rec.Vector)
	a.vals = append(a.vals, rec.ID, rec.Tenant, rec.UserID, string(rec.MemoryType), rec.Scope, rec.Kind, rec.Key, rec.Text,
		a.vec[start:], rec.TS.UnixMicro(), rec.ChatID, rec.Who, rec.HitCount, rec.Confidence,
		expires, meta)
	return a.vals
}

// storedForm is rec as reading its row back gives it (scanRecord), but for the
// metadata, which stays encoded beside it: times cut to the microsecond in UTC,
// Metadata nil. The partition cache keeps this form, so a record reads the same
// whether its partition was loaded before or after the write.
func storedForm(rec vectorstore.Record) vectorstore.Record {
	rec.TS = time.UnixMicro(rec.TS.UnixMicro()).UTC()
	if !rec.ExpiresAt.IsZero() {
		rec.ExpiresAt = time.UnixMicro(rec.ExpiresAt.UnixMicro()).UTC()
	}
	rec.Metadata = nil
	return rec
}

// scanRecord reads a row of recordCols: the record without its Metadata, its rid,
// and its metadata as encodeMetadata writes it (decodeMetadata reads it).
func scanRecord(rows *sql.Rows) (rec vectorstore.Record, rid int64, meta string, err error) {
	var (
		mt string
		// RawBytes: the driver's copy of the column, decoded at once, rather
		// than a second copy of it to decode (a partition's load reads them all).
		vec     sql.RawBytes
		ts      int64
		expires sql.NullInt64
	)
	err = rows.Scan(&rid, &rec.ID, &rec.Tenant, &rec.UserID, &mt, &rec.Scope, &rec.Kind, &rec.Key, &rec.Text,
		&vec, &ts, &rec.ChatID, &rec.Who, &rec.HitCount, &rec.Confidence, &expires, &meta)
	if err != nil {
		return rec, 0, "", err
	}
	rec.MemoryType = vectorstore.MemoryType(mt)
	rec.Vector = decodeVector(vec)
	rec.TS = time.UnixMicro(ts).UTC()
	if expires.Valid {
		rec.ExpiresAt = time.UnixMicro(expires.Int64).UTC()
	}
	if meta, err = checkMetadata(meta); err != nil {
		return rec, 0, "", fmt.Errorf("record %s: stored metadata: %w", rec.ID, err)
	}
	return rec, rid, meta, nil
}

// appendVector appends v to b as little-endian float32s, the layout every
// platform reads back the same.
func appendVector(b []byte, v []float32) []byte {
	b = slices.Grow(b, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// jsonList encodes values as a JSON array, bound as one parameter and expanded in
// SQL with json_each: one statement shape whatever the list's length, and no
// SQLite parameter limit.
func jsonList[T any](vs []T) string {
	b, _ := json.Marshal(vs) // strings and integers always marshal
	return string(b)
}

// whereFilter renders f (already normalised) as a WHERE condition on records r.
func whereFilter(f vectorstore.Filter, now time.Time) (string, []any) {
	conds := []string{"r.tenant = ?", "r.user_id = ?"}
	if f.IDs != nil {
		// Look the ids up in their unique index rather than scan the partition:
		// without statistics SQLite prefers the partition index, and then reads every
		// row of the partition (its vectors and texts) to find a few ids. The unary +
		// takes these two terms off the partition index.
		conds = []string{"+r.tenant = ?", "+r.user_id = ?"}
	}
	args := []any{f.Tenant, f.UserID}
	add := func(cond string, a ...any) {
		conds = append(conds, cond)
		args = append(args, a...)
	}
	if len(f.MemoryTypes) > 0 {
		add("r.memory_type IN (SELECT value FROM json_each(?))", jsonList(f.MemoryTypes))
	}
	if f.IDs != nil {
		add("r.id IN (SELECT value FROM json_each(?))", jsonList(f.IDs))
	}
	if !f.Since.IsZero() {
		add("r.ts >= ?", ceilMicro(f.Since))
	}
	if !f.Until.IsZero() {
		add("r.ts < ?", ceilMicro(f.Until))
	}
	for _, c := range []struct{ col, v string }{
		{"r.chat_id", f.ChatID}, {"r.who", f.Who}, {"r.scope", f.Scope}, {"r.kind", f.Kind}, {"r.key", f.Key},
	} {
		if c.v != "" {
			add(c.col+" = ?", c.v)
		}
	}
	keys := make([]string, 0, len(f.Payload))
	for k := range f.Payload {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// Keys are [A-Za-z0-9_-] (checked by Normalize), safe inside a quoted path.
		path := `$."` + k + `"`
		switch v, _ := vectorstore.PayloadValue(f.Payload[k]); v := v.(type) {
		case string:
			add("json_type(r.metadata, ?) = 'text' AND json_extract(r.metadata, ?) = ?", path, path, v)
		case bool:
			add("json_type(r.metadata, ?) = ?", path, strconv.FormatBool(v))
		case int64:
			add("json_type(r.metadata, ?) IN ('integer', 'real') AND json_extract(r.metadata, ?) = ?", path, path, v)
		}
	}
	switch {
	case f.ExpiredOnly:
		add("r.expires_at IS NOT NULL AND r.expires_at <= ?", now.UnixMicro())
	case !f.IncludeExpired:
		add("(r.expires_at IS NULL OR r.expires_at > ?)", now.UnixMicro())
	}
	return strings.Join(conds, " AND "), args
}

// ceilMicro is t in Unix microseconds rounded up, so that comparing stored
// (truncated) microseconds against it gives the same answer as comparing the times.
func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}
