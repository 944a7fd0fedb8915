package buffer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is wrapped by Open's error when another process has the data
// dir open.
var ErrLocked = errors.New("data dir in use")

// dirLock is an exclusive lock on <data-dir>/LOCK, held while the buffer is
// open: two servers appending to one WAL would corrupt it. The kernel drops
// the lock when the process dies, so a crash leaves nothing to clean up.
type dirLock struct{ f *os.File }

func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("buffer: opening %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("buffer: %w: %s is locked by another apron process (pid %s); stop it or choose another --data-dir",
				ErrLocked, dir, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("buffer: locking %s: %w", path, err)
	}
	// The pid is only for the message above; the lock is the flock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing drops the flock
	l.f = nil
	return err
}
