package gcsstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	gcs "cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/sluicedata/sluice/storage"
)

const (
	// DefaultChunkSize is the resumable-upload chunk size used when
	// WriteOptions.PartSize is zero; each writer buffers one chunk.
	DefaultChunkSize = 16 << 20
	// chunkAlign is the granularity GCS requires of upload chunks.
	chunkAlign = 256 << 10
)

// Options configures a Bucket. The zero value uses Application Default
// Credentials and the environment, as described in the package
// documentation.
type Options struct {
	// Endpoint is a custom endpoint ("http://127.0.0.1:4443"); requests to
	// it are unauthenticated. Empty means STORAGE_EMULATOR_HOST, else Google.
	// With HMAC keys it is the S3-compatible XML endpoint the signed
	// requests go to instead (empty means XMLEndpoint).
	Endpoint string
	// HMACKey and HMACSecret are a GCS HMAC key (MosaicML Streaming's
	// GCS_KEY and GCS_SECRET): when set, NewStore reads and writes through
	// the XML API with them (NewHMAC) instead of the JSON API.
	HMACKey, HMACSecret string
	// Region is the region HMAC requests are signed for; empty means
	// "auto", which GCS takes. Only S3-compatible servers standing in for the XML
	// API that check it (a test server) need another.
	Region string
	// HMACSource says where the HMAC key came from ("GCS_KEY and
	// GCS_SECRET"), for messages; it is never the secret.
	HMACSource string
	// Anonymous sends unauthenticated requests (public buckets).
	Anonymous bool
	// CredentialsFile is a credentials JSON file (service account,
	// authorized user, external account...) used instead of Application
	// Default Credentials: GOOGLE_APPLICATION_CREDENTIALS of another
	// process (a job's, on a shared agent).
	CredentialsFile string
	// UserProject bills requests to this project (requester-pays buckets).
	UserProject string
	// HTTPClient, when non-nil, replaces the library's authenticated HTTP
	// client; it must add credentials itself where they are needed.
	HTTPClient *http.Client
	// JSONReads reads objects through the JSON API rather than the XML
	// API (the library's default). Emulators that route XML requests by
	// Host header need it behind a proxy. Objects stored with
	// Content-Encoding: gzip are then read decompressed.
	JSONReads bool
	// ListPageSize is the number of objects asked for per list request;
	// zero means the library's default (1000).
	ListPageSize int
}

// Bucket is a storage.Bucket on one GCS bucket and object-name prefix. It
// is safe for concurrent use.
type Bucket struct {
	client   *gcs.Client
	bkt      *gcs.BucketHandle
	name     string
	root     string // "" or ending in "/"
	endpoint string // custom endpoint, "" for Google
	creds    string // the credential source, for messages
	pageSize int
	// jsonReads: reads use the JSON API (Options.JSONReads).
	jsonReads bool
	closed    atomic.Bool
}

var (
	_ storage.Bucket   = (*Bucket)(nil)
	_ storage.Uploader = (*Bucket)(nil)
)

// Open opens the Bucket named by a gs:// URL (see the package documentation
// for its options). It matches storage.Opener.
func Open(ctx context.Context, u *url.URL) (storage.Bucket, error) {
	if u.Scheme != "gs" {
		return nil, fmt.Errorf("gcsstore: open %s: scheme is not gs", u.Redacted())
	}
	opts := &Options{}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			opts.Endpoint = v
		case "user_project":
			opts.UserProject = v
		case "region":
			opts.Region = v
		case "anonymous":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("gcsstore: open %s: option anonymous=%q: want true or false", u.Redacted(), v)
			}
			opts.Anonymous = b
		default:
			return nil, fmt.Errorf("gcsstore: open %s: unknown option %q (known: endpoint, anonymous, user_project, region)", u.Redacted(), k)
		}
	}
	if key, secret, ok := HMACFromEnv(os.Getenv); ok {
		opts.HMACKey, opts.HMACSecret, opts.HMACSource = key, secret, "GCS_KEY and GCS_SECRET"
	}
	return NewStore(ctx, u.Host, u.Path, opts)
}

