package docstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/pkg/clock"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/obs"
)

// Defaults of Config (SPEC A2, A7).
const (
	DefaultAutoLoadLines = 200
	DefaultMaxLines      = 500
	DefaultTargetLines   = 400
	// DefaultBackupsKeep is how many backups a namespace keeps (SPEC A8).
	DefaultBackupsKeep = 20
)

const (
	// maxOverwriteAttempts bounds the copy-then-replace loop when the target keeps
	// changing between the copy and the replace.
	maxOverwriteAttempts = 20
	// maxStampSeq bounds the suffixes tried for a backup or snapshot name within
	// one second.
	maxStampSeq = 1000
)

// Internal signals from Update callbacks; never returned to callers.
var (
	errUnchanged = errors.New("docstore: unchanged")
	errStale     = errors.New("docstore: changed since read")
	errExists    = errors.New("docstore: exists")
)

// Config configures a Store.
type Config struct {
	// AutoLoadLines is how many lines of MEMORY.md Head returns by default. Default 200.
	AutoLoadLines int
	// MaxLines is the size of MEMORY.md, in lines, above which the oldest entries are
	// dropped. Default 500.
	MaxLines int
	// TargetLines is the size, in lines, that MEMORY.md is cut down to. Default 400.
	TargetLines int
	// BackupsKeep is how many backups a namespace keeps: after every backup the
	// oldest beyond this many are deleted (SPEC A8). Default 20.
	BackupsKeep int
	// Now is the clock for entry stamps, daily notes and backup names. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.AutoLoadLines == 0 {
		c.AutoLoadLines = DefaultAutoLoadLines
	}
	if c.MaxLines == 0 {
		c.MaxLines = DefaultMaxLines
	}
	if c.TargetLines == 0 {
		c.TargetLines = min(DefaultTargetLines, c.MaxLines)
	}
	if c.BackupsKeep == 0 {
		c.BackupsKeep = DefaultBackupsKeep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	switch {
	case c.AutoLoadLines < 1:
		return fmt.Errorf("docstore: AutoLoadLines %d must be positive", c.AutoLoadLines)
	case c.MaxLines < 1:
		return fmt.Errorf("docstore: MaxLines %d must be positive", c.MaxLines)
	case c.TargetLines < 1 || c.TargetLines > c.MaxLines:
		return fmt.Errorf("docstore: TargetLines %d must be between 1 and MaxLines (%d)", c.TargetLines, c.MaxLines)
	case c.BackupsKeep < 1:
		return fmt.Errorf("docstore: BackupsKeep %d must be positive", c.BackupsKeep)
	case c.Now == nil:
		return errors.New("docstore: Now is required")
	}
	return nil
}

// Store is the Markdown memory of every namespace, with all of its semantics
// (routing, idempotent appends, capacity, backups, policy snapshots) implemented
// once over any Backend.
type Store struct {
	cfg    Config
	b      Backend
	logger *zap.Logger
}

// New returns a Store over b.
func New(cfg Config, b Backend, logger *zap.Logger) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("docstore: nil Backend")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Store{cfg: cfg, b: b, logger: logger.Named("docstore")}, nil
}

// AppendResult says what AppendEntries did.
type AppendResult struct {
	// Appended counts the entries written, by file name.
	Appended map[string]int
	// Skipped counts entries already present in their file (or twice in the call).
	Skipped int
	// Dropped counts old entries removed from MEMORY.md by the capacity bound.
	Dropped int
}

// DailyNote is one day's note.
type DailyNote struct {
	Day     time.Time // midnight UTC
	Name    string    // YYYYMM/YYYYMMDD.md
	Content string
}

// Head returns the first n lines of MEMORY.md, AutoLoadLines when n <= 0 (SPEC A2).
// A missing file gives "" and no error.
func (s *Store) Head(ctx context.Context, ns Namespace, n int) (string, error) {
	if n <= 0 {
		n = s.cfg.AutoLoadLines
	}
	doc, _, err := s.read(ctx, ns, MemoryFile)
	if err != nil {
		return "", err
	}
	return markdown.Head(doc, n), nil
}

// ReadFile returns a file of the namespace; a missing one is an error wrapping
// ErrNotFound.
func (s *Store) ReadFile(ctx context.Context, ns Namespace, name string) ([]byte, error) {
	if err := checkName(ns, name); err != nil {
		return nil, err
	}
	return s.b.Read(ctx, ns, name)
}

