// Package offheap is a memory.Allocator for memory that lives long and is
// freed exactly: the sealed chunks of the write buffer, which hold most of
// a server's memory until their segment is persisted.
//
// # Why
//
// On the Go heap, every byte of buffered rows counts toward the garbage
// collector's goal: with GOGC=100 the heap may grow to twice the live
// bytes before a collection, so a server buffering 1.3 GB of rows had a
// resident set of 2-2.6 GB, and each collection's cost and pacing
// depended on the buffer's size. Sealed chunks are refcounted Arrow
// buffers, released on every path (tests check it with
// memory.CheckedAllocator), so they need no collector: their memory can
// be taken from the kernel and given back the moment the last reference
// goes.
//
// # How
//
// An allocation of at least MinMapped bytes is an anonymous private
// memory map of its own (Linux: prefaulted with MAP_POPULATE, since it is
// written at once), unmapped by Free: freed memory leaves the resident
// set at once, with none of a C allocator's fragmentation or retention
// (glibc raises its mmap threshold to the size of blocks freed, after
// which same-sized blocks come from arenas that are seldom trimmed).
// Smaller ones, and all on systems without mmap, come from the Go heap
// and are left to the collector; a map that fails (ENOMEM) also falls
// back to the Go heap, remembered so that Free does not unmap it.
//
// The cost of using a buffer after its last Release changes: on the Go
// heap it read stale but valid memory, here it faults. Code that hands
// this allocator's buffers out must keep Arrow's reference counts exact.
package offheap
