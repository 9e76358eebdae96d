package format

// ParseIndexTree exposes the reference parser to the tests.
var ParseIndexTree = parseIndexTree
