package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GCSConfig configures a Google Cloud Storage store.
type GCSConfig struct {
	Bucket string
	// Prefix is prepended to every name, with a slash: Prefix "apron/prod"
	// stores "x/y" as "apron/prod/x/y". Empty means the bucket's root.
	Prefix string
	// CredentialsFile is a service account key file. Empty means
	// Application Default Credentials, or no authentication when Endpoint is
	// set (an emulator).
	CredentialsFile string
	// Endpoint overrides the JSON API endpoint, e.g.
	// "http://127.0.0.1:4443/storage/v1/" for fake-gcs-server. The
	// STORAGE_EMULATOR_HOST environment variable ("127.0.0.1:4443") does the
	// same inside the client library.
	Endpoint string
	// ChunkSize is the upload chunk: objects up to this size are sent in
	// one request, bigger ones as a resumable upload in chunks of this size
	// (rounded up to 256 KiB by the library). Each upload buffers one chunk.
	ChunkSize int
	// MaxBufferBytes: a Put without PutOptions.CRC32C must be read whole
	// before the upload starts, as the CRC32C is sent up front. Up to this
	// size it is read into memory; larger (or of unknown size) it is spooled
	// to a temporary file in SpoolDir.
	MaxBufferBytes int64
	// SpoolDir holds those temporary files; empty means os.TempDir().
	SpoolDir string
	// MaxAttempts bounds the library's retries of idempotent calls
	// (including uploads with MustNotExist); 0 keeps the library default.
	MaxAttempts int
	// OnAttemptError, if set, is called with every error of a request the
	// library retries by itself (which callers would otherwise never see:
	// an outage shows only once every attempt failed), with the
	// library's name of the operation. Answers are not failures: a
	// request answered "not found" or "precondition failed" (ErrNotFound,
	// ErrExists) is not reported.
	OnAttemptError func(op string, err error)
	// ChunkTransferTimeout bounds one chunk's transfer of a resumable
	// upload: a stalled request is cut and retried; 0: 30s.
	ChunkTransferTimeout time.Duration
}

// DefaultGCSConfig returns the defaults for the tuning fields.
func DefaultGCSConfig() GCSConfig {
	return GCSConfig{ChunkSize: 8 << 20, MaxBufferBytes: 64 << 20, MaxAttempts: 5, ChunkTransferTimeout: 30 * time.Second}
}

// Validate checks the configuration.
func (c GCSConfig) Validate() error {
	if c.Bucket == "" {
		return errors.New("objstore: gcs: bucket is required")
	}
	if p := strings.Trim(c.Prefix, "/"); p != "" {
		if err := ValidateName(p); err != nil {
			return fmt.Errorf("objstore: gcs: prefix: %w", err)
		}
	}
	if c.ChunkSize < 0 || c.MaxBufferBytes < 0 || c.MaxAttempts < 0 {
		return errors.New("objstore: gcs: negative ChunkSize, MaxBufferBytes or MaxAttempts")
	}
	return nil
}

// GCS is a Store in a Google Cloud Storage bucket, through
// cloud.google.com/go/storage over the JSON API.
//
// Uploads: with MustNotExist the object is written under the precondition
// DoesNotExist, which makes the upload idempotent, so the library retries it
// on transient errors (default policy RetryIdempotent); without it an upload
// overwrites and is not retried. Every upload sends its CRC32C
// (SendCRC32C), so GCS rejects a corrupted upload. An object exists only
// once Writer.Close returns nil; a Put that fails or is cancelled cancels
// the upload's context first, which aborts it without creating the object.
//
// A retried upload whose first attempt did land answers ErrExists: compare
// Attributes' CRC32C with your own to tell your earlier attempt apart.
//
// Delete is not retried by the library (no precondition); it is idempotent
// here (a missing object is nil), so callers may retry it.
type GCS struct {
	cfg    GCSConfig
	client *storage.Client
	bucket *storage.BucketHandle
	prefix string // "" or "p/"
	closed atomic.Bool
}

var _ Store = (*GCS)(nil)

