package gcsstore_test

import (
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestIntegrity runs the shared checks of reads against the CRC32C GCS
// keeps for every object, through the fault proxy:
//   - RangedDownloadThroughCorruption: objects read as parallel ranges
//     are checked (the client checks only whole reads); before, a range
//     damaged in transit was written into the file and the download
//     passed.
//   - ResumedBodyThroughCorruption: a whole-object read resumed by the
//     retry decorator is checked across both requests.
//   - RangedDownloadOfReplacedObject: an object replaced between the Stat
//     and the ranged GETs is read again against its new CRC32C.
//   - CopyThroughCorruption: `sluice cp` (storage.CopyTree) reads a
//     damaged body again instead of failing the copy.
func TestIntegrity(t *testing.T) {
	for name, check := range map[string]func(*testing.T, storage.Bucket, storage.Bucket, *storagetest.FaultProxy){
		"RangedDownloadThroughCorruption": storagetest.RangedDownloadThroughCorruption,
		"ResumedBodyThroughCorruption":    storagetest.ResumedBodyThroughCorruption,
		"RangedDownloadOfReplacedObject":  storagetest.RangedDownloadOfReplacedObject,
		"CopyThroughCorruption":           storagetest.CopyThroughCorruption,
	} {
		t.Run(name, func(t *testing.T) {
			s := testServer(t)
			direct := newBucket(t, s)
			proxy, rb := proxiedBucket(t, s, direct, nil)
			check(t, direct, rb, proxy)
		})
	}
}
