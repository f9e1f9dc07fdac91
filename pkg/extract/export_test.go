package extract

// WrittenID exposes writtenID to the property test.
var WrittenID = writtenID
