package extract

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// listVerb is what may stand between "columns" and the list: group 1 a verb, group
// 2 a colon.
const listVerb = `(\s+(?:(?:are|is|were)(?:\s+(?:named|called))?|include|includes|including|named|called|like|such as))?\s*([:=])?\s*`

// typeWords are the column types the rules recognise (singular or plural).
const typeWords = `dates?|datetimes?|timestamps?|times?|ints?|integers?|numeric|numbers?|floats?|decimals?|doubles?|strings?|text|booleans?|bools?|currency|percentages?|percents?|categorical|category|categories`

var (
	fileNameRe = regexp.MustCompile(`(?i)\b[a-z0-9_][a-z0-9_\-]*(?:\.[a-z0-9_\-]+)*\.(?:csv|tsv|xlsx|xls|json|parquet)\b`)
	// subjectRe finds "my sales files", "the orders table", "this data".
	subjectRe = regexp.MustCompile(`(?i)\b(?:my|our|the|this|that|these|those|his|her|their)\s+((?:[a-z0-9_\-]+\s+){0,2}?)(files?|spreadsheets?|tables?|workbooks?|datasets?|exports?|csvs?|data)\b`)

	columnsRe = regexp.MustCompile(`(?i)\b(?:column names|column headers|columns?|fields|headers?)\b` + listVerb)
	sheetsRe  = regexp.MustCompile(`(?i)\b(?:sheets|tabs|worksheets)\b` + listVerb)
	// sheetNamedRe: "a sheet called Summary", "the tab named 'Q1 2024'".
	sheetNamedRe = regexp.MustCompile(`(?i)\b(?:sheet|tab|worksheet)\s+(?:named|called)\s+(?:"([^"]{1,40})"|'([^']{1,40})'|“([^”]{1,40})”|([\p{L}\p{N}_\-]+))`)
	// sheetBeforeRe: "the 'Q1 2024' sheet", "the Summary tab" (a capitalised name).
	sheetBeforeRe = regexp.MustCompile(`(?:"([^"]{1,40})"|'([^']{1,40})'|“([^”]{1,40})”|\b([A-Z][\p{L}\p{N}_\-]*))\s+(?:sheet|tab|worksheet)\b`)

	// listEndRe ends a column or sheet list: punctuation, or a word that starts a new clause.
	listEndRe   = regexp.MustCompile(`(?i)[;!?\n]|\.(?:\s|$)|\s[-–—]\s|\s(?:with|which|that|where|but|so|about|around|approximately|roughly|containing|totaling|totalling|having|has|have|for|in|on|from|per|each|plus|then|when|while|because|if|to|into|should|must|will|can)\b`)
	itemSplitRe = regexp.MustCompile(`(?i)\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+`)
	itemTypeRe  = regexp.MustCompile(`(?i)^(.+?)\s*\(\s*(` + typeWords + `)\s*\)$`)
	itemWordRe  = regexp.MustCompile(`^[\p{L}\p{N}_\-/%#.$€£]+$`)

	// typeStmtRe: "amount is numeric", "qty is an integer", "the column code is text".
	typeStmtRe = regexp.MustCompile(`(?i)\b(?:(column)\s+)?["'` + "`" + `]?([\p{L}\p{N}_\-]+)["'` + "`" + `]?\s+(?:(column)\s+)?(?:is|are|should be|will be|contains|holds)\s+(?:(?:a|an|in|of type|stored as|formatted as)\s+)?(` + typeWords + `)\b`)
	// parenTypeRe: "qty (int)" outside a column list.
	parenTypeRe = regexp.MustCompile(`(?i)([\p{L}\p{N}_\-]+)\s*\(\s*(` + typeWords + `)\s*\)`)

	rowsRe = regexp.MustCompile(`(?i)(?:\b(about|around|approximately|approx\.?|roughly|nearly|almost|over|more than|less than|under|at least|up to)\s+|(~)\s*)?\b(\d{1,3}(?:[,_]\d{3})+|\d+(?:\.\d+)?)\s*(k|m|thousand|million)?\s+(?:rows|records|lines)\b`)
	// shapeRe reads pandas' "shape: (5000, 5)" and "RangeIndex: 5000 entries".
	shapeRe = regexp.MustCompile(`(?i)\bshape\b\s*[:=]?\s*\(\s*(\d+)\s*,\s*\d+\s*\)|\bRangeIndex:\s*(\d+)\s+entries\b`)
	// wordBeforeRe finds the word right before a row count.
	wordBeforeRe = regexp.MustCompile(`([\p{L}]+)\W*$`)
)

