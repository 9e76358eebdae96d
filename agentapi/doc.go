// Package agentapi defines the wire protocol between the per-node Sluice
// agent and its clients, and a small Go client for it.
//
// The protocol is documented in docs/protocol.md; this package is its
// reference implementation. It depends on the standard library only, so
// tools and tests can speak to an agent without pulling in storage SDKs.
//
// # Frames
//
// Every message is one frame:
//
//	u32 LE  frame length F (bytes after this field; 8 ≤ F ≤ MaxFrame)
//	u32 LE  header length H (H ≤ MaxHeader, H ≤ F-4)
//	H bytes header: a UTF-8 JSON object with at least "op"
//	F-4-H   body: raw bytes (only batch replies carry one)
//
// A connection starts with a hello exchange that fixes the protocol
// version. Requests are answered in order, one reply per request; a client
// has at most one request in flight per connection.
//
// # Batches
//
// A batch reply's body is a table of fixed 24-byte entries followed by the
// bytes of inlined samples:
//
//	i64 sample ID | u32 shard ref | u32 length | u64 offset
//
// The shard ref indexes the header's "shards" list, whose entries name the
// local path of a raw, uncompressed shard file; offset and length locate the
// sample's record in that file. A ref with bit 31 set (InlineFlag) means
// the record is inlined: offset is relative to the end of the entry table,
// and the low bits still name the shard (for its schema). Every shard a
// batch names stays leased (it cannot be evicted) until the client releases
// the batch or closes the connection.
//
// # Errors
//
// An error reply carries a Code from a closed set and a message. The Go
// client returns it as *Error, which matches the sentinel for its code with
// errors.Is.
package agentapi
