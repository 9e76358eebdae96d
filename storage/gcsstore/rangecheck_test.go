package gcsstore_test

import (
	"testing"

	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestRangedDownloadThroughCorruption: objects read as parallel ranges
// are checked against the CRC32C GCS keeps for every object, which the
// client checks only on whole reads; before, a range damaged in transit
// was written into the file and the download passed.
func TestRangedDownloadThroughCorruption(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	proxy, rb := proxiedBucket(t, s, direct, nil)
	storagetest.RangedDownloadThroughCorruption(t, direct, rb, proxy)
}

// TestResumedBodyThroughCorruption: a whole-object read that breaks
// midway and is resumed by the retry decorator is still checked against
// the object's CRC32C, across both requests.
func TestResumedBodyThroughCorruption(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	proxy, rb := proxiedBucket(t, s, direct, nil)
	storagetest.ResumedBodyThroughCorruption(t, direct, rb, proxy)
}

// TestRangedDownloadOfReplacedObject: an object replaced between the Stat
// and the ranged GETs of storage.Download is read again against its new
// CRC32C instead of failing as damaged.
func TestRangedDownloadOfReplacedObject(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	proxy, rb := proxiedBucket(t, s, direct, nil)
	storagetest.RangedDownloadOfReplacedObject(t, direct, rb, proxy)
}

// TestCopyThroughCorruption: `sluice cp` (storage.CopyTree) reads a body
// that fails the CRC32C again instead of failing the copy.
func TestCopyThroughCorruption(t *testing.T) {
	s := testServer(t)
	direct := newBucket(t, s)
	proxy, rb := proxiedBucket(t, s, direct, nil)
	storagetest.CopyThroughCorruption(t, direct, rb, proxy)
}
