package s3store_test

import (
	"bytes"
	"testing"

	"github.com/sluicedata/sluice/storage"
	"github.com/sluicedata/sluice/storage/s3store"
	"github.com/sluicedata/sluice/storage/storagetest"
)

// TestMultipartUploadFullObjectChecksum: a multipart upload with the
// SDK's CRC32 on every part (the default for AWS) asks for a full-object
// checksum, which Stat then reports and a read in parallel ranges is
// checked against; S3's default for a CRC32 multipart upload is a
// checksum of the parts' checksums, which nothing can be checked against
// (so a 64 MiB shard written by `sluice convert` to AWS was read
// unchecked). Without the option (other endpoints), the store keeps the
// composite checksum.
func TestMultipartUploadFullObjectChecksum(t *testing.T) {
	t.Setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported") // as for AWS
	data := storagetest.Pattern(51, 40<<20+7)
	for _, on := range []bool{true, false} {
		rig := newFaultRig(t, 10)
		direct := rig.direct
		s3store.SetFullObjectUploads(direct, on)
		if _, err := storage.WriteFrom(t.Context(), direct, "mp.bin", bytes.NewReader(data), &storage.WriteOptions{PartSize: 16 << 20}); err != nil {
			t.Fatalf("full object %v: multipart upload: %v", on, err)
		}
		info, err := rig.rb.Stat(t.Context(), "mp.bin")
		if err != nil {
			t.Fatal(err)
		}
		rc := storage.NewRangeCheck(info.Checksum, info.Size)
		if !on {
			// S3's default: a checksum of the parts' CRC32s.
			if rc != nil {
				t.Fatalf("without the option the store keeps %v, a full-object checksum: the test shows nothing", info.Checksum)
			}
			continue
		}
		if rc == nil {
			t.Fatalf("Stat after a full-object multipart upload reports %v: nothing ranges can be checked against", info.Checksum)
		}
		rc.Add(0, data[:1<<20])
		rc.Add(1<<20, data[1<<20:])
		if err := rc.Verify("mp.bin"); err != nil {
			t.Fatalf("the store's full-object checksum: %v", err)
		}
	}
}