// NewGCS makes a client for the bucket. It makes no request: a wrong bucket
// or missing permission shows on the first operation.
func NewGCS(ctx context.Context, cfg GCSConfig) (*GCS, error) {
	def := DefaultGCSConfig()
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = def.ChunkSize
	}
	if cfg.MaxBufferBytes == 0 {
		cfg.MaxBufferBytes = def.MaxBufferBytes
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = def.MaxAttempts
	}
	if cfg.ChunkTransferTimeout == 0 {
		cfg.ChunkTransferTimeout = def.ChunkTransferTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []option.ClientOption{storage.WithJSONReads()}
	if cfg.CredentialsFile != "" {
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, cfg.CredentialsFile))
	}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint), storage.WithDisabledClientMetrics())
		if cfg.CredentialsFile == "" {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: gcs client: %w", err)
	}
	shouldRetry := func(err error, rc *storage.RetryContext) bool {
		if cfg.OnAttemptError != nil && err != nil && !isAnswer(err) {
			op := "request"
			if rc != nil && rc.Operation != "" {
				op = rc.Operation
			}
			cfg.OnAttemptError(op, err)
		}
		return storage.ShouldRetry(err)
	}
	client.SetRetry(
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithBackoff(gax.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}),
		storage.WithMaxAttempts(cfg.MaxAttempts),
		storage.WithErrorFuncWithContext(shouldRetry),
	)
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &GCS{cfg: cfg, client: client, bucket: client.Bucket(cfg.Bucket), prefix: prefix}, nil
}

// isAnswer says whether err is the store's answer rather than a failure:
// not found (a probe of a missing object, a lookup before an upload) or a
// failed precondition (an object that exists).
func isAnswer(err error) bool {
	m := mapGCSError("", "", err)
	return errors.Is(m, ErrNotFound) || errors.Is(m, ErrExists)
}

// mapGCSError turns not-found and precondition failures into ErrNotFound
// and ErrExists, keeping the original error in the chain.
func mapGCSError(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var sentinel error
	var gerr *googleapi.Error
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		sentinel = ErrNotFound
	case errors.As(err, &gerr) && gerr.Code == http.StatusNotFound:
		sentinel = ErrNotFound
	case errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed:
		sentinel = ErrExists
	default:
		if s, ok := status.FromError(err); ok {
			switch s.Code() {
			case codes.NotFound:
				sentinel = ErrNotFound
			case codes.FailedPrecondition, codes.AlreadyExists:
				sentinel = ErrExists
			}
		}
	}
	if sentinel != nil {
		return fmt.Errorf("objstore: gcs %s %q: %w: %w", op, name, sentinel, err)
	}
	return fmt.Errorf("objstore: gcs %s %q: %w", op, name, err)
}