// ReadFileIfChanged is ReadFile for a reader that keeps what it read: data is
// returned only when the file no longer holds the content of version since (see
// Backend.ReadIfChanged).
func (s *Store) ReadFileIfChanged(ctx context.Context, ns Namespace, name string, since Version) ([]byte, Version, bool, error) {
	if err := checkName(ns, name); err != nil {
		return nil, Version{}, false, err
	}
	return s.b.ReadIfChanged(ctx, ns, name, since)
}

// Files lists every file of the namespace, sorted.
func (s *Store) Files(ctx context.Context, ns Namespace) ([]string, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	return s.b.List(ctx, ns, "")
}

// AppendEntries appends entries to the files their categories route to (SPEC A4):
// file_pattern to file_patterns.md, user_pref to user_prefs.md, the rest to
// MEMORY.md, in one atomic update per file. An entry identical to one already in
// its file is skipped, so a redelivered event adds nothing. MEMORY.md is then held
// to its capacity (SPEC A7) within the same update.
func (s *Store) AppendEntries(ctx context.Context, ns Namespace, entries []markdown.Entry) (AppendResult, error) {
	res := AppendResult{Appended: make(map[string]int)}
	if err := ns.Validate(); err != nil {
		return res, err
	}
	byFile := make(map[string][]markdown.Entry)
	for i, e := range entries {
		if err := checkEntry(e); err != nil {
			return res, fmt.Errorf("entry %d: %w", i, err)
		}
		file := RouteCategory(e.Category)
		byFile[file] = append(byFile[file], e)
	}
	for _, file := range []string{MemoryFile, FilePatternsFile, UserPrefsFile} {
		if len(byFile[file]) == 0 {
			continue
		}
		var (
			appended, skipped int
			perrs             []markdown.ParseError
		)
		err := s.b.Update(ctx, ns, file, func(old []byte, _ bool) ([]byte, error) {
			var doc string
			doc, appended, skipped, perrs = appendNew(string(old), byFile[file])
			if appended == 0 {
				return nil, errUnchanged
			}
			return []byte(doc), nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return res, s.failed(ns, file, fmt.Errorf("docstore: append to %s: %w", file, err))
		}
		if appended > 0 {
			res.Appended[file] = appended
		}
		res.Skipped += skipped
		s.LogParseErrors(ns, file, perrs)
		s.logger.Debug("appended entries", nsFields(ns, file, zap.Int("appended", appended), zap.Int("skipped", skipped))...)
		if file == MemoryFile && appended > 0 {
			dropped, err := s.EnforceCapacity(ctx, ns)
			res.Dropped += dropped
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// RouteCategory is the file an entry of category c goes to (SPEC A4).
func RouteCategory(c markdown.Category) string {
	switch c {
	case markdown.CategoryFilePattern:
		return FilePatternsFile
	case markdown.CategoryUserPref:
		return UserPrefsFile
	default:
		return MemoryFile
	}
}

// checkEntry rejects an entry that would not parse back as itself: it would be
// invisible to readers and to the duplicate check.
func checkEntry(e markdown.Entry) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidContent, err)
	}
	if strings.TrimSpace(e.Content) == "" {
		return fmt.Errorf("%w: entry [%s] has no content", ErrInvalidContent, e.Category)
	}
	return nil
}

// LogParseErrors logs the malformed entries markdown.ParseEntries skipped in a
// file (SPEC A6): they are kept in the file but invisible to the duplicate check,
// the compressor and readers of entries, which someone editing it should know.
func (s *Store) LogParseErrors(ns Namespace, file string, perrs []markdown.ParseError) {
	for _, pe := range perrs {
		s.logger.Warn("malformed entry skipped", nsFields(ns, file, zap.Int("line", pe.Line), zap.String("reason", pe.Reason))...)
	}
}

// appendNew appends to doc the entries not already in it, in order.
func appendNew(doc string, entries []markdown.Entry) (string, int, int, []markdown.ParseError) {
	present, perrs := markdown.ParseEntries(doc)
	seen := make(map[string]bool, len(present)+len(entries))
	for _, e := range present {
		seen[markdown.FormatEntry(e)] = true
	}
	var fresh []markdown.Entry
	for _, e := range entries {
		key := markdown.FormatEntry(e)
		if seen[key] {
			continue
		}
		seen[key] = true
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		return doc, 0, len(entries), perrs
	}
	return markdown.AppendBlock(doc, markdown.FormatEntries(fresh)), len(fresh), len(entries) - len(fresh), perrs
}

// AppendLongTerm appends "## YYYY-MM-DD" and content to MEMORY.md (SPEC A9); it
// never rewrites what is there.
// Like every append to MEMORY.md, it is followed by the capacity bound (SPEC A7).
func (s *Store) AppendLongTerm(ctx context.Context, ns Namespace, content string) error {
	block := markdown.FormatLongTerm(s.now(ctx), content)
	if err := s.appendBlock(ctx, ns, MemoryFile, content, block); err != nil {
		return err
	}
	_, err := s.EnforceCapacity(ctx, ns)
	return err
}

// AppendToday appends content to today's daily note (SPEC A9) and returns its name.
func (s *Store) AppendToday(ctx context.Context, ns Namespace, content string) (string, error) {
	now := s.now(ctx)
	name := markdown.DailyNoteName(now)
	return name, s.appendBlock(ctx, ns, name, content, markdown.FormatDailyNote(now, content))
}

func (s *Store) appendBlock(ctx context.Context, ns Namespace, name, content, block string) error {
	if err := checkName(ns, name); err != nil {
		return err
	}
	if strings.TrimSpace(content) == "" {
		return fmt.Errorf("%w: nothing to append to %s: content is empty", ErrInvalidContent, name)
	}
	err := s.b.Update(ctx, ns, name, func(old []byte, _ bool) ([]byte, error) {
		return []byte(markdown.AppendBlock(string(old), block)), nil
	})
	if err != nil {
		return s.failed(ns, name, fmt.Errorf("docstore: append to %s: %w", name, err))
	}
	return nil
}

// RecentDailyNotes returns the notes of the last days days, today included, newest
// first; days without a note are left out.
func (s *Store) RecentDailyNotes(ctx context.Context, ns Namespace, days int) ([]DailyNote, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	if days <= 0 {
		return nil, nil
	}
	now := s.now(ctx)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	oldest := today.AddDate(0, 0, -(days - 1))
	names, err := s.listNotes(ctx, ns, oldest, today)
	if err != nil {
		return nil, fmt.Errorf("docstore: list daily notes: %w", err)
	}
	var notes []DailyNote
	for _, name := range names {
		day, ok := markdown.ParseDailyNoteName(name)
		if !ok || day.Before(oldest) || day.After(today) {
			continue
		}
		data, err := s.b.Read(ctx, ns, name)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		notes = append(notes, DailyNote{Day: day, Name: name, Content: string(data)})
	}
	sort.Slice(notes, func(i, j int) bool { return notes[i].Day.After(notes[j].Day) })
	return notes, nil
}

// maxNoteMonths is the widest window, in month directories, that RecentDailyNotes
// lists month by month; a wider one lists the namespace once.
const maxNoteMonths = 2

// listNotes lists the files that may be daily notes of days from oldest to
// today: one listing instead of a read per day. A window of a month or two (the
// usual few days) lists just those YYYYMM directories rather than the whole
// namespace with its backups, which a context request would otherwise walk.
func (s *Store) listNotes(ctx context.Context, ns Namespace, oldest, today time.Time) ([]string, error) {
	first := time.Date(oldest.Year(), oldest.Month(), 1, 0, 0, 0, 0, time.UTC)
	var months []string
	for m := first; !m.After(today); m = m.AddDate(0, 1, 0) {
		months = append(months, m.Format("200601"))
	}
	if len(months) > maxNoteMonths {
		return s.b.List(ctx, ns, "")
	}
	var names []string
	for _, m := range months {
		l, err := s.b.List(ctx, ns, m)
		if err != nil {
			return nil, err
		}
		names = append(names, l...)
	}
	return names, nil
}

// Replace overwrites a Markdown file (MEMORY.md, a topic file or a daily note)
// atomically, without NUL or bidirectional controls (markdown.StripUnsafe), after a backup of its current content to
// backups/YYYYMMDD_HHMMSS_<base name> (SPEC A8). It returns the backup's name, ""
// when the file did not exist.
func (s *Store) Replace(ctx context.Context, ns Namespace, name string, content []byte) (string, error) {
	if err := checkName(ns, name); err != nil {
		return "", err
	}
	if !replaceable(name) {
		return "", fmt.Errorf("%w: %s cannot be replaced; only MEMORY.md, topic files and daily notes can", ErrInvalidPath, name)
	}
	backup, err := s.overwrite(ctx, ns, name, []byte(markdown.StripUnsafe(string(content))), func(t time.Time, seq int) string { return backupName(t, seq, name) }, nil)
	if err != nil {
		return backup, s.failed(ns, name, fmt.Errorf("docstore: replace %s: %w", name, err))
	}
	s.logger.Info("replaced file", nsFields(ns, name, zap.String("backup", backup))...)
	return backup, nil
}

// ReplaceIf is Replace only while the file still holds expect: a compare-and-set
// for a writer that computed content from expect (long-term compression, SPEC
// B4). When the file changed since, nothing is written and the error wraps
// ErrChanged; the caller reads again.
func (s *Store) ReplaceIf(ctx context.Context, ns Namespace, name string, expect, content []byte) (string, error) {
	if err := checkName(ns, name); err != nil {
		return "", err
	}
	if !replaceable(name) {
		return "", fmt.Errorf("%w: %s cannot be replaced; only MEMORY.md, topic files and daily notes can", ErrInvalidPath, name)
	}
	backup, err := s.overwriteWith(ctx, ns, name, func(cur []byte, exists bool) ([]byte, error) {
		if !exists || !bytes.Equal(cur, expect) {
			return nil, fmt.Errorf("%w: %s", ErrChanged, name)
		}
		return []byte(markdown.StripUnsafe(string(content))), nil
	}, func(t time.Time, seq int) string { return backupName(t, seq, name) }, nil)
	if errors.Is(err, ErrChanged) {
		return "", err
	}
	if err != nil {
		return backup, s.failed(ns, name, fmt.Errorf("docstore: replace %s: %w", name, err))
	}
	s.logger.Info("replaced file", nsFields(ns, name, zap.String("backup", backup))...)
	return backup, nil
}

// Backups lists the namespace's backups, oldest first.
func (s *Store) Backups(ctx context.Context, ns Namespace) ([]string, error) {
	return s.stamped(ctx, ns, BackupsDir, parseBackupName)
}

// Restore puts a backup's content back in place of the file it was taken of; the
// current content is backed up first. backup is a name from Backups, with or
// without the "backups/" prefix.
func (s *Store) Restore(ctx context.Context, ns Namespace, backup string) error {
	backup = inDir(BackupsDir, backup)
	if err := checkName(ns, backup); err != nil {
		return err
	}
	sn, ok := parseBackupName(backup)
	if !ok {
		return fmt.Errorf("%w: %s is not a backup", ErrInvalidPath, backup)
	}
	data, err := s.b.Read(ctx, ns, backup)
	if err != nil {
		return fmt.Errorf("docstore: restore %s: %w", backup, err)
	}
	if _, err := s.Replace(ctx, ns, sn.Target, data); err != nil {
		return err
	}
	s.logger.Info("restored backup", nsFields(ns, sn.Target, zap.String("from", backup))...)
	if sn.Target == MemoryFile {
		if _, err := s.EnforceCapacity(ctx, ns); err != nil {
			return err
		}
	}
	return nil
}

// EnforceCapacity cuts MEMORY.md to TargetLines when it exceeds MaxLines (SPEC A7)
// and returns how many entries were dropped. The cut is an overwrite: the content
// it replaces is backed up first (SPEC A8), and the replacement is a
// compare-and-set on that content, so an append that lands in between is kept
// (the cut is computed again over it).
func (s *Store) EnforceCapacity(ctx context.Context, ns Namespace) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	var dropped int
	backup, err := s.overwriteWith(ctx, ns, MemoryFile, func(cur []byte, exists bool) ([]byte, error) {
		var doc string
		doc, dropped = markdown.TrimToCapacity(string(cur), s.cfg.MaxLines, s.cfg.TargetLines)
		if !exists || dropped == 0 {
			return nil, errUnchanged
		}
		return []byte(doc), nil
	}, func(t time.Time, seq int) string { return backupName(t, seq, MemoryFile) }, nil)
	if errors.Is(err, errUnchanged) {
		return 0, nil
	}
	if err != nil {
		return 0, s.failed(ns, MemoryFile, fmt.Errorf("docstore: enforce capacity: %w", err))
	}
	s.logger.Info("capacity reached: dropped oldest entries", nsFields(ns, MemoryFile,
		zap.Int("dropped", dropped), zap.Int("max_lines", s.cfg.MaxLines), zap.Int("target_lines", s.cfg.TargetLines),
		zap.String("backup", backup))...)
	return dropped, nil
}

