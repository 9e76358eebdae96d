package s3store_test

import (
	"testing"

	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestRangedDownloadThroughCorruption: objects read as parallel ranges
// are checked against the CRC64-NVME the store keeps (HEAD with the
// checksum mode), which no ranged response carries; before, a range
// damaged in transit was written into the file and the download passed.
func TestRangedDownloadThroughCorruption(t *testing.T) {
	rig := newFaultRig(t, 10)
	storagetest.RangedDownloadThroughCorruption(t, rig.direct, rig.rb, rig.proxy)
}

// TestResumedBodyThroughCorruption: a whole-object GET that breaks midway
// and is resumed by the retry decorator is still checked against the
// store's CRC64-NVME, across both requests.
func TestResumedBodyThroughCorruption(t *testing.T) {
	rig := newFaultRig(t, 10)
	storagetest.ResumedBodyThroughCorruption(t, rig.direct, rig.rb, rig.proxy)
}

// TestRangedDownloadOfReplacedObject: an object replaced between the Stat
// and the ranged GETs of storage.Download is read again against its new
// checksum instead of failing as damaged.
func TestRangedDownloadOfReplacedObject(t *testing.T) {
	rig := newFaultRig(t, 10)
	storagetest.RangedDownloadOfReplacedObject(t, rig.direct, rig.rb, rig.proxy)
}

// TestCopyThroughCorruption: `sluice cp` (storage.CopyTree) reads a
// damaged body again instead of failing the copy.
func TestCopyThroughCorruption(t *testing.T) {
	rig := newFaultRig(t, 10)
	storagetest.CopyThroughCorruption(t, rig.direct, rig.rb, rig.proxy)
}
