package s3store

// SetFullObjectUploads turns full-object checksums of multipart uploads
// on or off for b (on for AWS endpoints only), so that tests can run
// them against the local server, which supports them.
func SetFullObjectUploads(b *Bucket, on bool) { b.fullObject = on }