// PolicyOverrides returns policy_overrides.json; ok is false when there is none.
func (s *Store) PolicyOverrides(ctx context.Context, ns Namespace) ([]byte, bool, error) {
	doc, ok, err := s.read(ctx, ns, PolicyOverridesFile)
	if err != nil || !ok {
		return nil, false, err
	}
	return []byte(doc), true, nil
}

// SetPolicyOverrides writes policy_overrides.json after saving the current overrides
// ("{}" when there are none) to policy_snapshots/YYYYMMDD_HHMMSS.json (SPEC B5), and
// returns the snapshot's name. data must be a JSON object.
func (s *Store) SetPolicyOverrides(ctx context.Context, ns Namespace, data []byte) (string, error) {
	if err := ns.Validate(); err != nil {
		return "", err
	}
	if err := checkJSONObject(data); err != nil {
		return "", err
	}
	snapshot, err := s.overwrite(ctx, ns, PolicyOverridesFile, data, snapshotName, []byte("{}\n"))
	if err != nil {
		return snapshot, s.failed(ns, PolicyOverridesFile, fmt.Errorf("docstore: set policy overrides: %w", err))
	}
	s.logger.Info("policy overrides written", nsFields(ns, PolicyOverridesFile, zap.String("snapshot", snapshot))...)
	return snapshot, nil
}

