package azstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/sluicedata/sluice/storage"
)

const (
	// DefaultBlockSize is the block size of uploads when
	// WriteOptions.PartSize is zero.
	DefaultBlockSize = 8 << 20
	// DefaultConcurrency is the number of blocks staged at once when
	// WriteOptions.Concurrency is zero; each writer buffers up to this many
	// blocks.
	DefaultConcurrency = 4
	// minBlockSize is the smallest block the SDK's stream upload uses.
	minBlockSize = 1 << 20
)

// Options says how to reach a storage account. Exactly one way is used, in
// this order: ConnectionString; Account with AccountKey; Account with
// SASToken; Account with Credential; Account alone (DefaultAzureCredential).
type Options struct {
	// ConnectionString is an Azure Storage connection string.
	ConnectionString string
	// Account is the storage account name.
	Account string
	// AccountKey is the account's shared key (base64).
	AccountKey string
	// SASToken is a shared access signature ("sv=...&sig=...", with or
	// without a leading "?").
	SASToken string
	// Credential is an Entra ID token credential.
	Credential azcore.TokenCredential
	// ServiceURL overrides https://ACCOUNT.blob.core.windows.net/.
	ServiceURL string
	// HTTPClient, when non-nil, replaces the SDK's HTTP client.
	HTTPClient *http.Client
	// ListPageSize is the number of blobs asked for per list request;
	// zero means the service's default (5000).
	ListPageSize int32
}

// OptionsFromEnv reads Options from the environment variables listed in
// the package documentation.
func OptionsFromEnv() *Options { return OptionsFrom(os.Getenv) }

// OptionsFrom reads Options from the variables of the package
// documentation as getenv returns them (another process's environment:
// a job's, on a shared agent).
func OptionsFrom(getenv func(string) string) *Options {
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	return &Options{
		ConnectionString: first("AZURE_STORAGE_CONNECTION_STRING"),
		Account:          first("AZURE_STORAGE_ACCOUNT", "AZURE_ACCOUNT_NAME"),
		AccountKey:       first("AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_ACCOUNT_ACCESS_KEY"),
		SASToken:         first("AZURE_STORAGE_SAS_TOKEN"),
		ServiceURL:       first("AZURE_STORAGE_BLOB_ENDPOINT"),
	}
}

// Bucket is a storage.Bucket on one blob container and name prefix. It is
// safe for concurrent use.
type Bucket struct {
	cont   *container.Client
	name   string // container
	root   string // "" or ending in "/"
	scheme string // "az" or "azure", for URLs
	creds  string // the credential source, for messages
	page   int32  // list page size, 0 for the default
	closed atomic.Bool
}

var (
	_ storage.Bucket   = (*Bucket)(nil)
	_ storage.Uploader = (*Bucket)(nil)
)

// Open opens the Bucket named by an az:// or azure:// URL, with the
// account and credentials from the environment. It matches storage.Opener.
func Open(ctx context.Context, u *url.URL) (storage.Bucket, error) {
	if u.Scheme != "az" && u.Scheme != "azure" {
		return nil, fmt.Errorf("azstore: open %s: scheme is not az or azure", u.Redacted())
	}
	if len(u.Query()) > 0 {
		return nil, fmt.Errorf("azstore: open %s: az:// URLs take no options (the account comes from the environment)", u.Redacted())
	}
	b, err := New(ctx, u.Host, u.Path, OptionsFromEnv())
	if err != nil {
		return nil, err
	}
	b.scheme = u.Scheme
	return b, nil
}