// genericModifiers make a phrase point back at the file in discussion ("the same
// file", "the uploaded data") instead of naming a new one.
var genericModifiers = setOf("same", "first", "second", "third", "last", "other", "new", "old", "whole",
	"entire", "attached", "uploaded", "above", "following", "previous", "original", "current", "next",
	"exported", "excel", "csv", "one", "two", "big", "large", "small", "raw", "input", "output",
	"source", "main", "final", "latest", "my", "your")

// nonModifiers are words that cannot be part of a file's name: "the list of files"
// is not a subject.
var nonModifiers = setOf("of", "in", "on", "for", "with", "and", "or", "to", "from", "at", "by", "is",
	"are", "was", "a", "an", "the", "all", "some", "any", "no", "as", "if", "it", "i", "you")

// itemStop are words no column or sheet name starts with; a list ends at one.
var itemStop = setOf("the", "a", "an", "it", "this", "that", "these", "those", "which", "some", "all",
	"any", "my", "your", "our", "their", "its", "to", "of", "i", "you", "we", "they", "is", "are",
	"was", "were", "be", "and", "or", "but", "not", "no", "there", "here", "what", "how", "why",
	"when", "about", "around", "approximately", "roughly", "etc", "like", "so", "then", "only", "just",
	"also", "more", "other", "others", "many", "several", "few", "each", "every", "both", "as", "at",
	"by", "if", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

// rowCountExcluded are words before a number of rows that make it not a count of the
// file's rows ("the first 10 rows", "deleted 3 rows").
var rowCountExcluded = setOf("first", "top", "last", "bottom", "next", "previous", "delete", "deleted",
	"remove", "removed", "drop", "dropped", "skip", "skipped", "add", "added", "insert", "inserted",
	"duplicate", "duplicated", "empty", "blank", "missing", "show", "print", "display", "only",
	"sample", "header", "extra")

// sheetStop are capitalised words before "sheet" that are not sheet names.
var sheetStop = setOf("the", "this", "that", "each", "every", "one", "first", "last", "new", "another",
	"a", "an", "my", "your", "our", "excel", "google", "any", "which", "what", "same", "next", "other")

type subject struct{ key, display string }

type column struct{ name, typ string }

// fileFacts is what the session said about one file or table.
type fileFacts struct {
	display string
	columns []column
	rows    string
	sheets  []string
}

func (f *fileFacts) addColumn(name, typ string) {
	for i := range f.columns {
		if strings.EqualFold(f.columns[i].name, name) {
			if typ != "" {
				f.columns[i].typ = typ
			}
			return
		}
	}
	f.columns = append(f.columns, column{name: name, typ: typ})
}

// setType records the type of a column already known, and reports whether it was.
func (f *fileFacts) setType(name, typ string) bool {
	for i := range f.columns {
		if strings.EqualFold(f.columns[i].name, name) {
			f.columns[i].typ = typ
			return true
		}
	}
	return false
}

func (f *fileFacts) addSheet(name string) {
	for _, s := range f.sheets {
		if strings.EqualFold(s, name) {
			return
		}
	}
	f.sheets = append(f.sheets, name)
}

// content renders "sales.csv: columns date (date), product, qty; about 5000 rows; sheets Jan, Feb".
func (f *fileFacts) content() string {
	var parts []string
	if len(f.columns) > 0 {
		names := make([]string, len(f.columns))
		for i, c := range f.columns {
			names[i] = c.name
			if c.typ != "" {
				names[i] += " (" + c.typ + ")"
			}
		}
		parts = append(parts, "columns "+strings.Join(names, ", "))
	}
	if f.rows != "" {
		parts = append(parts, f.rows)
	}
	if len(f.sheets) > 0 {
		parts = append(parts, "sheets "+strings.Join(f.sheets, ", "))
	}
	if len(parts) == 0 {
		if fileNameRe.MatchString(f.display) {
			return f.display + ": a file the user works with, structure not stated"
		}
		return ""
	}
	return f.display + ": " + strings.Join(parts, "; ")
}

// mention is a subject named at a byte offset of a sentence.
type mention struct {
	pos  int
	subj subject
}

// fact is one structural fact found at a byte offset of a sentence.
type fact struct {
	pos   int
	apply func(*fileFacts)
}

// observeFiles records the file facts of one sentence of a user or tool message.
// A data file the user names is recorded even when the sentence says nothing of
// its structure (issue 29: "I saved it as customers_q3.parquet" left no trace of
// the file): its name is a pattern of the user's files. A tool's listing names
// files the user may never have looked at, so it records only their facts.
func (s *session) observeFiles(sent string, user bool) {
	mentions := s.subjects(sent)
	if user {
		for _, loc := range fileNameRe.FindAllStringIndex(sent, -1) {
			name := sent[loc[0]:loc[1]]
			s.fileFor(subject{key: strings.ToLower(name), display: name})
		}
	}
	for _, f := range fileFactsIn(sent) {
		f.apply(s.fileFor(s.resolve(mentions, f.pos)))
	}
	if len(mentions) > 0 {
		s.current = mentions[len(mentions)-1].subj
	}
}

// resolve picks the subject a fact at pos is about: the closest subject named
// before it in the sentence, else the first one after it, else the file in
// discussion, else a generic table.
func (s *session) resolve(mentions []mention, pos int) subject {
	var before, after *mention
	for i := range mentions {
		if mentions[i].pos <= pos {
			before = &mentions[i]
		} else if after == nil {
			after = &mentions[i]
		}
	}
	switch {
	case before != nil:
		return before.subj
	case after != nil:
		return after.subj
	case s.current.key != "":
		return s.current
	}
	return subject{key: "table", display: "table"}
}

func (s *session) fileFor(subj subject) *fileFacts {
	if f, ok := s.files[subj.key]; ok {
		return f
	}
	f := &fileFacts{display: subj.display}
	s.files[subj.key] = f
	s.slots = append(s.slots, slot{file: f})
	return f
}

// subjects finds the files and tables a sentence names, in order. A generic phrase
// ("the file", "this data") means the subject named last, in this sentence or before.
func (s *session) subjects(sent string) []mention {
	type found struct {
		mention
		generic bool
	}
	var all []found
	names := fileNameRe.FindAllStringIndex(sent, -1)
	for _, loc := range names {
		name := sent[loc[0]:loc[1]]
		all = append(all, found{mention: mention{pos: loc[0], subj: subject{key: strings.ToLower(name), display: name}}})
	}
phrases:
	for _, m := range subjectRe.FindAllStringSubmatchIndex(sent, -1) {
		for _, loc := range names {
			if m[0] < loc[1] && loc[0] < m[1] {
				continue phrases // "this data.csv" is the file, not a phrase
			}
		}
		mods := strings.Fields(strings.ToLower(sent[m[2]:m[3]]))
		generic := len(mods) == 0
		for _, w := range mods {
			if nonModifiers[w] {
				continue phrases
			}
			generic = generic || genericModifiers[w]
		}
		display := strings.Join(strings.Fields(sent[m[2]:m[5]]), " ")
		all = append(all, found{mention: mention{pos: m[0], subj: subject{key: subjectKey(display), display: display}}, generic: generic})
	}
	for _, o := range otherSubjects(sent) {
		all = append(all, found{mention: o.mention, generic: o.generic})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].pos < all[j].pos })
	out := make([]mention, len(all))
	last := s.current
	for i, f := range all {
		if f.generic && last.key != "" {
			f.subj = last
		}
		out[i], last = f.mention, f.subj
	}
	return out
}