// DeletePolicyOverrides removes policy_overrides.json, so the configured policy
// applies again (SPEC B1). The overrides are snapshotted first, so that this too
// can be rolled back.
func (s *Store) DeletePolicyOverrides(ctx context.Context, ns Namespace) error {
	cur, ok, err := s.PolicyOverrides(ctx, ns)
	if err != nil || !ok {
		return err
	}
	snapshot, err := s.createUnique(ctx, ns, snapshotName, cur)
	if err == nil {
		err = s.b.Delete(ctx, ns, PolicyOverridesFile)
	}
	if err != nil {
		return s.failed(ns, PolicyOverridesFile, fmt.Errorf("docstore: delete policy overrides: %w", err))
	}
	s.logger.Info("policy overrides deleted", nsFields(ns, PolicyOverridesFile, zap.String("snapshot", snapshot))...)
	return nil
}

// PolicySnapshots lists the namespace's policy snapshots, oldest first.
func (s *Store) PolicySnapshots(ctx context.Context, ns Namespace) ([]string, error) {
	return s.stamped(ctx, ns, PolicySnapshotsDir, parseSnapshotName)
}

// RestorePolicySnapshot makes a snapshot the current overrides (the rollback of
// SPEC B5); the current overrides are snapshotted first. name is a name from
// PolicySnapshots, with or without the "policy_snapshots/" prefix.
func (s *Store) RestorePolicySnapshot(ctx context.Context, ns Namespace, name string) error {
	_, err := s.RollbackPolicy(ctx, ns, name)
	return err
}

