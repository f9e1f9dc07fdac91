package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// The client side of export and import: pages over the retriever's export and
// import endpoints, so that it works against any running deployment, whatever
// its stores, with every message under the server's max_payload.

// Export writes the archive of one user of the client's tenant (all of its
// users when user is "") to w, reporting each user on progress.
func Export(ctx context.Context, cl *client.Client, user string, w io.Writer, progress io.Writer) (Manifest, error) {
	info, err := cl.Export(ctx, events.ExportRequest{Part: events.ExportInfo})
	if err != nil {
		return Manifest{}, err
	}
	if info.Embedder == nil {
		return Manifest{}, fmt.Errorf("transfer: the retriever did not name its embedder")
	}
	for _, u := range info.SkippedUsers {
		fmt.Fprintf(progress, "skipped user %q: not a valid id\n", u)
	}
	users := info.Users
	if user != "" {
		users = []string{user}
	}
	aw := NewWriter(w, cl.Tenant(), *info.Embedder, time.Now())
	for i, u := range users {
		if err := aw.User(u); err != nil {
			return Manifest{}, err
		}
		if err := exportUser(ctx, cl, aw, u, progress); err != nil {
			return Manifest{}, fmt.Errorf("export user %s: %w", u, err)
		}
		c := aw.user
		fmt.Fprintf(progress, "exported user %s (%d/%d): %d files, %d records (%d items), %d session values\n",
			u, i+1, len(users), c.Files, c.Records, c.Items, c.Sessions)
	}
	return aw.Close()
}

