package persist

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/apron-db/apron/objstore"
)

// Compaction merges persisted files of one table and day into one file.
// Its commit point is one object, the compaction file
//
//	compactions/<generation %020d>.json
//
// which lists the files it replaces and the file it made:
//
//	{
//	  "format_version": 1,
//	  "generation": 3,              // 1, 2, … in the order compactions commit
//	  "min_segment": 1,             // the segments the rows come from
//	  "max_segment": 24,
//	  "replaces": ["dbs/metrics/cpu/2026-11-29/00000000000000000001.parquet", …],
//	  "files": [{"path": "dbs/metrics/cpu/2026-11-29/c00000000000000000003.parquet", …}]
//	}
//
// The steps: the merged file is written and uploaded (MustNotExist), then
// the compaction file. A crash before the compaction file leaves the
// merged file unlisted (an orphan, deleted at startup); after it, startup
// applies the compaction (ApplyCompactions): the replaced files leave the
// listings they were in, the merged one joins, so a table's contents are
// the old files or the new one, never both, never neither. Then, as for
// any file that leaves the listings (sweep.go), the listings that still
// name a replaced file are rewritten (a segment file, or an older
// compaction file whose merged file was merged again), and the replaced
// files are deleted once no query could read them.
//
// In the Index a compaction is a Segment whose Compaction is set: ID is
// its max_segment (so that a drop, which hides the rows of a table below
// a segment, hides the merged rows exactly when it hides all of their
// sources), Files its files.

// CompactionsPrefix is the prefix of compaction files.
const CompactionsPrefix = "compactions/"

const compactionFileVersion = 1

// CompactionObject names the compaction file of generation gen.
func CompactionObject(gen uint64) string { return fmt.Sprintf("%s%020d.json", CompactionsPrefix, gen) }

// CompactedObject names the merged file of generation gen.
func CompactedObject(db, table, partition string, gen uint64) string {
	return fmt.Sprintf("%s%s/%s/%s/c%020d.parquet", DBsPrefix, escapeSegment(db), escapeSegment(table), partition, gen)
}

// Compaction is what a compaction file records.
type Compaction struct {
	Generation uint64   `json:"generation"`
	MinSegment uint64   `json:"min_segment"`
	MaxSegment uint64   `json:"max_segment"`
	Replaces   []string `json:"replaces"`
	Files      []File   `json:"files"`
}

type compactionFile struct {
	FormatVersion int `json:"format_version"`
	Compaction
}