// New returns a Bucket on the blob container with names under prefix. It
// makes no request. opts may be nil, which means OptionsFromEnv().
func New(_ context.Context, containerName, prefix string, opts *Options) (*Bucket, error) {
	if opts == nil {
		opts = OptionsFromEnv()
	}
	if containerName == "" {
		return nil, errors.New("azstore: no container name (want az://CONTAINER/PREFIX)")
	}
	root := strings.Trim(prefix, "/")
	if root != "" {
		if err := storage.ValidateKey(root); err != nil {
			return nil, fmt.Errorf("azstore: prefix of az://%s/%s: %w", containerName, root, err)
		}
		root += "/"
	}
	copts := &azblob.ClientOptions{}
	// One attempt per request: retries belong to the storage retry
	// decorator (see the package documentation).
	copts.Retry = policy.RetryOptions{MaxRetries: -1}
	if opts.HTTPClient != nil {
		copts.Transport = opts.HTTPClient
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		copts.Transport = &http.Client{Transport: t}
	}

	serviceURL := opts.ServiceURL
	if serviceURL == "" && opts.Account != "" {
		serviceURL = "https://" + opts.Account + ".blob.core.windows.net/"
	}
	var (
		client *azblob.Client
		creds  string
		err    error
	)
	switch {
	case opts.ConnectionString != "":
		creds = "the connection string"
		client, err = azblob.NewClientFromConnectionString(opts.ConnectionString, copts)
	case opts.Account == "":
		return nil, fmt.Errorf("azstore: no storage account for az://%s: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or an Entra ID login", containerName)
	case opts.AccountKey != "":
		creds = "the shared key of account " + opts.Account
		var cred *azblob.SharedKeyCredential
		cred, err = azblob.NewSharedKeyCredential(opts.Account, opts.AccountKey)
		if err == nil {
			client, err = azblob.NewClientWithSharedKeyCredential(serviceURL, cred, copts)
		}
	case opts.SASToken != "":
		creds = "a SAS token for account " + opts.Account
		client, err = azblob.NewClientWithNoCredential(strings.TrimSuffix(serviceURL, "/")+"/?"+strings.TrimPrefix(opts.SASToken, "?"), copts)
	case opts.Credential != nil:
		creds = "the caller's token credential for account " + opts.Account
		client, err = azblob.NewClient(serviceURL, opts.Credential, copts)
	default:
		creds = "DefaultAzureCredential (environment, workload identity, managed identity or Azure CLI) for account " + opts.Account
		var cred *azidentity.DefaultAzureCredential
		cred, err = azidentity.NewDefaultAzureCredential(nil)
		if err == nil {
			client, err = azblob.NewClient(serviceURL, cred, copts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("azstore: client for az://%s with %s: %w", containerName, creds, err)
	}
	return &Bucket{
		cont:   client.ServiceClient().NewContainerClient(containerName),
		name:   containerName,
		root:   root,
		scheme: "az",
		creds:  creds,
		page:   opts.ListPageSize,
	}, nil
}

// Container returns the SDK container client the Bucket uses, for
// operations the storage.Bucket interface does not cover.
func (b *Bucket) Container() *container.Client { return b.cont }

// URL implements storage.Bucket.
func (b *Bucket) URL(key string) string {
	return b.scheme + "://" + b.name + "/" + b.root + key
}

// Close implements storage.Bucket.
func (b *Bucket) Close() error {
	if b.closed.Swap(true) {
		return fmt.Errorf("azstore: close %s: %w", b.URL(""), storage.ErrClosed)
	}
	return nil
}

func (b *Bucket) check(op, key string) error {
	if b.closed.Load() {
		return fmt.Errorf("azstore: %s %s: %w", op, b.URL(key), storage.ErrClosed)
	}
	if err := storage.ValidateKey(key); err != nil {
		return fmt.Errorf("azstore: %s %s: %w", op, b.URL(key), err)
	}
	return nil
}

// Stat implements storage.Bucket.
func (b *Bucket) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	if err := b.check("stat", key); err != nil {
		return storage.ObjectInfo{}, err
	}
	p, err := b.cont.NewBlobClient(b.root+key).GetProperties(ctx, nil)
	if err != nil {
		return storage.ObjectInfo{}, b.fail("stat", key, err)
	}
	info := storage.ObjectInfo{Key: key}
	if p.ContentLength != nil {
		info.Size = *p.ContentLength
	}
	if p.LastModified != nil {
		info.ModTime = *p.LastModified
	}
	if p.ETag != nil {
		info.ETag = string(*p.ETag)
	}
	return info, nil
}

// NewRangeReader implements storage.Bucket.
func (b *Bucket) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := b.check("get", key); err != nil {
		return nil, err
	}
	stat := func(ctx context.Context) (storage.ObjectInfo, error) { return b.Stat(ctx, key) }
	if r, err := storage.SettleRange(ctx, "azstore", b.URL(key), off, length, stat); r != nil || err != nil {
		return r, err
	}
	var rng blob.HTTPRange
	if off > 0 || length > 0 {
		rng = blob.HTTPRange{Offset: off, Count: max(length, 0)}
	}
	resp, err := b.cont.NewBlobClient(b.root+key).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return storage.UnsatisfiableRange(ctx, "azstore", b.URL(key), off, stat)
		}
		return nil, b.fail("get", key, err)
	}
	if rng != (blob.HTTPRange{}) && resp.ContentRange == nil {
		resp.Body.Close()
		return nil, storage.Permanent(fmt.Errorf("azstore: get %s: asked for a range but the store answered without Content-Range", b.URL(key)))
	}
	if rng == (blob.HTTPRange{}) && resp.ContentLength != nil {
		// The whole blob: the response says what Stat would (its
		// properties' length, time and ETag), so a caller that wants
		// them makes no second request.
		info := storage.ObjectInfo{Key: key, Size: *resp.ContentLength}
		if resp.LastModified != nil {
			info.ModTime = *resp.LastModified
		}
		if resp.ETag != nil {
			info.ETag = string(*resp.ETag)
		}
		return storage.NewBodyReaderInfo(ctx, resp.Body, "azstore", b.URL(key), info), nil
	}
	return storage.NewBodyReader(ctx, resp.Body, "azstore", b.URL(key)), nil
}

