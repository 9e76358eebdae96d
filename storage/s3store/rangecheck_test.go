package s3store_test

import (
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestIntegrity runs the shared checks of reads against the checksum the
// store keeps (CRC64-NVME for objects uploaded without one), through the
// fault proxy:
//   - RangedDownloadThroughCorruption: objects read as parallel ranges
//     are checked against the checksum HEAD reports with the checksum
//     mode, which no ranged response carries; before, a range damaged in
//     transit was written into the file and the download passed.
//   - ResumedBodyThroughCorruption: a whole-object GET that breaks midway
//     and is resumed by the retry decorator is checked across both
//     requests; before, a damaged rest was delivered.
//   - RangedDownloadOfReplacedObject: an object replaced between the Stat
//     and the ranged GETs is read again against its new checksum instead
//     of failing as damaged.
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
			rig := newFaultRig(t, 10)
			check(t, rig.direct, rig.rb, rig.proxy)
		})
	}
}