// subjectKey makes "Sales files" and "sales file" the same subject.
func subjectKey(display string) string {
	k := strings.ToLower(display)
	if strings.HasSuffix(k, "s") && !strings.HasSuffix(k, "ss") {
		k = k[:len(k)-1]
	}
	return k
}

// fileFactsIn finds the structural facts of a sentence: column lists (with types in
// parentheses), sheet names, column types stated in words, and row counts.
func fileFactsIn(sent string) []fact {
	var out []fact
	for _, m := range columnsRe.FindAllStringSubmatchIndex(sent, -1) {
		items := parseList(sent[m[1]:], m[2] >= 0 || m[4] >= 0)
		if len(items) == 0 {
			continue
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
			for _, it := range items {
				f.addColumn(it.name, it.typ)
			}
		}})
	}
	for _, m := range sheetsRe.FindAllStringSubmatchIndex(sent, -1) {
		items := parseList(sent[m[1]:], m[2] >= 0 || m[4] >= 0)
		if len(items) == 0 {
			continue
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
			for _, it := range items {
				f.addSheet(it.name)
			}
		}})
	}
	for _, re := range []*regexp.Regexp{sheetNamedRe, sheetBeforeRe} {
		for _, m := range re.FindAllStringSubmatchIndex(sent, -1) {
			name := firstGroup(sent, m)
			if name == "" || sheetStop[strings.ToLower(name)] {
				continue
			}
			out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.addSheet(name) }})
		}
	}
	for _, m := range typeStmtRe.FindAllStringSubmatchIndex(sent, -1) {
		name, typ := sent[m[4]:m[5]], normaliseType(sent[m[8]:m[9]])
		explicit := m[2] >= 0 || m[6] >= 0
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
			if !f.setType(name, typ) && explicit && !itemStop[strings.ToLower(name)] {
				f.addColumn(name, typ)
			}
		}})
	}
	for _, m := range parenTypeRe.FindAllStringSubmatchIndex(sent, -1) {
		name, typ := sent[m[2]:m[3]], normaliseType(sent[m[4]:m[5]])
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.setType(name, typ) }})
	}
	for _, m := range rowsRe.FindAllStringSubmatchIndex(sent, -1) {
		qual := ""
		switch {
		case m[2] >= 0:
			qual = strings.ToLower(strings.TrimSuffix(sent[m[2]:m[3]], "."))
		case m[4] >= 0:
			qual = "about"
		default:
			if w := wordBeforeRe.FindStringSubmatch(tailOf(sent[:m[0]], maxWordBytes)); w != nil && rowCountExcluded[strings.ToLower(w[1])] {
				continue
			}
		}
		unit := ""
		if m[8] >= 0 {
			unit = sent[m[8]:m[9]]
		}
		n, ok := parseCount(sent[m[6]:m[7]], unit)
		if !ok {
			continue
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.rows = rowsText(qual, n) }})
	}
	for _, m := range shapeRe.FindAllStringSubmatchIndex(sent, -1) {
		digits := firstGroup(sent, m)
		n, ok := parseCount(digits, "")
		if !ok {
			continue
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.rows = rowsText("", n) }})
	}
	out = append(out, otherFactsIn(sent)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out
}