func (g *GCS) check() error {
	if g.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Put uploads the object (see the type's comment). When opts.CRC32C is
// given the data is streamed; otherwise it is first read whole, into memory
// up to MaxBufferBytes or into a temporary file beyond, to compute the CRC32C
// that is sent with the upload.
func (g *GCS) Put(ctx context.Context, name string, data io.Reader, size int64, opts PutOptions) error {
	if err := checkPut(name, data); err != nil {
		return err
	}
	if err := g.check(); err != nil {
		return err
	}
	if opts.CRC32C != nil {
		return g.upload(ctx, name, data, size, *opts.CRC32C, opts.MustNotExist)
	}
	if size >= 0 && size <= g.cfg.MaxBufferBytes {
		b, err := readAllLimited(ctxReader{ctx, data}, size)
		if err != nil {
			return fmt.Errorf("objstore: gcs put %q: %w", name, err)
		}
		crc := CRC32C(b)
		if err := checkSizeCRC(name, size, int64(len(b)), nil, crc); err != nil {
			return err
		}
		return g.upload(ctx, name, bytes.NewReader(b), int64(len(b)), crc, opts.MustNotExist)
	}
	// Spool to a temporary file.
	f, err := os.CreateTemp(g.cfg.SpoolDir, "apron-gcs-put-*")
	if err != nil {
		return fmt.Errorf("objstore: gcs put %q: spool: %w", name, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := crc32.New(castagnoli)
	src := io.Reader(ctxReader{ctx, data})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if err != nil {
		return fmt.Errorf("objstore: gcs put %q: spool: %w", name, err)
	}
	if err := checkSizeCRC(name, size, n, nil, 0); err != nil {
		return err
	}
	return g.upload(ctx, name, io.NewSectionReader(f, 0, n), n, h.Sum32(), opts.MustNotExist)
}

// chunkSize picks the Writer's ChunkSize: the configured one, or less for a
// small object of known size (so a small upload does not buffer a whole
// chunk). The result is > 0, so uploads can always be retried.
func (g *GCS) chunkSize(size int64) int {
	const quantum = 256 << 10
	if size >= 0 && size < int64(g.cfg.ChunkSize) {
		return int((size/quantum + 1) * quantum)
	}
	return g.cfg.ChunkSize
}

func (g *GCS) upload(ctx context.Context, name string, src io.Reader, size int64, crc uint32, mustNotExist bool) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	obj := g.bucket.Object(g.prefix + name)
	if mustNotExist {
		obj = obj.If(storage.Conditions{DoesNotExist: true})
	}
	w := obj.NewWriter(wctx)
	w.ChunkSize = g.chunkSize(size)
	w.ChunkTransferTimeout = g.cfg.ChunkTransferTimeout
	w.SendCRC32C = true
	w.CRC32C = crc
	w.ContentType = "application/octet-stream"

	abort := func(err error) error {
		cancel() // cancelling before Close aborts the upload: no object
		_ = w.Close()
		return err
	}
	h := crc32.New(castagnoli)
	r := io.Reader(ctxReader{ctx, src})
	if size >= 0 {
		r = io.LimitReader(r, size+1)
	}
	n, err := io.Copy(w, io.TeeReader(r, h))
	if err != nil {
		return abort(mapGCSError("put", name, err))
	}
	if err := checkSizeCRC(name, size, n, &crc, h.Sum32()); err != nil {
		return abort(err)
	}
	if err := ctx.Err(); err != nil {
		return abort(fmt.Errorf("objstore: gcs put %q: %w", name, err))
	}
	if err := w.Close(); err != nil {
		return mapGCSError("put", name, err)
	}
	return nil
}

// Get returns a reader over the object; the reader stays tied to ctx. The
// library checks the CRC32C of a whole-object read.
func (g *GCS) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	return g.GetRange(ctx, name, 0, -1)
}

// GetRange returns a reader over part of the object (see Store).
func (g *GCS) GetRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if err := checkRange(name, off); err != nil {
		return nil, err
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	r, err := g.bucket.Object(g.prefix+name).NewRangeReader(ctx, off, n)
	if err != nil {
		var gerr *googleapi.Error
		if errors.As(err, &gerr) && gerr.Code == http.StatusRequestedRangeNotSatisfiable {
			// Past the end: an empty read, as in the other stores; but the
			// object must exist.
			if _, aerr := g.Attributes(ctx, name); aerr != nil {
				return nil, aerr
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, mapGCSError("get", name, err)
	}
	return r, nil
}

// List returns the objects under the prefix, sorted. Objects whose names
// (after the store prefix) are not valid names, such as "folder/"
// placeholders made by other tools, are skipped.
func (g *GCS) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	q := &storage.Query{Prefix: g.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "CRC32C", "Created"}); err != nil {
		return nil, err
	}
	var out []ObjectInfo
	it := g.bucket.Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, mapGCSError("list", prefix, err)
		}
		name, ok := strings.CutPrefix(a.Name, g.prefix)
		if !ok || ValidateName(name) != nil {
			continue
		}
		out = append(out, ObjectInfo{Name: name, Attrs: Attrs{Size: a.Size, CRC32C: a.CRC32C, Created: a.Created}})
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the object; a missing one is not an error.
func (g *GCS) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := g.check(); err != nil {
		return err
	}
	err := g.bucket.Object(g.prefix + name).Delete(ctx)
	if err := mapGCSError("delete", name, err); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// Attributes returns the object's size, CRC32C and creation time.
func (g *GCS) Attributes(ctx context.Context, name string) (Attrs, error) {
	if err := ValidateName(name); err != nil {
		return Attrs{}, err
	}
	if err := g.check(); err != nil {
		return Attrs{}, err
	}
	a, err := g.bucket.Object(g.prefix + name).Attrs(ctx)
	if err != nil {
		return Attrs{}, mapGCSError("attributes", name, err)
	}
	return Attrs{Size: a.Size, CRC32C: a.CRC32C, Created: a.Created}, nil
}

// URI returns "gs://bucket/prefix/name".
func (g *GCS) URI(name string) string {
	return "gs://" + g.cfg.Bucket + "/" + g.prefix + name
}

// Close closes the client. Idempotent.
func (g *GCS) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	return g.client.Close()
}