// RollbackPolicy is RestorePolicySnapshot returning the name of the snapshot
// taken of the overrides it replaced.
func (s *Store) RollbackPolicy(ctx context.Context, ns Namespace, name string) (string, error) {
	name = inDir(PolicySnapshotsDir, name)
	if err := checkName(ns, name); err != nil {
		return "", err
	}
	if !isSnapshot(name) {
		return "", fmt.Errorf("%w: %s is not a policy snapshot", ErrInvalidPath, name)
	}
	data, err := s.b.Read(ctx, ns, name)
	if err != nil {
		return "", fmt.Errorf("docstore: restore %s: %w", name, err)
	}
	snapshot, err := s.SetPolicyOverrides(ctx, ns, data)
	if err != nil {
		return "", fmt.Errorf("docstore: restore %s: %w", name, err)
	}
	return snapshot, nil
}

// InDir accepts a bare base name for a file that only lives in dir
// (BackupsDir, PolicySnapshotsDir) and returns its full name.
func InDir(dir, name string) string { return inDir(dir, name) }

// BackupTarget returns the file a backup (with or without "backups/") was
// taken of.
func (s *Store) BackupTarget(backup string) (string, error) {
	sn, ok := parseBackupName(inDir(BackupsDir, backup))
	if !ok {
		return "", fmt.Errorf("%w: %s is not a backup", ErrInvalidPath, backup)
	}
	return sn.Target, nil
}

// SnapshotTime returns the UTC second a policy snapshot was taken.
func (s *Store) SnapshotTime(name string) (time.Time, bool) {
	sn, ok := parseSnapshotName(inDir(PolicySnapshotsDir, name))
	return sn.Time, ok
}