// List implements storage.Bucket with paged flat blob listings.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error {
	if b.closed.Load() {
		return fmt.Errorf("azstore: list %s: %w", b.URL(prefix), storage.ErrClosed)
	}
	full := b.root + prefix
	lo := &container.ListBlobsFlatOptions{Prefix: &full}
	if b.page > 0 {
		lo.MaxResults = &b.page
	}
	pager := b.cont.NewListBlobsFlatPager(lo)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return b.fail("list", prefix, err)
		}
		for _, item := range page.Segment.BlobItems {
			if item == nil || item.Name == nil {
				continue
			}
			key, ok := strings.CutPrefix(*item.Name, b.root)
			if !ok || key == "" || strings.HasSuffix(key, "/") {
				continue
			}
			info := storage.ObjectInfo{Key: key}
			if p := item.Properties; p != nil {
				if p.ContentLength != nil {
					info.Size = *p.ContentLength
				}
				if p.LastModified != nil {
					info.ModTime = *p.LastModified
				}
				if p.ETag != nil {
					info.ETag = string(*p.ETag)
				}
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements storage.Bucket.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.check("delete", key); err != nil {
		return err
	}
	if _, err := b.cont.NewBlobClient(b.root+key).Delete(ctx, nil); err != nil {
		return b.fail("delete", key, err)
	}
	return nil
}

// NewWriter implements storage.Bucket with a staged-block upload.
func (b *Bucket) NewWriter(ctx context.Context, key string, opts *storage.WriteOptions) (io.WriteCloser, error) {
	if err := b.check("put", key); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &storage.WriteOptions{}
	}
	ct := opts.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	bs := opts.PartSize
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	bs = max(bs, minBlockSize)
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	up := &blockblob.UploadStreamOptions{
		BlockSize:   bs,
		Concurrency: conc,
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: &ct},
	}
	pr, pw := io.Pipe()
	w := &writer{ctx: ctx, pw: pw, done: make(chan struct{}), b: b, key: key}
	bbc := b.cont.NewBlockBlobClient(b.root + key)
	go func() {
		defer close(w.done)
		if _, err := bbc.UploadStream(ctx, pr, up); err != nil {
			w.err = b.fail("put", key, err)
			pr.CloseWithError(w.err)
			return
		}
		pr.Close()
	}()
	return w, nil
}

// Upload implements storage.Uploader by streaming src through NewWriter.
// Because src can be read again, the retry decorator can repeat a failed
// upload as a whole.
func (b *Bucket) Upload(ctx context.Context, key string, src io.ReaderAt, size int64, opts *storage.WriteOptions) error {
	if size < 0 {
		return fmt.Errorf("azstore: put %s: negative size %d", b.URL(key), size)
	}
	w, err := b.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, io.NewSectionReader(src, 0, size)); err != nil {
		w.(*writer).abandon(err)
		return fmt.Errorf("azstore: put %s: %w", b.URL(key), err)
	}
	return w.Close()
}

// writer feeds an upload running in its own goroutine through a pipe.
type writer struct {
	ctx    context.Context
	pw     *io.PipeWriter
	done   chan struct{}
	err    error // the upload's result, set before done is closed
	b      *Bucket
	key    string
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("azstore: write %s: writer closed", w.b.URL(w.key))
	}
	return w.pw.Write(p)
}

// Close commits the upload and waits for it. If the writer's context was
// cancelled the upload is abandoned (its blocks are never committed) and
// nothing appears.
func (w *writer) Close() error {
	if w.closed {
		return fmt.Errorf("azstore: close %s: writer already closed", w.b.URL(w.key))
	}
	if err := w.ctx.Err(); err != nil {
		w.abandon(err)
		return fmt.Errorf("azstore: put %s: %w", w.b.URL(w.key), err)
	}
	w.closed = true
	w.pw.Close()
	<-w.done
	return w.err
}

// abandon ends the upload without committing it: the staged blocks are
// never committed, so nothing appears.
func (w *writer) abandon(err error) {
	if w.closed {
		return
	}
	w.closed = true
	w.pw.CloseWithError(err)
	<-w.done
}

// fail turns an SDK error from op on key into the error the storage
// package documents: an HTTP failure becomes a *storage.HTTPError wrapping
// *azcore.ResponseError; anything else is wrapped with the operation and
// URL.
func (b *Bucket) fail(op, key string, err error) error {
	u := b.URL(key)
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("azstore: %s %s: %w", op, u, err)
	}
	he := &storage.HTTPError{Op: op, URL: u, StatusCode: re.StatusCode, Code: re.ErrorCode, Err: err}
	if re.RawResponse != nil {
		he.RetryAfter = storage.ParseRetryAfter(re.RawResponse.Header.Get("Retry-After"), time.Now())
	}
	switch {
	case re.ErrorCode == "ContainerNotFound":
		he.Err = fmt.Errorf("container %q does not exist: %w", b.name, err)
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		he.Err = fmt.Errorf("request with %s; check that this identity may access container %q (role Storage Blob Data Reader/Contributor, SAS permissions and expiry): %w",
			b.creds, b.name, err)
	}
	return he
}
