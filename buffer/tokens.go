package buffer

import (
	"fmt"
	"path/filepath"

	"github.com/apron-db/apron/catalog"
)

// ChangeTokens makes and revokes API tokens: durably in the data dir's
// catalog file before it returns (catalog.ChangeTokens), then in the
// object store, where the persister uploads the new catalog.
func (b *WriteBuffer) ChangeTokens(ch catalog.TokenChange) error {
	if err := b.cat.ChangeTokens(b.catPath, ch); err != nil {
		return err
	}
	b.kickPersister()
	return nil
}

// ChangeTokensOffline is ChangeTokens on the data dir of a stopped server
// (recovery: an admin token when none is at hand). It fails with ErrLocked
// while a server has the data dir open. The object store learns of the
// change when the server next persists its catalog; the local catalog,
// now newer, is the one the server starts from.
func ChangeTokensOffline(dataDir string, ch catalog.TokenChange) error {
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	path := filepath.Join(dataDir, "catalog.json")
	cat, err := catalog.Load(path, catalog.Limits{})
	if err != nil {
		return fmt.Errorf("buffer: %w", err)
	}
	return cat.ChangeTokens(path, ch)
}
