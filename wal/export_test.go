package wal

// StageCap is the capacity of the writer's direct-I/O staging buffer.
// Read it only once the last Append's Wait has returned (the flush
// goroutine owns the buffer).
func (w *Writer) StageCap() int { return cap(w.stage) }
