package vectorstore_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

func TestDeterministicID(t *testing.T) {
	a := vectorstore.DeterministicID("acme", "u1", "event-1")
	if a != vectorstore.DeterministicID("acme", "u1", "event-1") {
		t.Fatal("not deterministic")
	}
	for _, other := range [][]string{{"acme", "u1", "event-2"}, {"acme", "u1event-1"}, {"acm", "eu1", "event-1"}, {"acme", "u1", "event-1", ""}} {
		if vectorstore.DeterministicID(other...) == a {
			t.Errorf("%q collides with (acme, u1, event-1)", other)
		}
	}
	if _, err := vectorstore.CanonicalID(a); err != nil {
		t.Fatalf("not a UUID: %v", err)
	}
	if a[14] != '5' {
		t.Errorf("%s is not a version 5 UUID", a)
	}
}

// TimeOrderedID is deterministic, canonical, a version 8 UUID of the RFC 9562
// variant, keeps DeterministicID's distinctness of part lists, and sorts by its
// time's millisecond, as bytes and as a string.
func TestTimeOrderedID(t *testing.T) {
	// From before 1970 to past the 48 bits, both clamped.
	genTime := rapid.Custom(func(t *rapid.T) time.Time {
		return time.UnixMilli(rapid.Int64Range(-1<<40, 1<<49).Draw(t, "ms")).Add(time.Duration(rapid.IntRange(0, 999_999).Draw(t, "ns")))
	})
	genParts := rapid.SliceOfN(rapid.String(), 1, 4)
	clampMS := func(t time.Time) int64 { return min(max(t.UnixMilli(), 0), 1<<48-1) }
	rapid.Check(t, func(rt *rapid.T) {
		t1, t2 := genTime.Draw(rt, "t1"), genTime.Draw(rt, "t2")
		p1, p2 := genParts.Draw(rt, "p1"), genParts.Draw(rt, "p2")
		id1, id2 := vectorstore.TimeOrderedID(t1, p1...), vectorstore.TimeOrderedID(t2, p2...)
		if again := vectorstore.TimeOrderedID(t1, p1...); again != id1 {
			rt.Fatalf("TimeOrderedID(%v, %q) gave %s, then %s", t1, p1, id1, again)
		}
		canon, err := vectorstore.CanonicalID(id1)
		if err != nil || canon != id1 {
			rt.Fatalf("%s is not a canonical UUID (%q, %v)", id1, canon, err)
		}
		u1, u2 := uuid.MustParse(id1), uuid.MustParse(id2)
		if u1.Version() != 8 || u1.Variant() != uuid.RFC4122 {
			rt.Fatalf("%s: version %d, variant %v; want 8, RFC 4122", id1, u1.Version(), u1.Variant())
		}
		switch ms1, ms2 := clampMS(t1), clampMS(t2); {
		case ms1 < ms2:
			if bytes.Compare(u1[:], u2[:]) >= 0 || id1 >= id2 {
				rt.Fatalf("%s (ms %d) does not sort before %s (ms %d)", id1, ms1, id2, ms2)
			}
		case ms1 == ms2:
			if (vectorstore.DeterministicID(p1...) == vectorstore.DeterministicID(p2...)) != (id1 == id2) {
				rt.Fatalf("parts %q and %q in the same millisecond: ids %s and %s", p1, p2, id1, id2)
			}
		}
	})
}

// TestCanonicalIDMatchesUUID pins CanonicalID to uuid.Parse then String, its
// fast path for ids already canonical included: every form uuid.Parse accepts
// (upper case, braces, urn:uuid:, no dashes) and near-misses of the canonical one.
func TestCanonicalIDMatchesUUID(t *testing.T) {
	genID := rapid.Custom(func(t *rapid.T) string {
		b := []byte(uuid.UUID(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")).String())
		// Change up to three bytes to characters around the canonical alphabet.
		for range rapid.IntRange(0, 3).Draw(t, "changes") {
			b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom([]byte("09afgAFG-{}:/ ")).Draw(t, "c")
		}
		s := string(b)
		switch rapid.IntRange(0, 4).Draw(t, "form") {
		case 1:
			s = strings.ToUpper(s)
		case 2:
			s = "{" + s + "}"
		case 3:
			s = "urn:uuid:" + s
		case 4:
			s = strings.ReplaceAll(s, "-", "")
		}
		return s
	})
	rapid.Check(t, func(rt *rapid.T) {
		id := genID.Draw(rt, "id")
		got, err := vectorstore.CanonicalID(id)
		u, uerr := uuid.Parse(id)
		switch {
		case (err != nil) != (uerr != nil):
			rt.Fatalf("CanonicalID(%q) error %v, uuid.Parse error %v", id, err, uerr)
		case err == nil && got != u.String():
			rt.Fatalf("CanonicalID(%q) = %q, want %q", id, got, u.String())
		}
	})
}
