// Package docstore is the Markdown memory of each (tenant, user): MEMORY.md, topic
// files, daily notes, backups, policy overrides and their snapshots (SPEC A1–A9,
// B1, B4, B5).
//
// # Layout
//
//	<memory_dir>/<tenant>/<user>/
//	  MEMORY.md  file_patterns.md  user_prefs.md
//	  YYYYMM/YYYYMMDD.md
//	  backups/YYYYMMDD_HHMMSS_MEMORY.md
//	  policy_snapshots/YYYYMMDD_HHMMSS.json  policy_overrides.json  .last_longterm_compress
//
// Names are slash-separated and relative to the namespace. ValidateName accepts only
// the shapes above, so no name can leave the namespace; tenant and user are
// events.ValidateID tokens. Backup and snapshot names are UTC stamps; a second one in
// the same second gets a sequence suffix (backups/20261123_101500_1_MEMORY.md,
// policy_snapshots/20261123_101500_1.json) and listings sort by (stamp, sequence).
//
// # Layers
//
// Store holds all semantics — category routing, idempotent appends, the capacity
// bound, backup before overwrite, snapshots before policy changes — once, over a
// Backend, which only reads and writes whole files. Backends: Filesystem (the layout
// above on disk) and JetStream (one KV bucket, keys "<tenant>.<user>.<encoded
// name>"). docstoretest.RunSuite is the conformance suite both pass.
//
// # Atomicity
//
// Backend.Update is the only read-modify-write. Filesystem writes a temp file beside
// the target, fsyncs it, renames it over the target and fsyncs the directory, so a
// reader sees the old file or the new one, never a mix; JetStream relies on KV
// writes being atomic. Concurrent writers are serialised per file:
//
//   - Filesystem: an in-process lock per path, then flock(2) on ".<name>.lock" in
//     the same directory (lock files stay on disk, hidden, and are never listed).
//   - JetStream: an in-process lock per key, then compare-and-set on the key's
//     revision, retried with jittered backoff on conflict, up to 100 times
//     (ErrConflict after that).
//
// Lock order is always in-process lock first, then the file lock or CAS; no
// operation holds the locks of two files at once, so there is no lock-order cycle.
// Store operations that touch several files (Replace: backup, then target) take
// one file's locks at a time and use compare-and-set on content: Replace writes the
// backup of what it read, then replaces the target only if it still holds exactly
// that, and starts over otherwise, so a backup always holds what was overwritten.
//
// # Readers that keep what they read
//
// ReadFileIfChanged (Backend.ReadIfChanged) returns a file only when it no longer
// holds the content of a Version an earlier call gave: the retriever keeps
// MEMORY.md and the topic files between requests and pays one stat(2) per file
// on the filesystem instead of a read. A filesystem version is the inode, size,
// modification and change time, and a file changed in the last 100 ms (2 s when
// its times are whole seconds) gets none, so that a write within the file
// system's timestamp granularity cannot pass for the content before it.
//
// AppendEntries checks for an identical entry (time, category, content) inside the
// same Update, so a redelivered event never duplicates an entry, and enforces the
// capacity of MEMORY.md in that Update too. Write failures are returned wrapped,
// logged once by Store, and never panic (SPEC A8).
package docstore
