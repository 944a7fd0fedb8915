package flightsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/objstore"
	"github.com/apron-db/apron/persist"
	apronpb "github.com/apron-db/apron/proto"
)

// ticketPrefix starts every ticket of Apron's own, so that DoGet tells them
// from Flight SQL tickets (serialized protobuf Any messages) for sure.
var ticketPrefix = []byte("apron:")

func encodeTicket(t *apronpb.Ticket) ([]byte, error) {
	b, err := proto.Marshal(t)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(nil), ticketPrefix...), b...), nil
}

// decodeTicket returns the ticket if b is one of Apron's own.
func decodeTicket(b []byte) (*apronpb.Ticket, bool, error) {
	if !bytes.HasPrefix(b, ticketPrefix) {
		return nil, false, nil
	}
	var t apronpb.Ticket
	if err := proto.Unmarshal(b[len(ticketPrefix):], &t); err != nil {
		return nil, true, fmt.Errorf("%w: malformed ticket: %w", errInvalidRequest, err)
	}
	return &t, true, nil
}

// pathTarget reads a PATH descriptor [database, table].
func pathTarget(d *flight.FlightDescriptor) (string, string, error) {
	if len(d.Path) != 2 {
		return "", "", fmt.Errorf("%w: a PATH descriptor must be [database, table], got %d elements %q", errInvalidRequest, len(d.Path), d.Path)
	}
	return d.Path[0], d.Path[1], nil
}

// putPath is a plain Flight DoPut into [database, table]: the table is
// created by its first write and grows new columns as they arrive. Each
// batch is answered, once durable, with a PutResult whose app_metadata is a
// PutResultMetadata.
func (s *Service) putPath(stream flight.FlightService_DoPutServer, d *flight.FlightDescriptor) error {
	db, table, err := pathTarget(d)
	if err != nil {
		return statusOf(err)
	}
	rdr, err := newPutReader(stream, s.bodies, ipc.WithAllocator(s.sql.mem))
	if err != nil {
		return statusOf(fmt.Errorf("%w: reading the stream's schema: %w", errInvalidRequest, err))
	}
	ack := func(res buffer.WriteResult, total int64) error {
		md, err := proto.Marshal(&apronpb.PutResultMetadata{RowsWritten: res.Rows, TotalRowsWritten: total, Sequence: res.Sequence})
		if err != nil {
			return err
		}
		return stream.Send(&flight.PutResult{AppMetadata: md})
	}
	// ingestAcked releases rdr.
	_, err = s.sql.ingestAcked(stream.Context(), db, table, catalog.WriteOptions{IfNotExists: catalog.CreateTable, IfExists: catalog.AppendIfExists}, rdr, ack)
	return statusOf(err)
}

// pathInfo answers GetFlightInfo for [database, table].
func (s *Service) pathInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	db, table, err := pathTarget(d)
	if err != nil {
		return nil, err
	}
	return s.tableInfo(ctx, d, db, table, math.MinInt64, math.MaxInt64)
}

// decodeTableRange reads a CMD descriptor of Apron's own (prefix
// "apron:"), if d is one.
func decodeTableRange(d *flight.FlightDescriptor) (*apronpb.TableRange, bool, error) {
	if d.GetType() != flight.DescriptorCMD || !bytes.HasPrefix(d.Cmd, ticketPrefix) {
		return nil, false, nil
	}
	var r apronpb.TableRange
	if err := proto.Unmarshal(d.Cmd[len(ticketPrefix):], &r); err != nil {
		return nil, true, fmt.Errorf("%w: malformed apron command: %w", errInvalidRequest, err)
	}
	return &r, true, nil
}

// rangeInfo answers GetFlightInfo for a TableRange command.
func (s *Service) rangeInfo(ctx context.Context, d *flight.FlightDescriptor, r *apronpb.TableRange) (*flight.FlightInfo, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if r.MinTime != nil {
		lo = r.GetMinTime()
	}
	if r.MaxTime != nil {
		hi = r.GetMaxTime()
	}
	if lo > hi {
		return nil, fmt.Errorf("%w: time range [%d, %d] is empty", errInvalidRequest, lo, hi)
	}
	return s.tableInfo(ctx, d, r.GetDatabase(), r.GetTable(), lo, hi)
}