// New returns a Bucket on bucket with object names under prefix, through
// the JSON API. It makes no request. opts may be nil; HMAC keys in it are
// refused (they need the XML API: NewStore or NewHMAC).
func New(ctx context.Context, bucket, prefix string, opts *Options) (*Bucket, error) {
	if opts == nil {
		opts = &Options{}
	}
	if bucket == "" {
		return nil, errors.New("gcsstore: no bucket name (want gs://BUCKET/PREFIX)")
	}
	if opts.HMACKey != "" || opts.HMACSecret != "" {
		return nil, fmt.Errorf("gcsstore: gs://%s: HMAC keys go through the XML API (NewStore or NewHMAC), not New", bucket)
	}
	if opts.Region != "" {
		return nil, fmt.Errorf("gcsstore: gs://%s: region applies only with HMAC keys (GCS_KEY and GCS_SECRET)", bucket)
	}
	root := strings.Trim(prefix, "/")
	if root != "" {
		if err := storage.ValidateKey(root); err != nil {
			return nil, fmt.Errorf("gcsstore: prefix of gs://%s/%s: %w", bucket, root, err)
		}
		root += "/"
	}
	// Nothing is exported to Google besides the requests themselves.
	copts := []option.ClientOption{gcs.WithDisabledClientMetrics()}
	creds := "Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud application-default login, or the metadata server)"
	if f := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); f != "" {
		creds = "Application Default Credentials from GOOGLE_APPLICATION_CREDENTIALS=" + f
	}
	if f := opts.CredentialsFile; f != "" {
		typ, err := credentialsType(f)
		if err != nil {
			return nil, fmt.Errorf("gcsstore: credentials for gs://%s: %w", bucket, err)
		}
		copts = append(copts, option.WithAuthCredentialsFile(typ, f))
		creds = "credentials file " + f
	}
	endpoint := opts.Endpoint
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, fmt.Errorf("gcsstore: endpoint %q for gs://%s: want http(s)://host[:port]", endpoint, bucket)
		}
		eu.Path = "/storage/v1/"
		copts = append(copts, option.WithEndpoint(eu.String()), option.WithoutAuthentication())
		creds = "no credentials (custom endpoint)"
	} else if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
		endpoint = h
		creds = "no credentials (STORAGE_EMULATOR_HOST)"
	}
	if opts.Anonymous {
		copts = append(copts, option.WithoutAuthentication())
		creds = "no credentials (anonymous)"
	}
	if opts.JSONReads {
		copts = append(copts, gcs.WithJSONReads())
	}
	if opts.HTTPClient != nil {
		copts = append(copts, option.WithHTTPClient(opts.HTTPClient))
		creds = "the credentials of the caller's HTTP client"
	}
	client, err := gcs.NewClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("gcsstore: client for gs://%s (%s): %w", bucket, creds, err)
	}
	// One attempt per request: retries belong to the storage retry
	// decorator (see the package documentation).
	client.SetRetry(gcs.WithPolicy(gcs.RetryNever))
	bkt := client.Bucket(bucket)
	if opts.UserProject != "" {
		bkt = bkt.UserProject(opts.UserProject)
	}
	return &Bucket{
		client:    client,
		bkt:       bkt,
		name:      bucket,
		root:      root,
		endpoint:  endpoint,
		creds:     creds,
		pageSize:  opts.ListPageSize,
		jsonReads: opts.JSONReads,
	}, nil
}

// Client returns the library client the Bucket uses, for operations the
// storage.Bucket interface does not cover.
func (b *Bucket) Client() *gcs.Client { return b.client }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string {
	return "gs://" + b.name + "/" + b.root + key
}

// Close implements storage.Bucket and closes the library client.
func (b *Bucket) Close() error {
	if b.closed.Swap(true) {
		return fmt.Errorf("gcsstore: close gs://%s/%s: %w", b.name, b.root, storage.ErrClosed)
	}
	if err := b.client.Close(); err != nil {
		return fmt.Errorf("gcsstore: close gs://%s/%s: %w", b.name, b.root, err)
	}
	return nil
}

