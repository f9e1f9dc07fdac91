package embedded

import (
	"context"
	"database/sql"
	"runtime"
	"sync"

	"github.com/agentmem/agentmem/pkg/embed"
)

// A partition's load is what the first request of its user after a restart
// waits for: 3.4–6.5 s of CPU for one partition of 100,000 records on the
// shared development machine (BENCHMARKS.md, restart). About half is SQLite's
// steps and the driver's copies of the columns, a fifth the scan and the
// vectors' decode, a quarter tokenizing the texts and putting the entries into
// the partition (postings, id maps). Reading the rows and putting the entries
// are each sequential, but need not wait for each other: the rows are read on
// one goroutine, normalised and tokenized on others, and put, in the order
// read, on the caller's, all at once. The CPU is the same; given a second core
// the wall time is the read's rather than the sum.

// loadBatch is how many rows go to a builder at a time: enough to make the
// hand-overs rare, few enough that the putting starts soon after the reading.
const loadBatch = 256

// rowBatch is loadBatch rows' entries on their way through the load: the
// reader makes them (newEntryNormalized), a builder normalises their vectors in
// place and tokenizes their texts, then the caller puts them. No one else sees
// them before that. A batch holds pointers only: a batch of whole records (a
// Record is ~250 bytes) cost as much as the rest of the read, most of it the
// kernel's zeroing of the fresh pages.
type rowBatch struct {
	ents  []*entry
	built chan struct{} // closed once the builder is done
}

// loadEntries reads the rows of k's records (from its partition file when the
// store trusts one, partfile.go) and calls put with each one's
// entry, built as newEntry builds it and tokenized (entry.tokenize), on the
// caller's goroutine, in the order SQLite returns them. The caller holds
// writeMu, so the rows are the committed ones until it publishes the partition.
// A cancelled ctx ends the rows (database/sql closes them), and the error is
// its.
func (s *backend) loadEntries(ctx context.Context, k partKey, put func(e *entry)) error {
	if ents, ok := s.readPartFile(k); ok {
		for _, e := range ents {
			put(e)
		}
		return nil
	}
	rows, err := s.query(ctx, `SELECT `+recordCols+` FROM records r WHERE r.tenant = ? AND r.user_id = ?`, k.tenant, k.userID)
	if err != nil {
		return err
	}
	// The reader and the caller's puts take a core each at most; the builders
	// share what is left. The channels' buffers bound the rows read ahead.
	builders := max(1, runtime.GOMAXPROCS(0)-1)
	toBuild := make(chan *rowBatch, builders)
	toPut := make(chan *rowBatch, 2*builders)
	var readErr error
	go func() {
		defer close(toPut)
		defer close(toBuild)
		defer rows.Close()
		readErr = readBatches(rows, func(b *rowBatch) {
			toPut <- b
			toBuild <- b
		})
	}()
	var wg sync.WaitGroup
	for range builders {
		wg.Go(func() {
			for b := range toBuild {
				b.build()
			}
		})
	}
	defer wg.Wait()
	for b := range toPut {
		<-b.built
		for _, e := range b.ents {
			put(e)
		}
	}
	return readErr
}

// readBatches scans rows in batches of loadBatch and hands each to send, until
// the rows end or fail.
func readBatches(rows *sql.Rows, send func(b *rowBatch)) error {
	b := newRowBatch()
	for rows.Next() {
		rec, rid, meta, err := scanRecord(rows)
		if err != nil {
			return err
		}
		// The vector, which scanRecord decoded into a slice of its own, is
		// normalised in place by the builder, not in a copy (as newEntry would).
		b.ents = append(b.ents, newEntryNormalized(rid, rec, meta))
		if len(b.ents) == loadBatch {
			send(b)
			b = newRowBatch()
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(b.ents) > 0 {
		send(b)
	}
	return nil
}

func newRowBatch() *rowBatch {
	return &rowBatch{ents: make([]*entry, 0, loadBatch), built: make(chan struct{})}
}

// build finishes b's entries as newEntry would have made them.
func (b *rowBatch) build() {
	for _, e := range b.ents {
		embed.Normalize(e.rec.Vector)
		e.tokenize()
	}
	close(b.built)
}
