package flightsvc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/protobuf/proto"

	"github.com/apron-db/apron/buffer"
	"github.com/apron-db/apron/catalog"
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
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.sql.mem))
	if err != nil {
		return statusOf(fmt.Errorf("%w: reading the stream's schema: %w", errInvalidRequest, err))
	}
	defer rdr.Release()
	ack := func(res buffer.WriteResult, total int64) error {
		md, err := proto.Marshal(&apronpb.PutResultMetadata{RowsWritten: res.Rows, TotalRowsWritten: total, Sequence: res.Sequence})
		if err != nil {
			return err
		}
		return stream.Send(&flight.PutResult{AppMetadata: md})
	}
	_, err = s.sql.ingest(stream.Context(), db, table, catalog.WriteOptions{IfNotExists: catalog.CreateTable, IfExists: catalog.AppendIfExists}, rdr, ack)
	return statusOf(err)
}

// pathInfo answers GetFlightInfo for [database, table]: the table's schema
// and an endpoint per buffered segment that holds it.
func (s *Service) pathInfo(d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	db, table, err := pathTarget(d)
	if err != nil {
		return nil, err
	}
	t, ok := s.sql.wb.Catalog().Table(db, table)
	if !ok {
		return nil, fmt.Errorf("%w: table %q in database %q", catalog.ErrTableNotFound, table, db)
	}
	info := &flight.FlightInfo{
		FlightDescriptor: d,
		Schema:           flight.SerializeSchema(t.ArrowSchema(), s.sql.mem),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
	for _, seg := range s.sql.wb.Segments() {
		if !seg.HasTable(db, table) {
			continue
		}
		tkt, err := encodeTicket(&apronpb.Ticket{Kind: &apronpb.Ticket_Buffer{Buffer: &apronpb.BufferTicket{
			Database: db, Table: table, SegmentId: seg.ID(),
		}}})
		if err != nil {
			return nil, err
		}
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tkt}})
	}
	return info, nil
}

// doGetBuffer streams one table's rows buffered in one segment, in the
// table's current schema.
func (s *Service) doGetBuffer(ctx context.Context, t *apronpb.BufferTicket, stream flight.FlightService_DoGetServer) error {
	tbl, ok := s.sql.wb.Catalog().Table(t.Database, t.Table)
	if !ok {
		return fmt.Errorf("%w: table %q in database %q", catalog.ErrTableNotFound, t.Table, t.Database)
	}
	seg, ok := s.sql.wb.Segment(t.SegmentId)
	if !ok {
		return fmt.Errorf("%w: segment %d is no longer buffered; call GetFlightInfo again", errNotFound, t.SegmentId)
	}
	schema := tbl.ArrowSchema()
	chunks := seg.Snapshot(t.Database, t.Table)
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
		rec, err := buffer.Project(c, schema, s.sql.mem)
		if err != nil {
			return err
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// listFlights lists every table as a PATH flight.
func (s *Service) listFlights(stream flight.FlightService_ListFlightsServer) error {
	for _, d := range s.sql.wb.Catalog().Databases() {
		for _, t := range d.TableList() {
			info, err := s.pathInfo(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{d.Name, t.Name}})
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
