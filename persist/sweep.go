package persist

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apron-db/apron/objstore"
)

// Deleting persisted files (of dropped tables, of expired rows) takes two
// steps, in this order:
//
//  0. NoteUnlisted: the files to delete go in the journal of unlisted
//     objects (unlisted.go), so that a crash after step 1 leaves
//     orphans that startup knows of.
//  1. RewriteSegmentFile: the segment file of each segment that loses
//     files is replaced (one atomic object write) by one that lists only
//     the files it keeps. From then on no reader, and no later startup,
//     finds the others.
//  2. DeleteFile: the files it no longer lists are deleted, once no query
//     that could still read them runs (the buffer knows).
//
// A crash between the two leaves unlisted files, which the next startup
// deletes as orphans (RemoveOrphans); a crash before the first leaves
// everything as it was, and the buffer finds the same files to delete
// again. So the files a table's readers see are always those of its
// segment files: never a deleted one, never one brought back.

// RewriteSegmentFile replaces seg's segment file with one listing seg's
// files (a subset of those its segment file lists) and their rows.
func (s *Store) RewriteSegmentFile(ctx context.Context, seg Segment) error {
	seg.Rows = 0
	for _, f := range seg.Files {
		seg.Rows += f.Rows
	}
	data, err := EncodeSegmentFile(seg)
	if err != nil {
		return fmt.Errorf("persist: encoding the segment file of segment %d: %w", seg.ID, err)
	}
	crc := objstore.CRC32C(data)
	return s.objects.Put(ctx, SegmentObject(seg.ID), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CRC32C: &crc})
}

// DeleteFile deletes a Parquet file that no segment file lists any more;
// one already gone is no error. The caller then takes it out of the
// journal of unlisted objects (SettleUnlisted), once for all the files
// it deletes.
func (s *Store) DeleteFile(ctx context.Context, path string) error {
	if err := ValidateFilePath(path); err != nil {
		return err
	}
	return s.objects.Delete(ctx, path)
}

// ValidateFilePath checks that path names a Parquet file of the layout
// (dbs/…/….parquet), so that nothing else is ever deleted as one.
func ValidateFilePath(path string) error {
	if len(path) <= len(DBsPrefix)+len(".parquet") || path[:len(DBsPrefix)] != DBsPrefix || path[len(path)-len(".parquet"):] != ".parquet" {
		return fmt.Errorf("persist: %q is not a Parquet file of the object layout", path)
	}
	return nil
}