// tableInfo is a table's schema and its endpoints that may hold rows in
// [lo, hi]: one per buffered segment (streamed from memory by this server)
// and one per persisted Parquet file (streamed by this server too, and
// described in the endpoint's app_metadata, a ParquetReference, so that a
// client may read the file from the object store itself). Buffered and
// persisted endpoints come from one buffer.View: each row is in exactly one.
func (s *Service) tableInfo(ctx context.Context, d *flight.FlightDescriptor, db, table string, lo, hi int64) (*flight.FlightInfo, error) {
	callFrom(ctx).setDatabase(db)
	if err := auth.FromContext(ctx).Read(db); err != nil {
		return nil, err
	}
	// The table as the View has it (a replace may make another of the
	// name at any time).
	v := s.sql.wb.View()
	defer v.Release()
	t, ok := v.Catalog().Table(db, table)
	if !ok {
		return nil, fmt.Errorf("%w: table %q in database %q", catalog.ErrTableNotFound, table, db)
	}
	info := &flight.FlightInfo{
		FlightDescriptor: d,
		Schema:           flight.SerializeSchema(t.ArrowSchema(), s.sql.mem),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
	owner := auth.FromContext(ctx).ID()
	lo = max(lo, v.Cutoff(db)) // expired rows are not the table's (retention.go)
	bounded := lo != math.MinInt64 || hi != math.MaxInt64
	for _, seg := range v.Buffered {
		if !v.HasTable(seg, db, table) {
			continue
		}
		if bounded && !overlaps(v.Chunks(seg, db, table), lo, hi) {
			continue
		}
		tkt, err := encodeTicket(&apronpb.Ticket{Kind: &apronpb.Ticket_Buffer{Buffer: &apronpb.BufferTicket{
			Database: db, Table: table, SegmentId: seg.ID(),
		}}, TokenId: owner})
		if err != nil {
			return nil, err
		}
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tkt}})
	}
	for _, ps := range v.Persisted {
		for _, f := range ps.Files {
			if f.Database != db || f.Table != table || f.MaxTime < lo || f.MinTime > hi {
				continue
			}
			tkt, err := encodeTicket(&apronpb.Ticket{Kind: &apronpb.Ticket_Parquet{Parquet: &apronpb.ParquetTicket{
				Database: db, Table: table, SegmentId: ps.ID, Path: f.Path,
			}}, TokenId: owner})
			if err != nil {
				return nil, err
			}
			md, err := proto.Marshal(&apronpb.ParquetReference{Uri: f.URI, Size: f.Size, Rows: f.Rows,
				MinTime: f.MinTime, MaxTime: f.MaxTime, SegmentId: ps.ID, Partition: f.Partition, Crc32C: f.CRC32C})
			if err != nil {
				return nil, err
			}
			info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tkt}, AppMetadata: md})
		}
	}
	return info, nil
}

// overlaps says whether any chunk has rows in [lo, hi]; it releases them.
func overlaps(chunks []buffer.Chunk, lo, hi int64) bool {
	hit := false
	for _, c := range chunks {
		if c.Rec.NumRows() > 0 && c.MaxTime >= lo && c.MinTime <= hi {
			hit = true
		}
		c.Rec.Release()
	}
	return hit
}

// doGetBuffer streams one table's rows buffered in one segment, in the
// table's current schema.
func (s *Service) doGetBuffer(ctx context.Context, t *apronpb.BufferTicket, stream flight.FlightService_DoGetServer) error {
	rpc := callFrom(ctx)
	rpc.setDatabase(t.Database)
	who := auth.FromContext(ctx)
	if err := who.Read(t.Database); err != nil {
		return err
	}
	v := s.sql.wb.View()
	defer v.Release()
	tbl, ok := v.Catalog().Table(t.Database, t.Table)
	if !ok {
		return fmt.Errorf("%w: table %q in database %q", catalog.ErrTableNotFound, t.Table, t.Database)
	}
	var seg *buffer.Segment
	for _, b := range v.Buffered {
		if b.ID() == t.SegmentId {
			seg = b
		}
	}
	if seg == nil {
		// Persisted since the FlightInfo was made: its rows are in the
		// segment's Parquet files now.
		for _, ps := range v.Persisted {
			if ps.ID != t.SegmentId || ps.Compaction != nil {
				continue
			}
			if !slices.ContainsFunc(ps.Files, func(f persist.File) bool { return f.Database == t.Database && f.Table == t.Table }) {
				// Merged with other segments' rows since (compaction):
				// the ticket's rows are no longer a unit of their own.
				return fmt.Errorf("%w: segment %d of table %q in database %q has been compacted since the FlightInfo was made; call GetFlightInfo again", errNotFound, t.SegmentId, t.Table, t.Database)
			}
			return s.streamFiles(ctx, tbl.ArrowSchema(), ps, t.Database, t.Table, v.Cutoff(t.Database), stream)
		}
		return fmt.Errorf("%w: segment %d is neither buffered nor persisted; call GetFlightInfo again", errNotFound, t.SegmentId)
	}
	schema := tbl.ArrowSchema()
	cutoff := v.Cutoff(t.Database)
	chunks := v.Chunks(seg, t.Database, t.Table)
	defer func() {
		for _, c := range chunks {
			c.Rec.Release()
		}
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.sql.mem))
	defer w.Close()
	for _, c := range chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := who.Check(); err != nil {
			return err
		}
		n, err := writeLive(w, c, schema, s.sql.mem, cutoff)
		if err != nil {
			return err
		}
		rpc.sent(n)
	}
	return nil
}

