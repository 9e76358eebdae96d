package httpstore

// ParseContentRange exposes parseContentRange to the tests.
var ParseContentRange = parseContentRange
