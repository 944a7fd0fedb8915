// Package catalog holds Apron's schema catalog: databases, their tables and
// the tables' columns.
//
// Every write asks the catalog, through [Catalog.PlanWrite], whether its
// Arrow schema fits what is stored. PlanWrite is pure: it returns a
// [Change] (new database, new table, new columns) or nil, and the write path
// logs the change in the WAL before calling [Catalog.Apply]. The write path
// serializes plan, WAL append and apply under its own lock; the catalog only
// has to be race-free.
//
// # Logical types
//
// A column stores a logical type (see [LogicalType]): utf8, large_utf8 and
// dictionary-encoded strings are all "string" (stored as utf8), binary and
// large_binary are binary, and timestamps keep their unit and time zone.
// Every table has a column "time" of type timestamp[ns] without time zone,
// always column 0; the other columns follow in first-seen order.
//
// # Concurrency
//
// Tables, databases and snapshots are immutable values. Apply builds a new
// [Snapshot] (copy-on-write, sharing everything it did not change) and swaps
// an atomic pointer, so readers never take a lock. Planning a write whose
// schema is unchanged is the hot path: each table remembers the last
// *arrow.Schema it accepted without change, and otherwise fields are compared
// without allocating.
//
// # On-disk format
//
// [Catalog.Save] writes one JSON file (conventionally "catalog.json" in the
// data directory) atomically: temp file in the same directory, write, fsync,
// rename over the target, fsync the directory. The document is
//
//	{
//	  "format_version": 1,
//	  "version": 7,                 // catalog version, see Catalog.Version
//	  "next_database_id": 2,
//	  "next_table_id": 3,
//	  "databases": [                // sorted by name
//	    {"name": "metrics", "id": 1, "tables": [       // sorted by name
//	      {"name": "cpu", "id": 1, "columns": [        // column order, time first
//	        {"name": "time", "id": 0, "type": "timestamp", "unit": "ns"},
//	        {"name": "host", "id": 1, "type": "string"},
//	        {"name": "at",   "id": 2, "type": "timestamp", "unit": "ms", "time_zone": "UTC"}
//	      ]}
//	    ]}
//	  ]
//	}
//
// Format version 2 adds "tokens" (token_format.go): API tokens as their
// SHA-256, permissions, times; a catalog without tokens is still written
// as version 1. Token changes are not WAL records: ChangeTokens writes the
// file (atomically, as above) before the change is in force, so the file
// is their log.
//
// Format version 3 adds "dropped" (ddl.go): the tables and databases
// dropped, each {"database", "table" (absent for a database), "id",
// "from_segment" (absent: 0), "to_segment"}; rows of that name in the
// segments from from_segment to to_segment-1 are the dropped ones. CREATE and DROP are not WAL records either: like token
// changes, they are in force once the file is written.
//
// Format version 4 adds "replacing" (replace.go): the replaces in
// progress, each {"database", "table", "id" (the id the new table will
// have), "from_segment"}; rows of that name in from_segment and later
// segments are the replace's, hidden until it commits. A catalog is
// written as version 4 only while a replace is in progress; beginning,
// committing and aborting one are in force once the file is written.
//
// Format version 5 adds "last_value_caches" (lastvalue.go): per table
// with a last-value cache {"database", "table", "name", "keys" (string
// columns of the table; [] for none), "count"}. Only the definition is
// durable; the rows are the buffer's, filled again after a restart. A
// catalog is written as version 5 only while a cache is defined.
//
// Type names are int8…int64, uint8…uint64, float32, float64, bool, string,
// binary, timestamp (with unit s|ms|us|ns and optional time_zone), date32 and
// date64. Unknown fields or an unknown format_version make [Load] fail:
// a newer format must bump format_version. testdata/catalog_v1.golden.json is
// the reference file; regenerate it with APRON_UPDATE_GOLDEN=1.
package catalog