// LastLongTermCompress returns the time stamped by SetLastLongTermCompress (SPEC
// B4); ok is false when there is none.
func (s *Store) LastLongTermCompress(ctx context.Context, ns Namespace) (time.Time, bool, error) {
	doc, ok, err := s.read(ctx, ns, LastCompressFile)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(doc))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: %s: %w", ErrInvalidContent, LastCompressFile, err)
	}
	return t, true, nil
}

// SetLastLongTermCompress stamps t into .last_longterm_compress.
func (s *Store) SetLastLongTermCompress(ctx context.Context, ns Namespace, t time.Time) error {
	if err := ns.Validate(); err != nil {
		return err
	}
	if err := s.b.Put(ctx, ns, LastCompressFile, []byte(t.UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return s.failed(ns, LastCompressFile, fmt.Errorf("docstore: stamp long-term compression: %w", err))
	}
	return nil
}

// overwrite replaces target with content after copying its current content to a
// fresh name from copyName (or ifMissing when target does not exist; nothing when
// that is nil too). If target changes between the copy and the replace, the copy
// would not hold what is overwritten, so the step repeats: the copy made last
// always holds exactly the content that was replaced.
func (s *Store) overwrite(ctx context.Context, ns Namespace, target string, content []byte,
	copyName func(time.Time, int) string, ifMissing []byte) (string, error) {
	return s.overwriteWith(ctx, ns, target, func([]byte, bool) ([]byte, error) { return content, nil }, copyName, ifMissing)
}

// overwriteWith is overwrite with the new content computed from the current one
// by next (called again whenever target changed meanwhile; an error from it,
// errUnchanged included, stops everything before any copy is made). A backup
// made under backups/ is followed by pruning the namespace's backups to
// BackupsKeep.
func (s *Store) overwriteWith(ctx context.Context, ns Namespace, target string, next func(cur []byte, exists bool) ([]byte, error),
	copyName func(time.Time, int) string, ifMissing []byte) (string, error) {
	for range maxOverwriteAttempts {
		cur, err := s.b.Read(ctx, ns, target)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return "", err
		}
		content, err := next(cur, exists)
		if err != nil {
			return "", err
		}
		copyData, doCopy := cur, exists
		if !exists && ifMissing != nil {
			copyData, doCopy = ifMissing, true
		}
		var copied string
		if doCopy {
			if copied, err = s.createUnique(ctx, ns, copyName, copyData); err != nil {
				return "", err
			}
			if strings.HasPrefix(copied, BackupsDir+"/") {
				s.pruneBackups(ctx, ns)
			}
		}
		err = s.b.Update(ctx, ns, target, func(old []byte, ok bool) ([]byte, error) {
			if ok != exists || !bytes.Equal(old, cur) {
				return nil, errStale
			}
			return content, nil
		})
		if !errors.Is(err, errStale) {
			return copied, err
		}
	}
	return "", fmt.Errorf("%w: %s changed during %d backup-and-replace attempts", ErrConflict, target, maxOverwriteAttempts)
}

// pruneBackups deletes the oldest backups beyond BackupsKeep. A failure is
// logged, not returned: the overwrite it follows is still safe (its own backup
// is the newest and is kept).
func (s *Store) pruneBackups(ctx context.Context, ns Namespace) {
	backups, err := s.Backups(ctx, ns)
	if err != nil {
		s.logger.Warn("listing backups to prune", nsFields(ns, BackupsDir, zap.Error(err))...)
		return
	}
	for _, name := range backups[:max(0, len(backups)-s.cfg.BackupsKeep)] {
		if err := s.b.Delete(ctx, ns, name); err != nil {
			s.logger.Warn("pruning a backup", nsFields(ns, name, zap.Error(err))...)
			continue
		}
		s.logger.Debug("pruned backup", nsFields(ns, name, zap.Int("keep", s.cfg.BackupsKeep))...)
	}
}

