package extract

// WrittenID exposes writtenID to the property test.
var WrittenID = writtenID

// FileFactsIn exposes how many file facts fileFactsIn finds, to the benchmark.
func FileFactsIn(sent string) int { return len(fileFactsIn(sent)) }
