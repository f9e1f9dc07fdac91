package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentmem/agentmem/pkg/vectorstore"
)

// errSlowPath makes decodeMetadata hand a document to encoding/json.
var errSlowPath = errors.New("vectorstore: metadata needs encoding/json")

// maxFastDepth bounds the fast decoder's and encoder's recursion; deeper documents
// (none that the services write) take encoding/json's path, which has its own limit.
const maxFastDepth = 64

// encodeMetadata is md, record id's metadata, as stored: its JSON as json.Marshal
// writes it, "" for a nil map (stored as JSON null).
//
// Why not json.Marshal alone: it reflects over every value and sorts every map's
// keys through reflect.Value, ~5 µs of the ~130 µs of CPU an ingested observation
// costs (agentmem bench's ingest profile). appendJSON writes the values metadata
// holds (what JSON decodes to, and what the pipeline builds) directly; any other
// value sends the whole map to json.Marshal, so the bytes are always encoding/json's.
func encodeMetadata(id string, md map[string]any) (string, error) {
	if md == nil {
		return "", nil
	}
	if b, ok := appendJSON(make([]byte, 0, 512), md, 0); ok {
		return string(b), nil
	}
	b, err := json.Marshal(md)
	if err != nil {
		return "", fmt.Errorf("%w: record %s: metadata is not JSON: %w", vectorstore.ErrInvalidRecord, id, err)
	}
	return string(b), nil
}