// firstGroup returns the first capture group that matched.
func firstGroup(s string, m []int) string {
	for i := 2; i+1 < len(m); i += 2 {
		if m[i] >= 0 {
			return strings.TrimSpace(s[m[i]:m[i+1]])
		}
	}
	return ""
}

func rowsText(qual string, n int64) string {
	if qual == "" {
		return fmt.Sprintf("%d rows", n)
	}
	return fmt.Sprintf("%s %d rows", qual, n)
}

// parseCount reads "5,000", "10" with unit "k", "1.5" with unit "million".
func parseCount(digits, unit string) (int64, bool) {
	f, err := strconv.ParseFloat(strings.NewReplacer(",", "", "_", "").Replace(digits), 64)
	if err != nil {
		return 0, false
	}
	switch strings.ToLower(unit) {
	case "k", "thousand":
		f *= 1e3
	case "m", "million":
		f *= 1e6
	}
	if f < 1 || f > 1e12 {
		return 0, false
	}
	return int64(math.Round(f)), true
}

func normaliseType(t string) string {
	t = strings.ToLower(t)
	if t == "categories" {
		return "category"
	}
	if strings.HasSuffix(t, "s") {
		return strings.TrimSuffix(t, "s")
	}
	return t
}

type listItem struct{ name, typ string }

