// Package gcsstore is the storage.Bucket driver for Google Cloud Storage,
// built on cloud.google.com/go/storage (JSON API over HTTP).
//
// # URLs
//
//	gs://BUCKET/PREFIX[?option=value&...]
//
// Keys are relative to PREFIX. Query options, all optional:
//
//	endpoint=http://127.0.0.1:4443  a custom endpoint (an emulator such as
//	                                fake-gcs-server); requests are then
//	                                unauthenticated
//	anonymous=true                  send unauthenticated requests (public
//	                                buckets)
//	user_project=PROJECT            bill requests to PROJECT (requester-pays
//	                                buckets)
//	region=REGION                   with HMAC keys only: the region requests
//	                                are signed for (default auto)
//
// # Environment
//
// Credentials are Google's Application Default Credentials, refreshed as
// they expire: GOOGLE_APPLICATION_CREDENTIALS (a service-account key or
// workload-identity-federation file), the gcloud user credentials
// (gcloud auth application-default login), or the metadata server on GCE,
// GKE (workload identity) and Cloud Run.
//
// HMAC keys, as MosaicML Streaming takes them: with GCS_KEY and GCS_SECRET
// both set, Open reads and writes through GCS's S3-compatible XML API
// (XMLEndpoint, or endpoint=) with the S3 driver (storage/s3store),
// signing with the key for region auto, whatever
// GOOGLE_APPLICATION_CREDENTIALS says (MosaicML's download checks the keys
// first). URLs and messages still name gs://; a refused request names the
// bucket, the key (shortened) and where it came from, never the secret.
// STORAGE_EMULATOR_HOST does not apply there. Reads there are checked
// against the object's CRC32C in the XML API's x-goog-hash, as the JSON
// API's are (a body the store transcodes is not checked). NewStore and
// NewHMAC take the keys as Options instead (a job's, on a shared agent).
//
// STORAGE_EMULATOR_HOST (host:port or http://host:port) points every
// request at an emulator, without authentication, as in Google's own
// clients. fake-gcs-server run with -scheme http works this way.
//
// # Retries
//
// The client library's retries are switched off (RetryNever): failures
// surface as errors that storage.IsRetryable classifies (HTTP failures are
// *storage.HTTPError wrapping the library's error), so that retries, backoff
// and their budget live in the storage retry decorator only. The library's
// client-side metrics export is switched off too.
//
// # Errors
//
// A missing object matches storage.ErrNotExist (and the library's
// storage.ErrObjectNotExist through errors.Is); refused access (401/403)
// matches storage.ErrPermission and names the credential source in use.
// errors.As reaches *googleapi.Error.
//
// # Uploads
//
// Writers use resumable uploads in chunks of WriteOptions.PartSize
// (default 16 MiB, rounded up to a multiple of 256 KiB), buffering one chunk;
// an object becomes visible only when the upload is finalised by Close.
package gcsstore
