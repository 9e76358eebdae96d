package httpstore

// ParseContentRange exposes parseContentRange to the tests.
var ParseContentRange = parseContentRange

// HeaderChecksum is headerChecksum, for tests.
var HeaderChecksum = headerChecksum
