package buffer

// boundEncoding says whether Parquet encoding (persists, compactions) is
// to leave a core to other work now (persist/encode_slots.go): while
// writes come in (their acks wait behind an encoder holding every P) and
// the buffer holds less than half of MemLimit. Past that, persistence
// takes every core: the memory it frees is what lets writes go on.
//
// It takes no lock: the segments are those of the published View state
// (viewstate.go), their sizes atomic.
func (b *WriteBuffer) boundEncoding() bool {
	if !b.writesActive() {
		return false
	}
	st := b.viewState.Load()
	if st == nil {
		return true
	}
	used := b.lvc.bytes.Load()
	for _, s := range st.segs {
		used += s.size.Load()
	}
	return used < b.cfg.MemLimit/2
}
