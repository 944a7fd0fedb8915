package flightsvc

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"

	"github.com/apron-db/apron/auth"
	"github.com/apron-db/apron/catalog"
	"github.com/apron-db/apron/query"
)

// tableType is the one table type Apron has.
const tableType = "TABLE"

// infoForCommand answers GetFlightInfo for a metadata command: one endpoint
// on this server whose ticket is the command itself.
func (s *SQLServer) infoForCommand(desc *flight.FlightDescriptor, schema *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc,
		Schema:           s.schemas.serialized(schema),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

// oneBatch streams a single record batch.
func oneBatch(rec arrow.RecordBatch) <-chan flight.StreamChunk {
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return ch
}

func (s *SQLServer) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.Catalogs), nil
}

func (s *SQLServer) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, schema_ref.Catalogs)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(CatalogName)
	return schema_ref.Catalogs, oneBatch(b.NewRecordBatch()), nil
}

func (s *SQLServer) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.DBSchemas), nil
}

// The metadata commands list only the databases the caller's token can
// read: the others' names are not its to learn.

func (s *SQLServer) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, schema_ref.DBSchemas)
	defer b.Release()
	who := auth.FromContext(ctx)
	if catalogMatches(cmd.GetCatalog()) {
		for _, d := range s.wb.Catalog().Databases() {
			if !who.CanRead(d.Name) || !likeMatch(cmd.GetDBSchemaFilterPattern(), d.Name) {
				continue
			}
			b.Field(0).(*array.StringBuilder).Append(CatalogName)
			b.Field(1).(*array.StringBuilder).Append(d.Name)
		}
	}
	return schema_ref.DBSchemas, oneBatch(b.NewRecordBatch()), nil
}

func (s *SQLServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.infoForCommand(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.infoForCommand(desc, schema_ref.Tables), nil
}

func (s *SQLServer) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	who := auth.FromContext(ctx)
	sc := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		sc = schema_ref.TablesWithIncludedSchema
	}
	b := array.NewRecordBuilder(s.mem, sc)
	defer b.Release()
	if catalogMatches(cmd.GetCatalog()) && typeMatches(cmd.GetTableTypes()) {
		for _, d := range s.wb.Catalog().Databases() {
			if !who.CanRead(d.Name) || !likeMatch(cmd.GetDBSchemaFilterPattern(), d.Name) {
				continue
			}
			for _, t := range d.TableList() {
				if !likeMatch(cmd.GetTableNameFilterPattern(), t.Name) {
					continue
				}
				b.Field(0).(*array.StringBuilder).Append(CatalogName)
				b.Field(1).(*array.StringBuilder).Append(d.Name)
				b.Field(2).(*array.StringBuilder).Append(t.Name)
				b.Field(3).(*array.StringBuilder).Append(tableType)
				if cmd.GetIncludeSchema() {
					b.Field(4).(*array.BinaryBuilder).Append(flight.SerializeSchema(describedSchema(t), s.mem))
				}
			}
		}
	}
	return sc, oneBatch(b.NewRecordBatch()), nil
}

// describedSchema is a table's Arrow schema with the ARROW:FLIGHT:SQL:*
// metadata that JDBC and ADBC read for each column (query results that
// return the column carry the same).
func describedSchema(t *catalog.Table) *arrow.Schema {
	base := t.ArrowSchema()
	fields := make([]arrow.Field, base.NumFields())
	for i, f := range base.Fields() {
		f.Metadata = query.ColumnMetadata(t, i)
		fields[i] = f
	}
	return arrow.NewSchema(fields, nil)
}

func (s *SQLServer) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.infoForCommand(desc, schema_ref.TableTypes), nil
}

func (s *SQLServer) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.mem, schema_ref.TableTypes)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(tableType)
	return schema_ref.TableTypes, oneBatch(b.NewRecordBatch()), nil
}

// catalogMatches: no catalog filter, or "apron". An empty catalog means
// "objects without a catalog" in Flight SQL, of which there are none.
func catalogMatches(c *string) bool { return c == nil || *c == CatalogName }

// typeMatches: no table type filter, or one that names Apron's. "BASE
// TABLE" (the SQL standard's information_schema name, which InfluxDB 3
// reports) is taken for it too: Grafana's Flight SQL data source lists the
// tables of that type only.
func typeMatches(types []string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if t == tableType || t == "BASE TABLE" {
			return true
		}
	}
	return false
}

// likeMatch matches s against a SQL LIKE pattern (% any run, _ one
// character, \ escapes); a nil pattern matches everything.
func likeMatch(pattern *string, s string) bool {
	if pattern == nil {
		return true
	}
	return like([]rune(*pattern), []rune(s))
}

func like(p, s []rune) bool {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for len(p) > 0 && p[0] == '%' {
				p = p[1:]
			}
			if len(p) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if like(p, s[i:]) {
					return true
				}
			}
			return false
		case '_':
			if len(s) == 0 {
				return false
			}
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}
