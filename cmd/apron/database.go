package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newDatabaseCommand) }

// newDatabaseCommand is apron database update: a database's settings,
// through the Flight action apron.database.update.
func newDatabaseCommand(_ io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "database",
		Short: "Change a database's settings (retention)",
	}
	var conn connFlags
	var retention string
	update := &cobra.Command{
		Use:   "update DATABASE --retention 30d|2w|36h|none|default",
		Short: "Set a database's retention: rows older are invisible at once and their files deleted",
		Long: "Set a database's retention: rows older than now minus the retention are invisible at once, and\n" +
			"persisted files whose rows have all expired are deleted. none keeps rows forever, default\n" +
			"follows the server's --retention. Needs write permission on the database.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := conn.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			if !cmd.Flags().Changed("retention") {
				return usageErrorf("apron database update: nothing to change; give --retention")
			}
			body, err := json.Marshal(map[string]string{"database": args[0], "retention": retention})
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := conn.connect(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer cl.Close()
			defer cancel()
			out, err := conn.doAction(ctx, cl, "apron.database.update", body)
			if err != nil {
				return err
			}
			for _, b := range out {
				var s struct {
					Database, Retention string
					EffectiveRetention  string `json:"effective_retention"`
				}
				if err := json.Unmarshal(b, &s); err != nil {
					return fmt.Errorf("the server's answer %q: %w", b, err)
				}
				fmt.Fprintf(stdout, "database %s: retention %s (in force: %s)\n", s.Database, s.Retention, s.EffectiveRetention)
			}
			return nil
		},
	}
	conn.addTo(update.Flags(), 30*time.Second)
	update.Flags().StringVar(&retention, "retention", "", "30d, 2w, 36h…, none (forever) or default (the server's --retention)")
	cmd.AddCommand(update)
	return cmd
}