// parseList reads a list of names at the start of text ("date, product and qty (int)")
// up to the end of its clause, stopping at the first item that does not look like
// a name. A single name only counts when introduced explicitly (a colon or a verb
// such as "named"): "the columns look wrong" lists nothing.
func parseList(text string, explicit bool) []listItem {
	return readList(text, explicit, itemSplitRe, listEndRe, nil)
}

// readList is parseList with the item separators, the list ends and further
// words no item starts with (stop) of a language.
func readList(text string, explicit bool, split, listEnd *regexp.Regexp, stop map[string]bool) []listItem {
	// Item by item, each looked for near the last: the list ends at its first
	// item that is not one, or at a list end, so only that much is read.
	text = headOf(text, maxListBytes)
	var items []listItem
	for text != "" {
		raw, rest := text, ""
		if loc := split.FindStringIndex(headOf(text, maxItemBytes)); loc != nil {
			raw, rest = text[:loc[0]], text[loc[1]:]
		} else {
			raw = headOf(text, maxItemBytes) // longer than any item: parseItem refuses it
		}
		end := false
		if loc := listEnd.FindStringIndex(raw); loc != nil {
			raw, end = raw[:loc[0]], true
		}
		it, ok := parseItem(raw)
		if !ok || stop[strings.ToLower(strings.Fields(it.name)[0])] {
			break
		}
		items = append(items, it)
		if end {
			break
		}
		text = rest
	}
	if len(items) == 1 && !explicit {
		return nil
	}
	return items
}

// A list is read from at most maxListBytes after its keyword, an item from at most
// maxItemBytes, and the word before a row count from the last maxWordBytes before
// it: with every match of a long sentence reading the rest of it, a 64 KiB message
// repeating "columns" took 13 s (quadratic). Real column lists are far shorter.
const (
	maxListBytes = 4 << 10
	maxItemBytes = 128 // an item is at most three words
	maxWordBytes = 64
)

// headOf is s cut to at most n bytes, at a rune boundary.
func headOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailOf is the last (at most) n bytes of s, from a rune boundary.
func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func parseItem(raw string) (listItem, bool) {
	raw = strings.Trim(strings.TrimSpace(raw), "[]{}'\"`“”‘’")
	var it listItem
	if m := itemTypeRe.FindStringSubmatch(raw); m != nil {
		raw, it.typ = m[1], normaliseType(m[2])
	}
	raw = strings.Trim(strings.TrimSpace(raw), "()[]{}'\"`“”‘’")
	words := strings.Fields(raw)
	if len(words) == 0 || len(words) > 3 {
		return it, false
	}
	// Single letters are spreadsheet columns ("columns a, b and c"), not articles.
	if itemStop[strings.ToLower(words[0])] && (len(words) > 1 || len(words[0]) > 1) {
		return it, false
	}
	for _, w := range words {
		if !itemWordRe.MatchString(w) {
			return it, false
		}
	}
	if _, err := strconv.ParseFloat(strings.ReplaceAll(raw, ",", ""), 64); err == nil || rowsRe.MatchString(raw) {
		return it, false
	}
	it.name = strings.Join(words, " ")
	return it, true
}