// createUnique writes data under the first name from nameFor(now, seq), seq = 0, 1,
// …, that does not exist yet; the existence check and the write are one atomic
// update, so concurrent writers never share a name.
func (s *Store) createUnique(ctx context.Context, ns Namespace, nameFor func(time.Time, int) string, data []byte) (string, error) {
	now := s.now(ctx)
	// Start after the copies already taken in this second, so that a new copy
	// always sorts after them even when an older one of the second was pruned.
	first := 0
	probe := nameFor(now, 0)
	dir, parse := BackupsDir, parseBackupName
	if strings.HasPrefix(probe, PolicySnapshotsDir+"/") {
		dir, parse = PolicySnapshotsDir, parseSnapshotName
	}
	if want, ok := parse(probe); ok {
		names, _ := s.b.List(ctx, ns, dir) // a failed listing only means starting at 0
		for _, name := range names {
			if sn, ok := parse(name); ok && sn.Time.Equal(want.Time) && sn.Target == want.Target && sn.Seq >= first {
				first = sn.Seq + 1
			}
		}
	}
	for seq := first; seq < first+maxStampSeq; seq++ {
		name := nameFor(now, seq)
		err := s.b.Update(ctx, ns, name, func(_ []byte, exists bool) ([]byte, error) {
			if exists {
				return nil, errExists
			}
			return data, nil
		})
		if !errors.Is(err, errExists) {
			return name, err
		}
	}
	return "", fmt.Errorf("%w: %d copies already taken at %s", ErrConflict, maxStampSeq, now.Format(stampLayout))
}

// stamped lists dir's backup or snapshot names, oldest first.
func (s *Store) stamped(ctx context.Context, ns Namespace, dir string, parse func(string) (stampedName, bool)) ([]string, error) {
	if err := ns.Validate(); err != nil {
		return nil, err
	}
	names, err := s.b.List(ctx, ns, dir)
	if err != nil {
		return nil, err
	}
	var parsed []stampedName
	for _, name := range names {
		if sn, ok := parse(name); ok {
			parsed = append(parsed, sn)
		}
	}
	sort.Slice(parsed, func(i, j int) bool {
		a, b := parsed[i], parsed[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.Name < b.Name
	})
	out := make([]string, len(parsed))
	for i, sn := range parsed {
		out[i] = sn.Name
	}
	return out, nil
}

// read returns a file's content; ok is false, with no error, when it is missing.
func (s *Store) read(ctx context.Context, ns Namespace, name string) (string, bool, error) {
	if err := checkName(ns, name); err != nil {
		return "", false, err
	}
	data, err := s.b.Read(ctx, ns, name)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(data), true, nil
}

// now is the configured clock, or the time of the write being applied (clock.At).
func (s *Store) now(ctx context.Context) time.Time { return clock.Now(ctx, s.cfg.Now).UTC() }

// failed logs a failed write once, here, and returns err for the caller to handle
// (SPEC A8: a write failure is logged and does not stop the worker).
func (s *Store) failed(ns Namespace, name string, err error) error {
	if !errors.Is(err, context.Canceled) {
		s.logger.Error("write failed", nsFields(ns, name, zap.Error(err))...)
	}
	return err
}

func nsFields(ns Namespace, name string, extra ...zap.Field) []zap.Field {
	return append([]zap.Field{obs.Tenant(ns.Tenant), obs.User(ns.User), zap.String("file", name)}, extra...)
}

func checkName(ns Namespace, name string) error {
	if err := ns.Validate(); err != nil {
		return err
	}
	return ValidateName(name)
}

// inDir accepts a bare base name for a file that only lives in dir.
func inDir(dir, name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return dir + "/" + name
}

func checkJSONObject(data []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("%w: policy overrides must be a JSON object: %w", ErrInvalidContent, err)
	}
	if obj == nil {
		return fmt.Errorf("%w: policy overrides must be a JSON object, not null", ErrInvalidContent)
	}
	return nil
}

// PutFile stores data as the file name of the layout as it is: no capacity
// rule, no format check beyond the name. It is the import of an exported
// namespace (agentmem import), which restores files byte for byte; a Markdown
// file it overwrites with other content is backed up first (SPEC A8). A
// positive offset writes data there instead, after the bytes before it, for a
// file imported in chunks in order (the first chunk took the backup).
func (s *Store) PutFile(ctx context.Context, ns Namespace, name string, offset int, data []byte) error {
	if err := checkName(ns, name); err != nil {
		return err
	}
	if offset == 0 {
		return s.putBackedUp(ctx, ns, name, data)
	}
	return s.b.Update(ctx, ns, name, func(old []byte, _ bool) ([]byte, error) {
		if len(old) < offset {
			return nil, fmt.Errorf("%w: chunk of %s at offset %d, but the file has %d bytes", ErrInvalidContent, name, offset, len(old))
		}
		return append(old[:offset:offset], data...), nil
	})
}

// Users lists the users of tenant that have files.
func (s *Store) Users(ctx context.Context, tenant string) ([]string, error) {
	return s.b.Users(ctx, tenant)
}

// Tenants lists the tenants that have files (the inspector lists them: a
// tenant brought in by import may have no events).
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	return s.b.Tenants(ctx)
}

