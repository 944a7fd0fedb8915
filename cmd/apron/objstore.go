package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/apron-db/apron/objstore"
)

// storeFlags choose where closed segments are persisted.
type storeFlags struct {
	kind           string
	gcsBucket      string
	gcsPrefix      string
	gcsCredentials string
	gcsEndpoint    string
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.kind, "object-store", "local", "where closed segments are persisted as Parquet: local (<data-dir>/objects), memory (lost at exit: tests only), gcs, or none (keep everything in memory and in the WAL)")
	fs.StringVar(&s.gcsBucket, "gcs-bucket", "", "with --object-store gcs: the bucket")
	fs.StringVar(&s.gcsPrefix, "gcs-prefix", "", "with --object-store gcs: a prefix for every object name, e.g. apron/prod")
	fs.StringVar(&s.gcsCredentials, "gcs-credentials-file", "", "with --object-store gcs: a service account key file; empty means Application Default Credentials")
	fs.StringVar(&s.gcsEndpoint, "gcs-endpoint", "", "with --object-store gcs: the JSON API endpoint of an emulator, e.g. http://127.0.0.1:4443/storage/v1/ (STORAGE_EMULATOR_HOST works too)")
}

// open returns the store, or nil for none. The caller closes it after the
// buffer. onAttemptError sees the errors a store's client retries by
// itself (GCS).
func (s *storeFlags) open(ctx context.Context, dataDir string, onAttemptError func(op string, err error)) (objstore.Store, error) {
	if s.kind != "gcs" && (s.gcsBucket != "" || s.gcsPrefix != "" || s.gcsCredentials != "" || s.gcsEndpoint != "") {
		return nil, fmt.Errorf("--gcs-* flags are set but --object-store is %q; add --object-store gcs", s.kind)
	}
	switch s.kind {
	case "none":
		return nil, nil
	case "local":
		st, err := objstore.NewLocal(filepath.Join(dataDir, "objects"))
		if err != nil {
			return nil, fmt.Errorf("--object-store local: %w", err)
		}
		return st, nil
	case "memory":
		return objstore.NewMemory(), nil
	case "gcs":
		if s.gcsBucket == "" {
			return nil, fmt.Errorf("--object-store gcs needs --gcs-bucket")
		}
		st, err := objstore.NewGCS(ctx, objstore.GCSConfig{Bucket: s.gcsBucket, Prefix: s.gcsPrefix,
			CredentialsFile: s.gcsCredentials, Endpoint: s.gcsEndpoint, OnAttemptError: onAttemptError})
		if err != nil {
			return nil, fmt.Errorf("--object-store gcs: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("--object-store %q: want local, memory, gcs or none", s.kind)
}

// describe names the store for the ready line: its kind and where it is.
func (s *storeFlags) describe(st objstore.Store) string {
	if st == nil {
		return "none"
	}
	return s.kind + " " + st.URI("")
}
