package buffer

// boundEncoding says whether Parquet encoding (persists, compactions) is
// to leave a core to other work now (persist/encode_slots.go): while
// writes come in (their acks wait behind encoders on every core) and
// the buffer holds less than half of MemLimit. Past that, persistence
// takes every core: the memory it frees is what lets writes go on.
//
// Three quarters was tried: one writer at ~1M rows/s with 1.2 GiB of
// 2 GiB buffered had an ack p99 of 5.9-7.1 ms against 8.0-8.3 at half
// (2 cores), but in one of two runs of the peer benchmark 16 writers
// then filled the buffer (RESOURCE_EXHAUSTED) while two segments
// persisted, which in the run at half they did not. A refused write costs
// a client more than a few ms of acknowledgement.
//
// It takes no lock: the segments are those of the published View state
// (viewstate.go), their sizes atomic.
func (b *WriteBuffer) boundEncoding() bool {
	return b.writesActive() && b.bufferedNow() < b.cfg.MemLimit/2
}

// memoryPressing says whether the buffer holds three quarters of
// MemLimit or more: a closed segment waits (a segment closes at half)
// and the open one is past half of its size, so writes are nearing the
// limit, where they wait. The persister then persists before anything
// else (compactions, sweeps: compact_pace.go).
func (b *WriteBuffer) memoryPressing() bool {
	return b.bufferedNow() >= b.cfg.MemLimit/4*3
}

// bufferedNow is the bytes buffered (bufferedLocked) without the lock,
// from the published View state; 0 before there is one.
func (b *WriteBuffer) bufferedNow() int64 {
	st := b.viewState.Load()
	if st == nil {
		return 0
	}
	used := b.lvc.bytes.Load()
	for _, s := range st.segs {
		used += s.size.Load()
	}
	return used
}
