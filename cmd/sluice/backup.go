package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/store"
)

func newBackupCmd() *cobra.Command {
	var dataDir, db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "backup OUT",
		Short: "Copy the service's SQLite store to a new file, while it runs",
		Long: `Writes a consistent copy of the SQLite store (every transaction committed before
it started, none in part) to OUT, which must not exist, while the server runs.
The copy holds the service's signing key and token hashes: it is made 0600, keep
it as you keep the server. To restore, stop the server, move sluice.db and its
-wal and -shm files away, put the backup in its place as sluice.db, and start
the server. A PostgreSQL store is backed up with pg_dump (docs/operator-guide.md).`,
		Example: `  sluice backup --data-dir /var/lib/sluice /backup/sluice-$(date +%F).db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if db == "" {
				if dataDir == "" {
					dataDir = defaultDataDir()
				}
				db = filepath.Join(dataDir, "sluice.db")
			}
			if err := store.BackupSQLite(cmd.Context(), db, args[0]); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					Database string `json:"database"`
					Backup   string `json:"backup"`
				}{db, args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s\n", db, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the server's data directory (default "+defaultDataDir()+")")
	cmd.Flags().StringVar(&db, "db", "", "the SQLite database file, if not DATA_DIR/sluice.db")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the database and its backup")
	return cmd
}
