// Package depcheck has no code of its own: its test enforces which packages
// the data-format and order packages of Sluice may import, so that a reader
// of MDS files, the shuffle and the agent protocol never drag in a cloud SDK,
// the storage layer or a network stack they do not need (STYLE Part 11).
//
// The rules live in deps_test.go as a table; each forbidden import that is
// tolerated names the one package allowed to bring it in, and why.
package depcheck
