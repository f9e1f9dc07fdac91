package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// QdrantFile is a Qdrant collection's snapshot inside a backup directory.
const QdrantFile = "qdrant.snapshot"

// Qdrant copies a Qdrant collection through Qdrant's snapshot API, which is
// REST only (the gRPC API the vector store speaks creates snapshots but cannot
// download or upload one): a backup creates a snapshot of the collection,
// downloads it and deletes it in Qdrant; a restore uploads it as the
// collection, which must not exist yet.
type Qdrant struct {
	// URL is Qdrant's REST API (vector.qdrant.http_url), e.g. http://qdrant:6333.
	URL string
	// Collection is vector.collection.
	Collection string
	// APIKey is sent as the api-key header when set.
	APIKey string
	// Client makes the requests; nil is http.DefaultClient.
	Client *http.Client
}

// Validate reports configuration errors.
func (q Qdrant) Validate() error {
	u, err := url.Parse(q.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%w: Qdrant URL %q is not an http(s) URL with a host", ErrInvalidConfig, q.URL)
	}
	if q.Collection == "" {
		return fmt.Errorf("%w: Qdrant collection is empty", ErrInvalidConfig)
	}
	return nil
}

// snapshotInfo is Qdrant's description of a snapshot.
type snapshotInfo struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// Snapshot writes a snapshot of the collection to the new file path
// (FileSnapshotter), checked against the size and SHA-256 Qdrant reports for
// it; the snapshot is deleted in Qdrant afterwards, also when the download
// failed, so that backups do not fill Qdrant's disk.
func (q Qdrant) Snapshot(ctx context.Context, path string) (err error) {
	if err := q.Validate(); err != nil {
		return err
	}
	var info snapshotInfo
	if err := q.call(ctx, http.MethodPost, q.path("snapshots")+"?wait=true", nil, "", &info); err != nil {
		return err
	}
	if info.Name == "" {
		return fmt.Errorf("%w: Qdrant created a snapshot of %s without a name", ErrStream, q.Collection)
	}
	snap := q.path("snapshots", info.Name)
	defer func() {
		if derr := q.call(ctx, http.MethodDelete, snap+"?wait=true", nil, "", nil); err == nil {
			err = derr
		}
	}()
	resp, err := q.do(ctx, http.MethodGet, snap, nil, "")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	h := sha256.New()
	cw := &countWriter{w: h}
	if err := create(path, 0o600, io.TeeReader(resp.Body, cw)); err != nil {
		return fmt.Errorf("backup: download Qdrant snapshot %s: %w", info.Name, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); (info.Checksum != "" && sum != info.Checksum) || (info.Size > 0 && cw.n != info.Size) {
		return fmt.Errorf("%w: Qdrant snapshot %s downloaded as %d bytes with SHA-256 %s; Qdrant reports %d bytes, %s", ErrCorrupt, info.Name, cw.n, sum, info.Size, info.Checksum)
	}
	return nil
}

// Absent is nil when the collection does not exist: a restore never replaces
// a collection.
func (q Qdrant) Absent(ctx context.Context) error {
	if err := q.Validate(); err != nil {
		return err
	}
	var reply struct {
		Exists bool `json:"exists"`
	}
	if err := q.call(ctx, http.MethodGet, q.path("exists"), nil, "", &reply); err != nil {
		return err
	}
	if reply.Exists {
		return fmt.Errorf("%w: Qdrant collection %s exists (restore into a new collection: set vector.collection, or delete it)", ErrNotEmpty, q.Collection)
	}
	return nil
}

// Recover uploads the snapshot file at path as the collection; Qdrant creates
// it from the snapshot.
func (q Qdrant) Recover(ctx context.Context, path string) error {
	if err := q.Validate(); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// Streamed: a snapshot can be larger than memory.
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("snapshot", QdrantFile)
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return q.call(ctx, http.MethodPost, q.path("snapshots", "upload")+"?wait=true&priority=snapshot", pr, mw.FormDataContentType(), nil)
}

// path is the collection's REST path with the segments after it, escaped.
func (q Qdrant) path(segments ...string) string {
	p := "/collections/" + url.PathEscape(q.Collection)
	for _, s := range segments {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// call sends a request and decodes the result of Qdrant's reply envelope
// ({"result": …, "status": "ok"}) into result, unless nil.
func (q Qdrant) call(ctx context.Context, method, path string, body io.Reader, contentType string, result any) error {
	resp, err := q.do(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var reply struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return fmt.Errorf("backup: Qdrant %s %s: bad reply: %w", method, path, err)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(reply.Result, result); err != nil {
		return fmt.Errorf("backup: Qdrant %s %s: bad result %s: %w", method, path, reply.Result, err)
	}
	return nil
}

// do sends a request and returns a successful response; any other status is
// an error carrying what Qdrant said.
func (q Qdrant) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(q.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if q.APIKey != "" {
		req.Header.Set("api-key", q.APIKey)
	}
	client := q.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("backup: Qdrant %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("backup: Qdrant %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp, nil
}