func (b *Bucket) check(op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("gcsstore: %s %s: %w", op, b.URL(key), storage.ErrClosed)
	}
	if err := storage.ValidateKey(key); err != nil {
		return fmt.Errorf("gcsstore: %s %s: %w", op, b.URL(key), err)
	}
	return nil
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.check("stat", key); err != nil {
		return storage.ObjectInfo{}, err
	}
	a, err := b.bkt.Object(b.root + key).Attrs(ctx)
	if err != nil {
		return storage.ObjectInfo{}, b.fail("stat", key, err)
	}
	info := storage.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated, ETag: a.Etag}
	if a.CRC32C != 0 {
		// GCS keeps a CRC32C of every object's stored bytes, which readers
		// of ranges check them against (storage.RangeCheck). Zero is
		// taken for none: an emulator may leave it out, and the empty
		// object's is zero.
		info.Checksum = storage.Checksum{Algorithm: "CRC32C", Value: binary.BigEndian.AppendUint32(nil, a.CRC32C)}
	}
	return info, nil
}

// NewRangeReader implements storage.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.check("get", key); err != nil {
		return nil, err
	}
	stat := func(ctx context.Context) (storage.ObjectInfo, error) { return b.Stat(ctx, key) }
	if r, err := storage.SettleRange(ctx, "gcsstore", b.URL(key), off, length, stat); r != nil || err != nil {
		return r, err
	}
	if length < 0 {
		length = -1
	}
	obj := b.bkt.Object(b.root + key)
	if !b.jsonReads {
		// The stored bytes, never gunzipped on the way (an object uploaded
		// with Content-Encoding: gzip would otherwise differ from its
		// listed size). The JSON API has no such switch.
		obj = obj.ReadCompressed(true)
	}
	r, err := obj.NewRangeReader(ctx, off, length)
	if err != nil {
		if ge := (*googleapi.Error)(nil); errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
			return storage.UnsatisfiableRange(ctx, "gcsstore", b.URL(key), off, stat)
		}
		return nil, b.fail("get", key, err)
	}
	return storage.NewBodyReader(ctx, crcChecked{r}, "gcsstore", b.URL(key)), nil
}

// crcChecked reports the library's CRC32C mismatch on a whole-object read
// (damage in transit, a plain error that says "bad CRC") as
// storage.ErrChecksum, so that the retry decorator does not resume the
// read after the damaged bytes and deliver them as the object.
type crcChecked struct{ io.ReadCloser }

// Read implements io.Reader.
func (c crcChecked) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err != nil && err != io.EOF && strings.Contains(err.Error(), "bad CRC") {
		err = fmt.Errorf("%w (%v)", storage.ErrChecksum, err)
	}
	return n, err
}

// List implements storage.Bucket; the library pages through the listing.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if b.closed.Load() {
		return fmt.Errorf("gcsstore: list %s: %w", b.URL(prefix), storage.ErrClosed)
	}
	q := &gcs.Query{Prefix: b.root + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated", "Etag"}); err != nil {
		return fmt.Errorf("gcsstore: list %s: %w", b.URL(prefix), err)
	}
	it := b.bkt.Objects(ctx, q)
	if b.pageSize > 0 {
		it.PageInfo().MaxSize = b.pageSize
	}
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return nil
		}
		if err != nil {
			return b.fail("list", prefix, err)
		}
		key, ok := strings.CutPrefix(a.Name, b.root)
		if !ok || key == "" || strings.HasSuffix(key, "/") {
			// Outside the root, or a "folder" placeholder some tools create.
			continue
		}
		if err := fn(storage.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated, ETag: a.Etag}); err != nil {
			return err
		}
	}
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check("delete", key); err != nil {
		return err
	}
	if err := b.bkt.Object(b.root + key).Delete(ctx); err != nil {
		return b.fail("delete", key, err)
	}
	return nil
}