// appendJSON appends v as json.Marshal writes it; ok is false, and b unusable,
// for a value of another type, a NaN or an infinity, or nesting deeper than
// maxFastDepth.
func appendJSON(b []byte, v any, depth int) (_ []byte, ok bool) {
	if depth > maxFastDepth {
		return b, false
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case float64:
		return appendJSONFloat(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJSON(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendJSONString(b, k), ':')
			if b, ok = appendJSON(b, v[k], depth+1); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendJSONFloat appends f as encoding/json's float64 encoder does: the shortest
// decimal, in exponent form below 1e-6 and from 1e21 on, without a leading zero
// in a negative exponent; ok is false for NaN and the infinities.
func appendJSONFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}

// appendJSONString appends s quoted as json.Marshal quotes it: HTML-safe (<, >
// and & escaped), invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// checkMetadata reports whether stored, a row's metadata column, is what
// encodeMetadata writes: a JSON object, or null (returned as ""). A partition load
// checks it so that a damaged row fails the load, as it did when loads decoded
// every row, rather than the reads of that record.
func checkMetadata(stored string) (string, error) {
	if stored == "null" {
		return "", nil
	}
	if stored == "" || stored[0] != '{' || !json.Valid([]byte(stored)) {
		return "", errors.New("not a JSON object")
	}
	return stored, nil
}

// decodeMetadata returns meta (encodeMetadata's output) as json.Unmarshal into a
// map[string]any gives it, nil for "".
//
// Why not json.Unmarshal alone: a context request decodes the metadata of every
// record its searches return, and encoding/json (a validating scan, then a
// reflective decode, then a copy of every string) was most of a search's CPU. The
// fast path walks the document once, and every string without escapes is a
// substring of meta rather than a copy (meta is immutable, so sharing is safe). It
// handles what json.Marshal writes; anything else it is unsure of (a \u escape of
// a surrogate, invalid UTF-8, a control byte, malformed input, deep nesting) sends
// the whole document to json.Unmarshal, so the result is always encoding/json's.
func decodeMetadata(meta string) (map[string]any, error) {
	if meta == "" {
		return nil, nil
	}
	d := decoders.Get().(*fastDecoder)
	d.s, d.i = meta, 0
	d.skipSpace()
	v, err := d.value(0)
	d.skipSpace()
	whole := err == nil && d.i == len(d.s)
	// Drop the references into the decoded value before the decoder is reused.
	clear(d.members[:cap(d.members)])
	clear(d.elems[:cap(d.elems)])
	d.s, d.members, d.elems = "", d.members[:0], d.elems[:0]
	decoders.Put(d)
	if m, ok := v.(map[string]any); ok && whole {
		return m, nil
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(meta), &md); err != nil {
		return nil, err
	}
	return md, nil
}

// fastDecoder is decodeMetadata's single pass over s.
type fastDecoder struct {
	s       string
	i       int
	members []member // of the objects being decoded, innermost last
	elems   []any    // of the arrays being decoded, innermost last
}

// decoders keeps fastDecoders with their stacks grown, for the next decode.
var decoders = sync.Pool{New: func() any { return new(fastDecoder) }}

type member struct {
	key   string
	value any
}

func (d *fastDecoder) skipSpace() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value decodes the value at d.i, which is not space.
func (d *fastDecoder) value(depth int) (any, error) {
	if d.i >= len(d.s) || depth > maxFastDepth {
		return nil, errSlowPath
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	for _, lit := range literals {
		if strings.HasPrefix(d.s[d.i:], lit.text) {
			d.i += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, errSlowPath
}

var literals = [...]struct {
	text string
	v    any
}{{"true", true}, {"false", false}, {"null", nil}}

// object decodes the object at d.i. Its members are gathered on d.members first,
// so that the map is made at its final size: growing it member by member was a
// third of a decode's allocations.
func (d *fastDecoder) object(depth int) (any, error) {
	base := len(d.members)
	defer func() { d.members = d.members[:base] }()
	d.i++ // {
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return make(map[string]any), nil
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, errSlowPath
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, errSlowPath
		}
		d.i++
		d.skipSpace()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.members = append(d.members, member{k, v})
		done, err := d.next('}')
		if err != nil {
			return nil, err
		}
		if done {
			m := make(map[string]any, len(d.members)-base)
			for _, kv := range d.members[base:] {
				m[kv.key] = kv.value // a repeated key: the last wins, as in encoding/json
			}
			return m, nil
		}
	}
}

// array decodes the array at d.i, gathering its elements on d.elems first for the
// same reason object gathers members.
func (d *fastDecoder) array(depth int) (any, error) {
	base := len(d.elems)
	defer func() { d.elems = d.elems[:base] }()
	d.i++ // [
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return make([]any, 0), nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.elems = append(d.elems, v)
		done, err := d.next(']')
		if err != nil {
			return nil, err
		}
		if done {
			return slices.Clone(d.elems[base:]), nil
		}
	}
}

// next consumes the ',' between members or elements (done false) or the closing
// byte (done true), and the space after it.
func (d *fastDecoder) next(closing byte) (done bool, err error) {
	d.skipSpace()
	if d.i >= len(d.s) {
		return false, errSlowPath
	}
	switch d.s[d.i] {
	case ',':
		d.i++
		d.skipSpace()
		return false, nil
	case closing:
		d.i++
		return true, nil
	}
	return false, errSlowPath
}

// str decodes the string at d.i (its opening quote).
func (d *fastDecoder) str() (string, error) {
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			raw := d.s[start:j]
			if !ascii && !utf8.ValidString(raw) {
				return "", errSlowPath // encoding/json replaces invalid bytes
			}
			return raw, nil
		case c == '\\':
			return d.escapedStr(start, j)
		case c < ' ':
			return "", errSlowPath
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", errSlowPath
}

// escapedStr decodes a string holding escapes, from start (after its opening
// quote) with the first escape at j; only these strings are copied.
func (d *fastDecoder) escapedStr(start, j int) (string, error) {
	b := []byte(d.s[start:j])
	for j < len(d.s) {
		c := d.s[j]
		switch {
		case c == '"':
			if !utf8.Valid(b) {
				return "", errSlowPath
			}
			d.i = j + 1
			return string(b), nil
		case c < ' ':
			return "", errSlowPath
		case c != '\\':
			b = append(b, c)
			j++
			continue
		}
		if j+1 >= len(d.s) {
			return "", errSlowPath
		}
		switch e := d.s[j+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if j+6 > len(d.s) {
				return "", errSlowPath
			}
			r, err := strconv.ParseUint(d.s[j+2:j+6], 16, 32)
			// Surrogates (pairs or not) are left to encoding/json's rules.
			if err != nil || r >= 0xD800 && r < 0xE000 {
				return "", errSlowPath
			}
			b = utf8.AppendRune(b, rune(r))
			j += 6
			continue
		default:
			return "", errSlowPath
		}
		j += 2
	}
	return "", errSlowPath
}

// number decodes a JSON number as encoding/json does into an interface: float64.
func (d *fastDecoder) number() (any, error) {
	start := d.i
	j := d.i
	if d.s[j] == '-' {
		j++
	}
	digits := func() int {
		n := 0
		for j < len(d.s) && d.s[j] >= '0' && d.s[j] <= '9' {
			j++
			n++
		}
		return n
	}
	// JSON forbids leading zeros, "1.", ".5" and a bare exponent.
	switch n := digits(); {
	case n == 0, n > 1 && d.s[j-n] == '0':
		return nil, errSlowPath
	}
	if j < len(d.s) && d.s[j] == '.' {
		j++
		if digits() == 0 {
			return nil, errSlowPath
		}
	}
	if j < len(d.s) && (d.s[j] == 'e' || d.s[j] == 'E') {
		j++
		if j < len(d.s) && (d.s[j] == '+' || d.s[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, errSlowPath
		}
	}
	f, err := strconv.ParseFloat(d.s[start:j], 64)
	if err != nil {
		return nil, errSlowPath // out of range: encoding/json reports it
	}
	d.i = j
	return f, nil
}
