package docstore

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/markdown"
)

// The fixed files and directories of a namespace (docs/architecture.md "Storage").
const (
	MemoryFile          = "MEMORY.md"
	FilePatternsFile    = "file_patterns.md"
	UserPrefsFile       = "user_prefs.md"
	PolicyOverridesFile = "policy_overrides.json"
	LastCompressFile    = ".last_longterm_compress"
	BackupsDir          = "backups"
	PolicySnapshotsDir  = "policy_snapshots"
)

// TopicFiles are the files loaded on demand (SPEC A5); the whitelist for topic reads.
var TopicFiles = []string{FilePatternsFile, UserPrefsFile}

// maxNameLength bounds a name well below every filesystem's and KV's limits.
const maxNameLength = 255

// stampLayout is the UTC timestamp that starts backup and snapshot names.
const stampLayout = "20060102_150405"

var (
	backupRe   = regexp.MustCompile(`^backups/(\d{8}_\d{6})(?:_([1-9]\d{0,8}))?_([A-Za-z0-9_.-]+)$`)
	snapshotRe = regexp.MustCompile(`^policy_snapshots/(\d{8}_\d{6})(?:_([1-9]\d{0,8}))?\.json$`)
)

// Validate checks both IDs with events.ValidateID; the error wraps ErrInvalidNamespace
// and events.ErrInvalidID.
func (ns Namespace) Validate() error {
	if err := events.ValidateID("tenant", ns.Tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidNamespace, err)
	}
	if err := events.ValidateID("user", ns.User); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidNamespace, err)
	}
	return nil
}

// ValidateName reports whether name is a file of the namespace layout: MEMORY.md, a
// topic file, a daily note YYYYMM/YYYYMMDD.md, a backup, a policy snapshot,
// policy_overrides.json or .last_longterm_compress. Anything else, and in particular
// anything that could leave the namespace directory, wraps ErrInvalidPath.
func ValidateName(name string) error {
	if err := validateRelPath(name); err != nil {
		return err
	}
	switch {
	case name == MemoryFile, name == FilePatternsFile, name == UserPrefsFile,
		name == PolicyOverridesFile, name == LastCompressFile,
		isDailyNote(name), isBackup(name), isSnapshot(name):
		return nil
	}
	return fmt.Errorf("%w: %q is not a file of the memory layout (MEMORY.md, %s, YYYYMM/YYYYMMDD.md, %s/…, %s/…, %s, %s)",
		ErrInvalidPath, name, strings.Join(TopicFiles, ", "), BackupsDir, PolicySnapshotsDir, PolicyOverridesFile, LastCompressFile)
}

// validateDir checks a List directory: "" (the namespace root) or a relative path.
func validateDir(dir string) error {
	if dir == "" {
		return nil
	}
	return validateRelPath(dir)
}

// validateRelPath checks the syntax every name and directory shares: relative,
// slash-separated, elements of [A-Za-z0-9_.-] that are neither "." nor "..".
func validateRelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty name", ErrInvalidPath)
	case len(p) > maxNameLength:
		return fmt.Errorf("%w: name is %d bytes long, at most %d are allowed", ErrInvalidPath, len(p), maxNameLength)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: %q is absolute; names are relative to the namespace directory", ErrInvalidPath, p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return fmt.Errorf("%w: %q has an empty, \".\" or \"..\" element", ErrInvalidPath, p)
		}
		for _, c := range elem { // by rune: a bad character is named as written
			if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' {
				continue
			}
			return fmt.Errorf("%w: %q has character %q; only A-Z, a-z, 0-9, '_', '.', '-' and '/' between elements are allowed", ErrInvalidPath, p, c)
		}
	}
	return nil
}

func isDailyNote(name string) bool {
	_, ok := markdown.ParseDailyNoteName(name)
	return ok
}

// replaceable reports whether Replace may overwrite name: the Markdown documents,
// whose base names are also what backup names end with.
func replaceable(name string) bool {
	return name == MemoryFile || name == FilePatternsFile || name == UserPrefsFile || isDailyNote(name)
}

// backupTarget maps the base name at the end of a backup name back to the file it
// was taken of.
func backupTarget(base string) (string, bool) {
	if base == MemoryFile || base == FilePatternsFile || base == UserPrefsFile {
		return base, true
	}
	day, err := time.Parse("20060102.md", base)
	if err != nil {
		return "", false
	}
	return markdown.DailyNoteName(day), true
}

// backupName is backups/<stamp>[_<seq>]_<base name of target>; seq 0 is left out.
func backupName(t time.Time, seq int, target string) string {
	return BackupsDir + "/" + stamp(t, seq) + "_" + target[strings.LastIndexByte(target, '/')+1:]
}

// snapshotName is policy_snapshots/<stamp>[_<seq>].json.
func snapshotName(t time.Time, seq int) string {
	return PolicySnapshotsDir + "/" + stamp(t, seq) + ".json"
}

func stamp(t time.Time, seq int) string {
	s := t.UTC().Format(stampLayout)
	if seq > 0 {
		s += "_" + strconv.Itoa(seq)
	}
	return s
}

// stampedName is a parsed backup or snapshot name; they sort by (Time, Seq).
type stampedName struct {
	Name   string
	Time   time.Time
	Seq    int
	Target string // the file a backup was taken of; empty for snapshots
}

func parseStamp(re *regexp.Regexp, name string) (stampedName, []string, bool) {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return stampedName{}, nil, false
	}
	t, err := time.Parse(stampLayout, m[1])
	if err != nil {
		return stampedName{}, nil, false
	}
	seq := 0
	if m[2] != "" {
		if seq, err = strconv.Atoi(m[2]); err != nil {
			return stampedName{}, nil, false
		}
	}
	return stampedName{Name: name, Time: t, Seq: seq}, m, true
}

func parseBackupName(name string) (stampedName, bool) {
	sn, m, ok := parseStamp(backupRe, name)
	if !ok {
		return stampedName{}, false
	}
	if sn.Target, ok = backupTarget(m[3]); !ok {
		return stampedName{}, false
	}
	// Only canonical spellings count, so every backup has exactly one name.
	return sn, backupName(sn.Time, sn.Seq, sn.Target) == name
}

func parseSnapshotName(name string) (stampedName, bool) {
	sn, _, ok := parseStamp(snapshotRe, name)
	return sn, ok && snapshotName(sn.Time, sn.Seq) == name
}

func isBackup(name string) bool {
	_, ok := parseBackupName(name)
	return ok
}

func isSnapshot(name string) bool {
	_, ok := parseSnapshotName(name)
	return ok
}