// Chinese and German file structures. Chinese has no spaces, so its rules find a
// keyword and read a list after a colon ("列：日期、门店、金额"); German lists read
// like English ones after their own keywords ("die Spalten Datum, Filiale und
// Betrag"). Types and row counts are written in English in the entry, so that an
// entry reads the same whatever the language it was said in.
var (
	// zhSubjectRe: "销售表", "库存文件", "预算工作簿"; trimmed by zhSubject.
	zhSubjectRe = regexp.MustCompile(`\p{Han}{0,8}?(?:工作簿|文件|表格|表)`)
	// deSubjectRe: "die Datei", "in der Lagerdatei", "meine Umsatztabelle".
	deSubjectRe = regexp.MustCompile(`(?i)\b(?:die|der|den|diese[rn]?|meine[rn]?|unsere[rn]?)\s+([\p{L}]*(?:datei|dateien|tabelle|tabellen|arbeitsmappe|mappe))\b`)

	zhColumnsRe = regexp.MustCompile(`(?:列名|表头|字段|列)(?:有|是|为|包括|包含|如下)?(?:这些|以下|下面)?(?:几列|字段)?\s*[：:]\s*`)
	zhSheetsRe  = regexp.MustCompile(`(?:工作表|sheet页|标签页)(?:有|是|为|包括|分别是)?\s*[：:]\s*`)
	zhItemSplit = regexp.MustCompile(`\s*(?:、|，|,|以及|和|及|与)\s*`)
	zhListEnd   = regexp.MustCompile(`[。；;！？!?\n]`)
	// zhItemTypeRe: "数量是整数", "盘点日期是日期类型".
	zhItemTypeRe = regexp.MustCompile(`^(.+?)\s*(?:是|为|：|:)\s*(文本|字符串|整数|数字|数值|小数|浮点数?|日期时间|日期|时间戳|时间|布尔值?|货币|金额|百分比)(?:类型|格式|型)?$`)
	zhRowsRe     = regexp.MustCompile(`(大约|约|大概|差不多|将近|接近|超过|不到)?\s*(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*(万|千)?\s*(?:行|条记录|条数据|条)`)
	zhRowsSkip   = regexp.MustCompile(`(?:前|后|第|删除了?|删掉了?|去掉了?|新增了?|添加了?)\s*$`)

	deColumnsRe = regexp.MustCompile(`(?i)\b(?:Spaltennamen|Spaltenköpfe|Spalten|Felder)\b(\s+(?:sind|heißen|lauten|namens|wie))?\s*([:=])?\s*`)
	deSheetsRe  = regexp.MustCompile(`(?i)\b(?:Tabellenblätter|Arbeitsblätter|Blätter|Reiter)\b(\s+(?:sind|heißen|lauten|namens))?\s*([:=])?\s*`)
	// deTypeRe: "die Spalte menge ist eine Ganzzahl", "Spalte datum ein Datum".
	deTypeRe    = regexp.MustCompile(`(?i)\bSpalte\s+["'„‚]?([\p{L}\p{N}_\-]+)["'“‘]?\s+(?:ist\s+|enthält\s+)?(?:ein\s+|eine\s+|vom\s+Typ\s+|als\s+)?(Ganzzahlen|Ganzzahl|Dezimalzahlen|Dezimalzahl|Kommazahl|Zahlen|Zahl|Text|Datumswerte|Datum|Zeitstempel|Währung|Prozentwerte|Prozent|Wahrheitswert)\b`)
	deRowsRe    = regexp.MustCompile(`(?i)(?:\b(etwa|ca\.?|circa|rund|ungefähr|knapp|fast|über|mehr als|mindestens)\s+)?\b(\d{1,3}(?:\.\d{3})+|\d+(?:,\d+)?)\s*(Tsd\.?|tausend|Mio\.?|Millionen)?\s+(?:Zeilen|Datensätze|Einträge)\b`)
	deItemSplit = regexp.MustCompile(`(?i)\s*,\s*(?:und\s+|oder\s+)?|\s+(?:und|oder|sowie|&)\s+`)
	deListEnd   = regexp.MustCompile(`(?i)[;!?\n]|\.(?:\s|$)|\s[-–—]\s|\s(?:mit|aber|wobei|jeweils|insgesamt|etwa|ca|rund|ungefähr|in|im|für|von|pro|je|und zwar)\b`)
)

