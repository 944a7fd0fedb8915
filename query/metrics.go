//go:build duckdb_arrow

package query

import "github.com/prometheus/client_golang/prometheus"

// Collectors returns Prometheus collectors of the engine's Stats: what
// its scans read and skipped, and how often its caches answered.
func (e *Engine) Collectors() []prometheus.Collector {
	counter := func(name, help string, v func(Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(e.Stats()) })
	}
	gauge := func(name, help string, v func(Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(e.Stats()) })
	}
	return []prometheus.Collector{
		counter("apron_query_started_total", "Queries started.", func(s Stats) float64 { return float64(s.Queries) }),
		gauge("apron_query_active", "Queries running now.", func(s Stats) float64 { return float64(s.Active) }),
		counter("apron_query_chunks_scanned_total", "Buffered chunks read by scans.", func(s Stats) float64 { return float64(s.ChunksScanned) }),
		counter("apron_query_chunks_pruned_total", "Buffered chunks skipped by time pruning.", func(s Stats) float64 { return float64(s.ChunksPruned) }),
		counter("apron_query_rows_selected_out_total", "Rows of buffered chunks read that scans did not hand to DuckDB, as they could not match a string equality of the query's WHERE clause.", func(s Stats) float64 { return float64(s.RowsSelectedOut) }),
		counter("apron_query_files_scanned_total", "Persisted files read by scans.", func(s Stats) float64 { return float64(s.FilesScanned) }),
		counter("apron_query_files_pruned_total", "Persisted files skipped by time pruning.", func(s Stats) float64 { return float64(s.FilesPruned) }),
		counter("apron_query_metadata_chunks_total", "Buffered chunks counted from their metadata, not read.", func(s Stats) float64 { return float64(s.MetaChunks) }),
		counter("apron_query_metadata_files_total", "Persisted files counted from their metadata, not read.", func(s Stats) float64 { return float64(s.MetaFiles) }),
		counter("apron_query_newest_chunks_skipped_total", "Buffered chunks left out of an ORDER BY time DESC LIMIT as older than its rows.", func(s Stats) float64 { return float64(s.NewestChunks) }),
		counter("apron_query_newest_files_skipped_total", "Persisted files left out of an ORDER BY time DESC LIMIT as older than its rows.", func(s Stats) float64 { return float64(s.NewestFiles) }),
		counter("apron_query_latest_chunks_skipped_total", "Buffered chunks left out of a latest row per key (GROUP BY key with max or arg_max of time) as older than every key's latest row.", func(s Stats) float64 { return float64(s.LatestChunks) }),
		counter("apron_query_latest_files_skipped_total", "Persisted files left out of a latest row per key (GROUP BY key with max or arg_max of time) as older than every key's latest row.", func(s Stats) float64 { return float64(s.LatestFiles) }),
		counter("apron_query_latest_files_as_rows_total", "Persisted files a latest row per key answered by DuckDB (an ORDER BY of an aggregate, equalities of a column not grouped by) read as their latest row of each key, not whole.", func(s Stats) float64 { return float64(s.LatestFileSwaps) }),
		counter("apron_query_latest_file_reads_total", "Persisted files read whole for their latest row of each key value, kept afterwards for the latest row per key without DuckDB.", func(s Stats) float64 { return float64(s.LatestFileReads) }),
		counter("apron_query_latest_file_read_aheads_total", "Persisted files of them read ahead, after a persist, for tables whose latest row per key queries needed files in the last 10 minutes.", func(s Stats) float64 { return float64(s.LatestFileReadAheads) }),
		counter("apron_query_delete_files_read_total", "Persisted files a DELETE by rewrite read whole.", func(s Stats) float64 { return float64(s.DeleteFilesRead) }),
		counter("apron_query_delete_files_skipped_total", "Persisted files a DELETE by rewrite did not read: outside its time bounds, or without a row it matches.", func(s Stats) float64 { return float64(s.DeleteFilesSkipped) }),
		counter("apron_query_internal_errors_total", "Queries failed by an internal error (a bug: a panic as the query started, logged with its stack); their connections were closed, not reused.", func(s Stats) float64 { return float64(s.InternalErrors) }),
		counter("apron_query_direct_scans_total", "Queries streamed straight from storage.", func(s Stats) float64 { return float64(s.DirectScans) }),
		counter("apron_query_direct_scans_unprepared_total", "Direct scans with a WHERE streamed without a DuckDB Prepare: their shape (columns and table) was typed by DuckDB before.", func(s Stats) float64 { return float64(s.DirectUnprepared) }),
		counter("apron_query_metadata_answers_total", "Queries (counts, time extremes) answered from metadata alone, without running DuckDB.", func(s Stats) float64 { return float64(s.MetaAnswers) }),
		counter("apron_query_bounds_in_go_total", "Time bounds relative to now() evaluated in Go, without a DuckDB statement.", func(s Stats) float64 { return float64(s.BoundsInGo) }),
		counter("apron_query_plans_reused_total", "Queries run on DuckDB's plan of an earlier query of the same text, not prepared again.", func(s Stats) float64 { return float64(s.PlansReused) }),
		counter("apron_query_database_switches_total", "Pooled DuckDB connections made to change their current database for a query (SET search_path); each connection keeps the last database it ran, and a query takes one of its own database when one is idle.", func(s Stats) float64 { return float64(s.DatabaseSwitches) }),
		counter("apron_query_parse_cache_hits_total", "Statements whose parse was found in the parse cache.", func(s Stats) float64 { return float64(s.ParseHits) }),
		counter("apron_query_parse_cache_misses_total", "Statements parsed by DuckDB.", func(s Stats) float64 { return float64(s.ParseMisses) }),
		counter("apron_query_shape_cache_hits_total", "Prepares answered from the shape cache.", func(s Stats) float64 { return float64(s.ShapeHits) }),
		counter("apron_query_shape_cache_misses_total", "Prepares prepared on DuckDB.", func(s Stats) float64 { return float64(s.ShapeMisses) }),
		counter("apron_query_direct_file_scans_total", "Filtered direct scans (one series, a time range) that read persisted files themselves, without running DuckDB.", func(s Stats) float64 { return float64(s.DirectFileScans) }),
		counter("apron_query_page_cache_hits_total", "Pages of persisted files a selective query found decompressed in the page cache.", func(s Stats) float64 { return float64(s.PageHits) }),
		counter("apron_query_page_cache_misses_total", "Pages of persisted files a selective query read and decompressed (then kept in the page cache).", func(s Stats) float64 { return float64(s.PageMisses) }),
		gauge("apron_query_page_cache_bytes", "Bytes of decompressed pages in the page cache (--page-cache-size).", func(s Stats) float64 { return float64(s.PageBytes) }),
		gauge("apron_query_latest_file_rows_bytes", "Bytes of persisted files' latest rows per key value kept for the latest row per key.", func(s Stats) float64 { return float64(s.LatestFileRowsBytes) }),
	}
}
