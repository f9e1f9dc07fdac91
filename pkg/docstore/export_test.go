package docstore

import "time"

// Internal helpers exposed to the external test package.
var (
	EncodeKeyName = encodeKeyName
	DecodeKeyName = decodeKeyName
)

// SetRacyWindow changes how recently changed a file may be and still get a
// Version, so that tests need not wait for files to age.
func (f *Filesystem) SetRacyWindow(d time.Duration) { f.racy = d }
