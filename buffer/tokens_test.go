package buffer

import (
	"context"
	"crypto/sha256"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
)

// TestTokensTravelToStore: a token change with no segment to persist
// still reaches the object store's newest catalog, and a new data dir on
// the same store starts with the token (and without a revoked one in
// force).
func TestTokensTravelToStore(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	store := objstore.NewMemory()
	b, err := Open(persistConfig(t, mem, store))
	if err != nil {
		t.Fatal(err)
	}
	tok := &catalog.Token{ID: "abc123", Hash: sha256.Sum256([]byte("x")), Admin: true, Created: time.Now()}
	if err := b.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{tok}}); err != nil {
		t.Fatal(err)
	}
	newest := func() string {
		objs, err := store.List(context.Background(), "catalogs/")
		if err != nil || len(objs) == 0 {
			return ""
		}
		r, err := store.Get(context.Background(), objs[len(objs)-1].Name)
		if err != nil {
			return ""
		}
		defer r.Close()
		data, _ := io.ReadAll(r)
		return string(data)
	}
	waitFor(t, "the catalog with the token in the store", func() bool { return strings.Contains(newest(), `"abc123"`) })
	second := &catalog.Token{ID: "def456", Hash: sha256.Sum256([]byte("y")), Admin: true, Created: time.Now()}
	if err := b.ChangeTokens(catalog.TokenChange{Add: []*catalog.Token{second}}); err != nil {
		t.Fatal(err)
	}
	if err := b.ChangeTokens(catalog.TokenChange{Revoke: []string{"abc123"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revocation in the store", func() bool { return strings.Contains(newest(), `"revoked"`) })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := Open(persistConfig(t, mem, store)) // a new data dir
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	got, ok := b2.Catalog().Snapshot().Token("abc123")
	if !ok || got.Revoked.IsZero() {
		t.Fatalf("the new data dir's token abc123: %+v, want it revoked", got)
	}
	if _, ok := b2.Catalog().Snapshot().Token("def456"); !ok {
		t.Fatal("the new data dir lacks token def456")
	}
}