// EncodeCompactionFile returns the compaction file of c.
func EncodeCompactionFile(c Compaction) ([]byte, error) {
	out, err := json.MarshalIndent(compactionFile{FormatVersion: compactionFileVersion, Compaction: c}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// DecodeCompactionFile reads the compaction file stored as object name.
func DecodeCompactionFile(name string, data []byte) (Compaction, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Compaction{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if head.FormatVersion == nil || *head.FormatVersion != compactionFileVersion {
		return Compaction{}, fmt.Errorf("%w %s: format_version %v, this server reads %d", ErrSegmentFile, name, head.FormatVersion, compactionFileVersion)
	}
	var f compactionFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Compaction{}, fmt.Errorf("%w %s: %w", ErrSegmentFile, name, err)
	}
	if g, ok := parseNumbered(name, CompactionsPrefix, ".json"); !ok || g != f.Generation || g == 0 {
		return Compaction{}, fmt.Errorf("%w %s: names generation %d", ErrSegmentFile, name, f.Generation)
	}
	for _, p := range f.Replaces {
		if ValidateFilePath(p) != nil {
			return Compaction{}, fmt.Errorf("%w %s: bad replaced path %q", ErrSegmentFile, name, p)
		}
	}
	for _, pf := range f.Files {
		if ValidateFilePath(pf.Path) != nil || pf.Rows < 0 || pf.Size < 0 {
			return Compaction{}, fmt.Errorf("%w %s: bad file entry %+v", ErrSegmentFile, name, pf)
		}
	}
	return f.Compaction, nil
}

// Segment is the compaction as a listing of the Index.
func (c Compaction) Segment() Segment {
	s := Segment{ID: c.MaxSegment, Files: c.Files, Compaction: &CompactionInfo{Generation: c.Generation, MinSegment: c.MinSegment, Replaces: c.Replaces}}
	for _, f := range c.Files {
		s.Rows += f.Rows
	}
	return s
}

// CompactionInfo marks a Segment of the Index that is a compaction's
// listing rather than a segment file's. It is shared by copies of the
// Segment: never modify it.
type CompactionInfo struct {
	Generation uint64
	MinSegment uint64
	Replaces   []string
}

// Listing names the object that lists seg's files.
func (seg Segment) Listing() string {
	if seg.Compaction != nil {
		return CompactionObject(seg.Compaction.Generation)
	}
	return SegmentObject(seg.ID)
}

// LoadCompactions reads every compaction file, in generation order, with
// the files' URIs filled in.
func (s *Store) LoadCompactions(ctx context.Context) ([]Compaction, error) {
	var out []Compaction
	err := s.readListings(ctx, CompactionsPrefix, "compaction files", func(name string, data []byte) error {
		c, err := DecodeCompactionFile(name, data)
		if err != nil {
			return err
		}
		for i := range c.Files {
			c.Files[i].URI = s.objects.URI(c.Files[i].Path)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Compaction) int { return cmp.Compare(a.Generation, b.Generation) })
	for _, c := range out {
		s.nextGen = max(s.nextGen, c.Generation+1)
	}
	return out, nil
}

// NextGeneration is the generation the next compaction takes.
func (s *Store) NextGeneration() uint64 { return max(s.nextGen, 1) }

// ApplyCompactions returns the listings of segs after comps (in
// generation order): the files each replaces leave the listing they are
// in, its own listing is added. stale lists the listings whose stored
// object still names a replaced file (they must be rewritten), by
// Listing name.
func ApplyCompactions(segs []Segment, comps []Compaction) (out []Segment, stale map[string]bool) {
	out = slices.Clone(segs)
	stale = map[string]bool{}
	for _, c := range comps {
		gone := make(map[string]bool, len(c.Replaces))
		for _, p := range c.Replaces {
			gone[p] = true
		}
		for i, seg := range out {
			if !slices.ContainsFunc(seg.Files, func(f File) bool { return gone[f.Path] }) {
				continue
			}
			seg.Files = slices.DeleteFunc(slices.Clone(seg.Files), func(f File) bool { return gone[f.Path] })
			out[i] = seg
			stale[seg.Listing()] = true
		}
		out = append(out, c.Segment())
	}
	slices.SortStableFunc(out, func(a, b Segment) int { return cmp.Compare(a.ID, b.ID) })
	return out, stale
}

// PutCompactionFile stores the compaction file of c: the commit point of
// the compaction. An existing one with other content is an error. The
// files it replaces go in the journal of unlisted objects first (from
// the commit on, no listing names them: the sweep deletes them, or
// startup if the process dies first), and its merged files leave it
// after.
func (s *Store) PutCompactionFile(ctx context.Context, c Compaction) error {
	data, err := EncodeCompactionFile(c)
	if err != nil {
		return err
	}
	if err := s.NoteUnlisted(c.Replaces...); err != nil {
		return err
	}
	crc := objstore.CRC32C(data)
	if err := s.putImmutable(ctx, CompactionObject(c.Generation), func() io.Reader { return bytes.NewReader(data) }, int64(len(data)), crc, false); err != nil {
		return err
	}
	s.nextGen = max(s.nextGen, c.Generation+1)
	merged := make([]string, len(c.Files))
	for i, f := range c.Files {
		merged[i] = f.Path
	}
	s.SettleUnlisted(merged...)
	return nil
}

// RewriteListing replaces the object listing seg's files (a segment file
// or a compaction file) with one listing the files seg has now.
func (s *Store) RewriteListing(ctx context.Context, seg Segment) error {
	if seg.Compaction == nil {
		return s.RewriteSegmentFile(ctx, seg)
	}
	c := Compaction{Generation: seg.Compaction.Generation, MinSegment: seg.Compaction.MinSegment, MaxSegment: seg.ID,
		Replaces: seg.Compaction.Replaces, Files: seg.Files}
	data, err := EncodeCompactionFile(c)
	if err != nil {
		return err
	}
	crc := objstore.CRC32C(data)
	return s.objects.Put(ctx, CompactionObject(c.Generation), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{CRC32C: &crc})
}

// errCompactionInput is wrapped when an input file cannot be read.
var errCompactionInput = errors.New("persist: compaction input")