// exportUser pages through the three parts of one user, saying every second
// or so how far it is.
func exportUser(ctx context.Context, cl *client.Client, aw *Writer, user string, progress io.Writer) error {
	var (
		name string
		data []byte
		last = time.Now()
	)
	flushFile := func() error {
		if name == "" {
			return nil
		}
		err := aw.File(name, data)
		name, data = "", nil
		return err
	}
	for _, part := range []events.ExportPart{events.ExportFiles, events.ExportRecords, events.ExportSessions} {
		for cursor := ""; ; {
			rep, err := cl.Export(ctx, events.ExportRequest{UserID: user, Part: part, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, f := range rep.Files {
				if f.Offset == 0 {
					if err := flushFile(); err != nil {
						return err
					}
					name = f.Name
				} else if f.Name != name || f.Offset != len(data) {
					return fmt.Errorf("transfer: chunk of %s at offset %d does not follow %s at %d", f.Name, f.Offset, name, len(data))
				}
				data = append(data, f.Data...)
			}
			for _, r := range rep.Records {
				if err := aw.Record(r); err != nil {
					return err
				}
			}
			for _, s := range rep.Sessions {
				if err := aw.Session(s); err != nil {
					return err
				}
			}
			if rep.Next == "" || rep.Next == cursor {
				break
			}
			cursor = rep.Next
			if time.Since(last) >= time.Second {
				last = time.Now()
				fmt.Fprintf(progress, "exporting user %s: %d files, %d records, %d session values so far\n", user, aw.user.Files, aw.user.Records, aw.user.Sessions)
			}
		}
		if err := flushFile(); err != nil {
			return err
		}
	}
	return nil
}

// ImportReport says what Import did.
type ImportReport struct {
	Manifest Manifest
	Tenant   string // the tenant imported into
	// Reembedded is set when the records were embedded again, because the
	// deployment's embedder differs from the archive's in model or dimensions.
	Reembedded bool
	Target     events.EmbedderInfo
	Written    events.ImportReply
	Elapsed    time.Duration
}

// Check reads the whole archive open returns and returns its manifest, or what
// is wrong with it (an error wrapping ErrArchive).
func Check(open func() (io.ReadCloser, error)) (Manifest, error) {
	return readArchive(open, nil)
}

// Import imports the archive open returns, which Check found sound with
// manifest m, into the client's tenant, in requests of at most pageBytes,
// reporting progress. Checking first means a corrupt archive imports nothing.
func Import(ctx context.Context, cl *client.Client, m Manifest, open func() (io.ReadCloser, error), pageBytes int, progress io.Writer) (ImportReport, error) {
	start := time.Now()
	info, err := cl.Export(ctx, events.ExportRequest{Part: events.ExportInfo})
	if err != nil {
		return ImportReport{}, err
	}
	if info.Embedder == nil {
		return ImportReport{}, fmt.Errorf("transfer: the retriever did not name its embedder")
	}
	rep := ImportReport{Manifest: m, Tenant: cl.Tenant(), Target: *info.Embedder, Reembedded: *info.Embedder != m.Embedder}
	total := m.Totals()
	if rep.Reembedded {
		fmt.Fprintf(progress, "re-embedding %d records: the archive's embedder is %s (%d dimensions), this deployment's %s (%d dimensions)\n",
			total.Records, m.Embedder.Model, m.Embedder.Dimensions, info.Embedder.Model, info.Embedder.Dimensions)
	}
	im := importer{cl: cl, ctx: ctx, budget: pageBytes, reembed: rep.Reembedded, from: m.Tenant, progress: progress, total: total, last: time.Now()}
	if _, err := readArchive(open, im.add); err != nil {
		return rep, err
	}
	if err := im.flush(); err != nil {
		return rep, err
	}
	rep.Written, rep.Elapsed = im.done, time.Since(start)
	return rep, nil
}

func readArchive(open func() (io.ReadCloser, error), visit func(Entry) error) (Manifest, error) {
	r, err := open()
	if err != nil {
		return Manifest{}, err
	}
	defer func() { _ = r.Close() }()
	return Read(r, visit)
}

// reembedBatch bounds the records of one import request that the retriever
// embeds, so that a request ends well within its timeout.
const reembedBatch = 64

// importer batches archive entries into import requests.
type importer struct {
	cl       *client.Client
	ctx      context.Context
	budget   int
	reembed  bool
	from     string // the archive's tenant
	progress io.Writer
	total    UserCounts
	req      events.ImportRequest
	used     int
	done     events.ImportReply
	last     time.Time
}

// add puts one entry in the pending request, sending it first when the entry
// would not fit. A file larger than a request goes in chunks.
func (im *importer) add(e Entry) error {
	if e.User != im.req.UserID {
		if err := im.flush(); err != nil {
			return err
		}
		im.req.UserID = e.User
	}
	switch {
	case e.File != nil:
		room := max(im.budget*3/4-chunkOverhead, 1)
		for off := 0; off == 0 || off < len(e.File.Data); off += room {
			end := min(off+room, len(e.File.Data))
			c := events.FileChunk{Name: e.File.Name, Offset: off, Data: e.File.Data[off:end]}
			if err := im.fit(chunkOverhead + (end-off+2)/3*4); err != nil {
				return err
			}
			im.req.Files = append(im.req.Files, c)
		}
	case e.Record != nil:
		r := *e.Record
		if im.reembed {
			r.Vector = nil
		}
		if err := im.fitJSON(r); err != nil {
			return err
		}
		im.req.Records = append(im.req.Records, r)
	case e.Session != nil:
		if err := im.fitJSON(*e.Session); err != nil {
			return err
		}
		im.req.Sessions = append(im.req.Sessions, *e.Session)
	}
	return nil
}

func (im *importer) fitJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return im.fit(len(data) + 1)
}

// fit sends the pending request when size more bytes would not fit in it, or
// it holds as many entries as a request may, then counts size.
func (im *importer) fit(size int) error {
	n := len(im.req.Files) + len(im.req.Records) + len(im.req.Sessions)
	full := n >= events.MaxIDsPerReq || (im.reembed && len(im.req.Records) >= reembedBatch)
	if n > 0 && (full || im.used+size > im.budget) {
		if err := im.flush(); err != nil {
			return err
		}
	}
	im.used += size
	return nil
}

// flush sends the pending request.
func (im *importer) flush() error {
	req := im.req
	im.req = events.ImportRequest{UserID: req.UserID}
	im.used = 0
	if len(req.Files)+len(req.Records)+len(req.Sessions) == 0 {
		return nil
	}
	req.Reembed, req.FromTenant = im.reembed, im.from
	rep, err := im.cl.Import(im.ctx, req)
	if err != nil {
		return fmt.Errorf("import user %s: %w", req.UserID, err)
	}
	im.done.Files += rep.Files
	im.done.Records += rep.Records
	im.done.Sessions += rep.Sessions
	if time.Since(im.last) >= time.Second {
		im.last = time.Now()
		fmt.Fprintf(im.progress, "imported %d/%d records, %d/%d session values (user %s)\n",
			im.done.Records, im.total.Records, im.done.Sessions, im.total.Sessions, req.UserID)
	}
	return nil
}