// doGetParquet streams one persisted Parquet file in the table's current
// schema.
func (s *Service) doGetParquet(ctx context.Context, t *apronpb.ParquetTicket, stream flight.FlightService_DoGetServer) error {
	callFrom(ctx).setDatabase(t.Database)
	if err := auth.FromContext(ctx).Read(t.Database); err != nil {
		return err
	}
	tbl, ok := s.sql.wb.Catalog().Table(t.Database, t.Table)
	if !ok {
		return fmt.Errorf("%w: table %q in database %q", catalog.ErrTableNotFound, t.Table, t.Database)
	}
	// The ticket's path is the client's to write: it must be a file of
	// the ticket's table in a persisted segment, or a ticket naming a
	// readable table could fetch any object of the store.
	if !s.persistedFile(t) {
		return fmt.Errorf("%w: no persisted file %q of table %q in database %q in segment %d; call GetFlightInfo again", errNotFound, t.Path, t.Table, t.Database, t.SegmentId)
	}
	// The View is held while the file streams: the buffer deletes no file
	// a View may list (buffer/sweep.go).
	v := s.sql.wb.View()
	defer v.Release()
	cutoff := v.Cutoff(t.Database)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tbl.ArrowSchema()), ipc.WithAllocator(s.sql.mem))
	defer w.Close()
	return s.writeFile(ctx, w, tbl.ArrowSchema(), t.Path, cutoff)
}

// persistedFile says whether t names a file of its table in a persisted
// segment.
func (s *Service) persistedFile(t *apronpb.ParquetTicket) bool {
	for _, ps := range s.sql.wb.Persisted() {
		if ps.ID != t.SegmentId {
			continue
		}
		for _, f := range ps.Files {
			if f.Path == t.Path && f.Database == t.Database && f.Table == t.Table {
				return true
			}
		}
	}
	return false
}

// streamFiles streams the files of one table in a persisted segment.
func (s *Service) streamFiles(ctx context.Context, schema *arrow.Schema, ps persist.Segment, db, table string, cutoff int64, stream flight.FlightService_DoGetServer) error {
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.sql.mem))
	defer w.Close()
	for _, f := range ps.Files {
		if f.Database != db || f.Table != table {
			continue
		}
		if f.MaxTime < cutoff {
			continue // expired
		}
		if err := s.writeFile(ctx, w, schema, f.Path, cutoff); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes the rows of a persisted Parquet file to w in schema. The
// file is fetched whole from the object store into a temporary file first:
// Parquet readers seek. Rows older than cutoff are left out.
func (s *Service) writeFile(ctx context.Context, w *flight.Writer, schema *arrow.Schema, path string, cutoff int64) error {
	store := s.sql.wb.Store()
	if store == nil {
		return fmt.Errorf("%w: this server has no object store", errNotFound)
	}
	obj, err := store.Get(ctx, path)
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: parquet file %q is not in the object store", errNotFound, path)
	}
	if err != nil {
		return fmt.Errorf("reading %q from the object store: %w", path, err)
	}
	defer obj.Close()
	tmp, err := os.CreateTemp("", "apron-doget-*.parquet")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, obj); err != nil {
		return fmt.Errorf("fetching %q: %w", path, err)
	}
	pf, err := file.NewParquetReader(tmp)
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, s.sql.mem)
	if err != nil {
		return fmt.Errorf("reading %q: %w", path, err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("reading %q: %w", path, err)
	}
	defer rr.Release()
	who := auth.FromContext(ctx)
	rpc := callFrom(ctx)
	for rr.Next() {
		if err := who.Check(); err != nil {
			return err
		}
		n, err := writeLive(w, buffer.Chunk{Rec: rr.RecordBatch(), MinTime: math.MinInt64}, schema, s.sql.mem, cutoff)
		if err != nil {
			return err
		}
		rpc.sent(n)
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading %q: %w", path, err)
	}
	return nil
}

// listFlights lists every table the caller can read as a PATH flight.
func (s *Service) listFlights(stream flight.FlightService_ListFlightsServer) error {
	ctx := stream.Context()
	who := auth.FromContext(ctx)
	for _, d := range s.sql.wb.Catalog().Databases() {
		if !who.CanRead(d.Name) {
			continue
		}
		for _, t := range d.TableList() {
			info, err := s.pathInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{d.Name, t.Name}})
			if err != nil {
				return err
			}
			if err := stream.Send(info); err != nil {
				return err
			}
		}
	}
	return nil
}
