package docstore

// Internal helpers exposed to the external test package.
var (
	EncodeKeyName = encodeKeyName
	DecodeKeyName = decodeKeyName
)
