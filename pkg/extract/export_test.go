package extract

// WrittenID exposes writtenID to the property test.
var WrittenID = writtenID

// FileFactsIn exposes how many file facts fileFactsIn finds, to the benchmark.
func FileFactsIn(sent string) int { return len(fileFactsIn(sent)) }

// LearnedKey exposes learnedKey to the provenance tests, which store records of
// the old shape.
var LearnedKey = learnedKey
