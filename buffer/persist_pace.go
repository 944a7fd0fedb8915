package buffer

// boundEncoding says whether Parquet encoding (persists, compactions) is
// to leave a core to other work now (persist/encode_slots.go): while
// writes come in (their acks wait behind encoders on every core) and
// the buffer holds less than three quarters of MemLimit. Past that,
// persistence takes every core: the memory it frees is what lets writes
// go on, and a quarter of the limit is left for them meanwhile.
//
// Not half: the open segment rolls over at half the limit, so a persist
// of a segment that rolled over on memory always started past half and
// was never bound; one writer at ~1M rows/s with 1.2 GiB of 2 GiB
// buffered had an ack p99 of 8.0-8.3 ms at half, 5.9-7.1 at three
// quarters (2 cores). A write stream faster than persistence (bulk
// loads, 7M rows/s here) reaches three quarters within a second of a
// rollover either way: 45 s of it gave 1.13M rows/s acknowledged at half,
// 1.14M at three quarters.
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
	return used < b.cfg.MemLimit/4*3
}
