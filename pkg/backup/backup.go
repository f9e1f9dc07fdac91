// Package backup copies a whole deployment (every JetStream stream and KV
// bucket, the vector store and the Markdown tree) into a directory and restores
// it into an empty data directory: `agentmem backup` and `agentmem restore`.
//
// Consistency: the copy is a cut at one point of the event stream. The retriever
// that owns the stores (Server) holds its write requests, pauses every durable
// consumer of the event stream and waits until none has a message in flight;
// then the vector store and the Markdown tree are copied and the streams
// snapshotted, consumer positions included, before anything resumes. So the
// stores hold exactly the events each consumer had acknowledged, and a stack
// started on the restore goes on from those positions: the events the stream
// took after the cut (observations keep being accepted during a backup) are in
// the copied streams up to the moment each was snapshotted and are processed
// after the restore.
package backup

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Errors, wrapped with what failed.
var (
	// ErrInvalidConfig: a configuration that Validate refuses.
	ErrInvalidConfig = errors.New("backup: invalid configuration")
	// ErrStream: a stream could not be snapshotted or restored.
	ErrStream = errors.New("backup: stream snapshot")
	// ErrBusy: another backup holds the deployment.
	ErrBusy = errors.New("backup: another backup is running")
	// ErrNotDrained: a consumer still had messages in flight when the wait for
	// them ended (a model outage keeps them pending); nothing was copied.
	ErrNotDrained = errors.New("backup: the workers did not finish their messages in flight")
	// ErrCorrupt: a backup directory that is not a complete, unchanged backup.
	ErrCorrupt = errors.New("backup: damaged backup")
	// ErrNotEmpty: a backup directory or restore target that already holds data.
	ErrNotEmpty = errors.New("backup: not empty")
	// ErrUnsupported: a store the backup cannot copy.
	ErrUnsupported = errors.New("backup: unsupported")
	// ErrAuth: a restore of a deployment with NATS authentication without its
	// key directory, or with another deployment's.
	ErrAuth = errors.New("backup: NATS authentication")
)

// Manifest format and version; a restore refuses any other.
const (
	Format  = "agentmem-backup"
	Version = 1
)

// ManifestFile is written last into a backup directory: a directory without it
// is an interrupted backup.
const ManifestFile = "manifest.json"

// Names of the copied stores inside a backup directory.
const (
	VectorsFile  = "vectors.db"
	MarkdownFile = "markdown.tar"
	streamsDir   = "streams"
)

// Manifest describes a backup: what it holds, where the cut is, and every
// file's size and SHA-256, checked before a restore writes anything.
type Manifest struct {
	Format   string    `json:"format"`
	Version  int       `json:"version"`
	Agentmem string    `json:"agentmem"` // the build that wrote it
	Created  time.Time `json:"created"`
	// Cut is where the copied stores stand.
	Cut Cut `json:"cut"`
	// Streams are the snapshots, one file each, restored in this order.
	Streams []StreamEntry `json:"streams"`
	// Files are the copies of the stores outside JetStream.
	Files []FileEntry `json:"files"`
	// Vector says which vector store was copied and how.
	Vector VectorEntry `json:"vector"`
	// Markdown is "filesystem" (MarkdownFile) or "jetstream" (in its KV bucket's
	// stream).
	Markdown string `json:"markdown"`
	// Account is the NATS account the streams were in, as the server named
	// the backup's connection's: "$G" without authentication, the AGENTMEM
	// account's public key under `up --auth` (pkg/natsauth), whose key
	// directory a restore then needs. Empty in a backup written before it was
	// recorded.
	Account string `json:"account,omitempty"`
}

// Cut is the point of the event stream the stores were copied at.
type Cut struct {
	// Stream is the event stream; Sequence its last sequence at the cut.
	Stream   string `json:"stream"`
	Sequence uint64 `json:"sequence"`
	// Consumers maps every durable consumer to the last stream sequence it had
	// acknowledged in order (its ack floor) at the cut.
	Consumers map[string]uint64 `json:"consumers"`
}

// StreamEntry is one stream's snapshot.
type StreamEntry struct {
	Name   string                 `json:"name"`
	Config jetstream.StreamConfig `json:"config"`
	State  jetstream.StreamState  `json:"state"`
	FileEntry
}

// FileEntry is one file of the backup directory.
type FileEntry struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Vector store backends of a backup.
const (
	VectorEmbedded = "embedded"
	VectorQdrant   = "qdrant"
)

// VectorEntry is the vector store's part of a backup.
type VectorEntry struct {
	// Backend is VectorEmbedded (the store's file, VectorsFile) or
	// VectorQdrant (a snapshot of the collection, QdrantFile).
	Backend string `json:"backend"`
}
