//go:build race

package stream_test

// raceMemFactor scales peak-memory bounds: the race detector keeps shadow
// memory for the heap.
const raceMemFactor = 2
