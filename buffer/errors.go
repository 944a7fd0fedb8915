package buffer

import "errors"

var (
	// ErrBufferFull is wrapped by the error of a write refused because the
	// buffer holds --buffer-mem-limit bytes.
	ErrBufferFull = errors.New("buffer full")
	// ErrClosed is returned by writes to a closed WriteBuffer.
	ErrClosed = errors.New("buffer: closed")
	// ErrWAL is wrapped by errors of the WAL under a write: the write is not
	// acknowledged, and after a failed fsync no later write is either.
	ErrWAL = errors.New("wal failure")
	// errPartDropped ends the persist of a part whose table was dropped
	// during it: the part is left out of the segment, which is not a
	// failure.
	errPartDropped = errors.New("buffer: table dropped during its persist")
)