// zhTypes and deTypes name the types in English.
var (
	zhTypes = map[string]string{"文本": "text", "字符串": "string", "整数": "int", "数字": "number", "数值": "numeric",
		"小数": "decimal", "浮点": "float", "浮点数": "float", "日期时间": "datetime", "日期": "date", "时间戳": "timestamp",
		"时间": "time", "布尔": "boolean", "布尔值": "boolean", "货币": "currency", "金额": "currency", "百分比": "percentage"}
	deTypes = map[string]string{"ganzzahl": "int", "ganzzahlen": "int", "dezimalzahl": "decimal", "dezimalzahlen": "decimal",
		"kommazahl": "decimal", "zahl": "number", "zahlen": "number", "text": "text", "datum": "date", "datumswerte": "date",
		"zeitstempel": "timestamp", "währung": "currency", "prozent": "percentage", "prozentwerte": "percentage", "wahrheitswert": "boolean"}
	// zhSubjectStop are characters no name of a file starts with: the subject
	// starts after the last of them ("里有三个工作表" names no file).
	zhSubjectStop = "的了在有是里个这那些把被将和与从对给请帮看读用我你他她它们中"
	deQualifiers  = map[string]string{"etwa": "about", "ca": "about", "ca.": "about", "circa": "about", "rund": "about",
		"ungefähr": "about", "knapp": "nearly", "fast": "nearly", "über": "over", "mehr als": "over", "mindestens": "at least"}
	zhQualifiers = map[string]string{"大约": "about", "约": "about", "大概": "about", "差不多": "about", "将近": "nearly",
		"接近": "nearly", "超过": "over", "不到": "under"}
)

// otherSubjects finds the Chinese and German file phrases of a sentence: each a
// mention, generic when it names no file ("文件", "die Datei").
func otherSubjects(sent string) (out []struct {
	mention
	generic bool
}) {
	for _, loc := range zhSubjectRe.FindAllStringIndex(sent, -1) {
		name := sent[loc[0]:loc[1]]
		start := loc[0]
		if i := strings.LastIndexAny(name, zhSubjectStop); i >= 0 {
			_, size := utf8.DecodeRuneInString(name[i:])
			start += i + size
			name = name[i+size:]
		}
		if strings.HasSuffix(name, "工作表") || strings.HasSuffix(name, "数据表") && name == "数据表" {
			continue // a sheet, not a file
		}
		generic := name == "文件" || name == "表" || name == "表格" || name == "工作簿"
		out = append(out, struct {
			mention
			generic bool
		}{mention{pos: start, subj: subject{key: name, display: name}}, generic})
	}
	for _, m := range deSubjectRe.FindAllStringSubmatchIndex(sent, -1) {
		name := sent[m[2]:m[3]]
		lower := strings.ToLower(name)
		generic := lower == "datei" || lower == "dateien" || lower == "tabelle" || lower == "tabellen" || lower == "arbeitsmappe" || lower == "mappe"
		out = append(out, struct {
			mention
			generic bool
		}{mention{pos: m[2], subj: subject{key: subjectKey(lower), display: name}}, generic})
	}
	return out
}

