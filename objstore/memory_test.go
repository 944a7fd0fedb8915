package objstore_test

import (
	"testing"

	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/objstore/objstoretest"
)

func TestMemorySuite(t *testing.T) {
	objstoretest.RunSuite(t, func(t *testing.T) objstore.Store {
		s := objstore.NewMemory()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