// DeleteNamespace removes every file of ns, backups and policy files included,
// with nothing of them left in the backend (agentmem forget), and returns how
// many files it removed.
func (s *Store) DeleteNamespace(ctx context.Context, ns Namespace) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	n, err := s.b.DeleteNamespace(ctx, ns)
	if err == nil {
		s.logger.Info("deleted namespace", zap.String("tenant", ns.Tenant), zap.String("user", ns.User), zap.Int("files", n))
	}
	return n, err
}

// putBackedUp writes data as name; a Markdown file (MEMORY.md, a topic file,
// a daily note) holding other content is backed up first (SPEC A8).
func (s *Store) putBackedUp(ctx context.Context, ns Namespace, name string, data []byte) error {
	if !replaceable(name) {
		return s.b.Put(ctx, ns, name, data)
	}
	_, err := s.overwriteWith(ctx, ns, name, func(cur []byte, exists bool) ([]byte, error) {
		if exists && bytes.Equal(cur, data) {
			return nil, errUnchanged // imported twice: no backup of the same content
		}
		return data, nil
	}, func(t time.Time, seq int) string { return backupName(t, seq, name) }, nil)
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// ReplaceNamespace makes the files of ns in s those of ns in from (what a
// rebuild made aside, in its replay) in one swap: every file of from is read
// before anything is written; then they are written over s's (a Markdown file
// overwritten with other content backed up first, SPEC A8; the copied backups
// first, so that the new backups sort after them) and s's files that from does
// not have are deleted, except its backups. When a step fails, what was written
// and deleted is put back, so the namespace is left as it was, and the error
// says so (or, if putting back failed too, that it did not). It returns how
// many files it copied.
func (s *Store) ReplaceNamespace(ctx context.Context, from *Store, ns Namespace) (int, error) {
	if err := ns.Validate(); err != nil {
		return 0, err
	}
	fresh, err := from.readAll(ctx, ns)
	if err != nil {
		return 0, err
	}
	old, err := s.readAll(ctx, ns)
	if err != nil {
		return 0, err
	}
	names := make([]string, 0, len(fresh))
	for name := range fresh {
		names = append(names, name)
	}
	markdownLast := func(name string) int {
		if replaceable(name) {
			return 1
		}
		return 0
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(markdownLast(a), markdownLast(b)), strings.Compare(a, b))
	})
	var touched []string // in the order written or deleted
	swap := func() error {
		for _, name := range names {
			touched = append(touched, name)
			if err := s.putBackedUp(ctx, ns, name, fresh[name]); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
		for name := range old {
			if _, keep := fresh[name]; keep || strings.HasPrefix(name, BackupsDir+"/") {
				continue
			}
			touched = append(touched, name)
			if err := s.b.Delete(ctx, ns, name); err != nil {
				return fmt.Errorf("drop %s: %w", name, err)
			}
		}
		return nil
	}
	if err := swap(); err != nil {
		err = fmt.Errorf("docstore: replace %s/%s: %w", ns.Tenant, ns.User, err)
		if rerr := s.putBack(ctx, ns, old, touched); rerr != nil {
			return 0, s.failed(ns, "", fmt.Errorf("%w; putting the namespace back failed too, it is half replaced: %w", err, rerr))
		}
		return 0, s.failed(ns, "", fmt.Errorf("%w; the namespace is as it was", err))
	}
	return len(fresh), nil
}

// readAll reads every file of ns.
func (s *Store) readAll(ctx context.Context, ns Namespace) (map[string][]byte, error) {
	names, err := s.b.List(ctx, ns, "")
	if err != nil {
		return nil, fmt.Errorf("docstore: list %s/%s: %w", ns.Tenant, ns.User, err)
	}
	files := make(map[string][]byte, len(names))
	for _, name := range names {
		if files[name], err = s.b.Read(ctx, ns, name); err != nil {
			return nil, fmt.Errorf("docstore: read %s: %w", name, err)
		}
	}
	return files, nil
}

// putBack undoes a failed ReplaceNamespace: each touched file gets its old
// content again, or is deleted when it had none. The backups taken stay.
func (s *Store) putBack(ctx context.Context, ns Namespace, old map[string][]byte, touched []string) error {
	var errs []error
	for _, name := range slices.Backward(touched) {
		var err error
		if data, ok := old[name]; ok {
			err = s.b.Put(ctx, ns, name, data)
		} else {
			err = s.b.Delete(ctx, ns, name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