// NewWriter implements storage.Bucket with a resumable upload.
func (b *Bucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	if err := b.check("put", key); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &storage.WriteOptions{}
	}
	chunk := opts.PartSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	chunk = (chunk + chunkAlign - 1) / chunkAlign * chunkAlign
	// The library's writer lives as long as its context; a private one
	// lets Close abandon the upload when the caller's is cancelled.
	wctx, cancel := context.WithCancel(ctx)
	w := b.bkt.Object(b.root + key).NewWriter(wctx)
	w.ChunkSize = int(chunk)
	w.ContentType = opts.ContentType
	if w.ContentType == "" {
		w.ContentType = "application/octet-stream"
	}
	return &writer{ctx: ctx, cancel: cancel, w: w, b: b, key: key}, nil
}

// Upload implements storage.Uploader by streaming src through NewWriter.
// Because src can be read again, the retry decorator can repeat a failed
// upload as a whole.
func (b *Bucket) Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *storage.WriteOptions) error {
	if size < 0 {
		return fmt.Errorf("gcsstore: put %s: negative size %d", b.URL(key), size)
	}
	w, err := b.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, io.NewSectionReader(src, 0, size)); err != nil {
		w.(*writer).abandon(err)
		return fmt.Errorf("gcsstore: put %s: %w", b.URL(key), err)
	}
	return w.Close()
}

type writer struct {
	ctx    context.Context
	cancel context.CancelFunc
	w      *gcs.Writer
	b      *Bucket
	key    string
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("gcsstore: write %s: writer closed", w.b.URL(w.key))
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, w.b.fail("put", w.key, err)
	}
	return n, nil
}

// Close finalises the upload. If the writer's context was cancelled, the
// upload is abandoned and nothing appears.
func (w *writer) Close() error {
	if w.closed {
		return fmt.Errorf("gcsstore: close %s: writer already closed", w.b.URL(w.key))
	}
	if err := w.ctx.Err(); err != nil {
		w.abandon(err)
		return fmt.Errorf("gcsstore: put %s: %w", w.b.URL(w.key), err)
	}
	w.closed = true
	defer w.cancel()
	if err := w.w.Close(); err != nil {
		return w.b.fail("put", w.key, err)
	}
	return nil
}

// abandon ends the upload without finalising it: cancelling the
// library writer's context makes its Close fail, and nothing appears.
func (w *writer) abandon(error) {
	if w.closed {
		return
	}
	w.closed = true
	w.cancel()
	_ = w.w.Close() // fails with the cancellation, by design
}

// fail turns a library error from op on key into the error the storage
// package documents: an HTTP failure becomes a *storage.HTTPError wrapping
// the library's error; anything else is wrapped with the operation and URL.
func (b *Bucket) fail(op, key string, err error) error {
	u := b.URL(key)
	he := &storage.HTTPError{Op: op, URL: u, Err: err}
	var ge *googleapi.Error
	switch {
	case errors.Is(err, gcs.ErrObjectNotExist):
		he.StatusCode, he.Code = http.StatusNotFound, "notFound"
	case errors.Is(err, gcs.ErrBucketNotExist):
		he.StatusCode, he.Code = http.StatusNotFound, "notFound"
		he.Err = fmt.Errorf("bucket %q does not exist at %s: %w", b.name, b.endpointName(), err)
	case errors.As(err, &ge):
		he.StatusCode = ge.Code
		if len(ge.Errors) > 0 {
			he.Code = ge.Errors[0].Reason
		}
		he.RetryAfter = storage.ParseRetryAfter(ge.Header.Get("Retry-After"), time.Now())
	default:
		return fmt.Errorf("gcsstore: %s %s: %w", op, u, err)
	}
	if he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden {
		hint := "; for a requester-pays bucket add ?user_project=PROJECT"
		he.Err = fmt.Errorf("request to %s with %s; check that this identity may access bucket %q (IAM roles such as roles/storage.objectViewer)%s: %w",
			b.endpointName(), b.creds, b.name, hint, err)
	}
	return he
}

func (b *Bucket) endpointName() string {
	if b.endpoint != "" {
		return b.endpoint
	}
	return "Google Cloud Storage"
}

// credentialsType reads the "type" of a credentials JSON file.
func credentialsType(name string) (option.CredentialsType, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s: not a credentials JSON file: %w", name, err)
	}
	if f.Type == "" {
		return "", fmt.Errorf("%s: credentials JSON file without a \"type\"", name)
	}
	return option.CredentialsType(f.Type), nil
}