// otherFactsIn finds the Chinese and German structural facts of a sentence.
func otherFactsIn(sent string) []fact {
	var out []fact
	list := func(re *regexp.Regexp, add func(*fileFacts, listItem)) {
		for _, m := range re.FindAllStringIndex(sent, -1) {
			items := zhList(sent[m[1]:])
			if len(items) == 0 {
				continue
			}
			out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
				for _, it := range items {
					add(f, it)
				}
			}})
		}
	}
	list(zhColumnsRe, func(f *fileFacts, it listItem) { f.addColumn(it.name, it.typ) })
	list(zhSheetsRe, func(f *fileFacts, it listItem) { f.addSheet(it.name) })
	for _, re := range []*regexp.Regexp{deColumnsRe, deSheetsRe} {
		sheets := re == deSheetsRe
		for _, m := range re.FindAllStringSubmatchIndex(sent, -1) {
			items := deList(sent[m[1]:], m[2] >= 0 || m[4] >= 0)
			if len(items) == 0 {
				continue
			}
			out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
				for _, it := range items {
					if sheets {
						f.addSheet(it.name)
					} else {
						f.addColumn(it.name, it.typ)
					}
				}
			}})
		}
	}
	for _, m := range deTypeRe.FindAllStringSubmatchIndex(sent, -1) {
		name, typ := sent[m[2]:m[3]], deTypes[strings.ToLower(sent[m[4]:m[5]])]
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) {
			if !f.setType(name, typ) {
				f.addColumn(name, typ)
			}
		}})
	}
	for _, m := range zhRowsRe.FindAllStringSubmatchIndex(sent, -1) {
		if m[2] < 0 && zhRowsSkip.MatchString(tailOf(sent[:m[0]], maxWordBytes)) {
			continue
		}
		unit := ""
		if m[6] >= 0 {
			unit = "k" // 千; 万 is ten of them
		}
		n, ok := parseCount(sent[m[4]:m[5]], unit)
		if !ok {
			continue
		}
		if m[6] >= 0 && sent[m[6]:m[7]] == "万" {
			n *= 10
		}
		qual := ""
		if m[2] >= 0 {
			qual = zhQualifiers[sent[m[2]:m[3]]]
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.rows = rowsText(qual, n) }})
	}
	for _, m := range deRowsRe.FindAllStringSubmatchIndex(sent, -1) {
		if w := wordBeforeRe.FindStringSubmatch(tailOf(sent[:m[0]], maxWordBytes)); m[2] < 0 && w != nil && deRowsExcluded[strings.ToLower(w[1])] {
			continue
		}
		digits := sent[m[4]:m[5]]
		if strings.Contains(digits, ".") {
			digits = strings.ReplaceAll(digits, ".", "") // 9.000
		} else {
			digits = strings.ReplaceAll(digits, ",", ".") // 1,5 Mio.
		}
		unit := ""
		if m[6] >= 0 {
			switch u := strings.ToLower(sent[m[6]:m[7]]); {
			case strings.HasPrefix(u, "tsd"), u == "tausend":
				unit = "k"
			default:
				unit = "million"
			}
		}
		n, ok := parseCount(digits, unit)
		if !ok {
			continue
		}
		qual := ""
		if m[2] >= 0 {
			qual = deQualifiers[strings.ToLower(sent[m[2]:m[3]])]
		}
		out = append(out, fact{pos: m[0], apply: func(f *fileFacts) { f.rows = rowsText(qual, n) }})
	}
	return out
}

// zhList reads a Chinese list after its colon, to the end of the clause: items
// separated by 、，和 …, each at most 20 characters, a type after 是 kept.
func zhList(text string) []listItem {
	text = headOf(text, maxListBytes)
	if loc := zhListEnd.FindStringIndex(text); loc != nil {
		text = text[:loc[0]]
	}
	var items []listItem
	for _, raw := range zhItemSplit.Split(text, -1) {
		raw = strings.Trim(strings.TrimSpace(raw), "\"'`“”‘’「」")
		if raw == "" {
			continue
		}
		var it listItem
		if m := zhItemTypeRe.FindStringSubmatch(raw); m != nil {
			raw, it.typ = strings.TrimSpace(m[1]), zhTypes[m[2]]
		}
		if utf8.RuneCountInString(raw) > 20 || strings.ContainsAny(raw, "。？！") {
			break
		}
		it.name = raw
		items = append(items, it)
	}
	return items
}

// deList reads a German list as parseList reads an English one, with German
// conjunctions, clause words and articles.
func deList(text string, explicit bool) []listItem {
	return readList(text, explicit, deItemSplit, deListEnd, deArticles)
}

// deRowsExcluded are German words before a number of rows that make it no count
// of the file's rows ("die ersten 10 Zeilen", "3 Zeilen gelöscht" is after).
var deRowsExcluded = setOf("ersten", "erste", "letzten", "letzte", "oberen", "unteren", "nächsten", "weitere",
	"leere", "leeren", "doppelte", "doppelten", "fehlende", "neue", "neuen", "zusätzliche", "nur")

// deArticles are German words no column or sheet name starts with.
var deArticles = setOf("der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "es", "sie", "wir",
	"ich", "du", "und", "oder", "nicht", "auch", "nur", "noch", "alle", "jede", "jeder", "hat", "haben", "ist", "sind")
