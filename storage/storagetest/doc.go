// Package storagetest checks storage.Bucket implementations against the
// contract in package storage, and provides fault injection for tests of
// the code above them.
//
// A driver's test runs the conformance suite in a few lines:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Bucket {
//			b := mydriver.New(...) // an empty bucket for this subtest
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// A read-only store (plain HTTP) runs it with RunWith and Options.ReadOnly,
// returning a writable bucket whose objects the read-only one serves; a
// store that cannot list sets Options.NoList. RunBenchmarks measures a
// writable bucket: parallel download throughput, small ranged reads, Stat
// and writes.
//
// For failure tests, Faulty wraps any Bucket and injects errors, stalls,
// latency and truncated or broken bodies per operation; FaultProxy is an
// HTTP reverse proxy that does the same to the traffic between any HTTP
// client (an SDK) and a real server: connection resets mid-body, 500/503
// with Retry-After, 429, stalls and truncated bodies.
package storagetest
