package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/pki"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/stork"
	"github.com/sluice-dtn/sluice/wire"
)

// clientConfig is where the CLI finds the server: flags, then the
// environment (SLUICE_SERVER, SLUICE_TOKEN), then the config file written
// by `sluice login`.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	// CA is the site's authority the server's certificate is checked
	// against, besides the system's roots (`sluice ca init` makes one).
	CA string `json:"ca,omitempty"`
}

func clientConfigFile() string {
	if f := os.Getenv("SLUICE_CONFIG"); f != "" {
		return f
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "sluice", "client.json")
}

// clientFlags adds --server and --token to a command.
func clientFlags(cmd *cobra.Command) *clientConfig {
	c := &clientConfig{}
	cmd.Flags().StringVar(&c.Server, "server", "", "server URL (default $SLUICE_SERVER, then what sluice login saved)")
	cmd.Flags().StringVar(&c.Token, "token", "", "API token or @FILE (default $SLUICE_TOKEN, then what sluice login saved)")
	cmd.Flags().StringVar(&c.CA, "ca", "", "the site's CA certificate (PEM) to check an https:// server against, besides the system's (default $SLUICE_CA, then what sluice login saved)")
	return c
}

// httpClient is the HTTP client of a command that talks to the server:
// it verifies the server's certificate against the system's roots and
// the site's authority caFile, if given.
func httpClient(caFile string) (*http.Client, error) {
	cfg, err := pki.ClientTLS(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Timeout: 60 * time.Second, Transport: tr}, nil
}

func (c *clientConfig) client() (*client.Client, error) {
	cfg, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if cfg.Server == "" {
		return nil, errors.New("no server: give --server, set SLUICE_SERVER, or run `sluice login`")
	}
	if cfg.Token == "" {
		return nil, errors.New("no API token: give --token, set SLUICE_TOKEN, or run `sluice login`")
	}
	tok, err := secretArg(cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("--token: %w", err)
	}
	hc, err := httpClient(cfg.CA)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	return client.New(cfg.Server, tok, hc)
}

// resolve fills what c leaves empty from the environment, then from the
// file `sluice login` wrote; what none gives stays empty.
func (c *clientConfig) resolve() (clientConfig, error) {
	cfg := *c
	var file clientConfig
	if name := clientConfigFile(); name != "" {
		if b, err := os.ReadFile(name); err == nil {
			if err := json.Unmarshal(b, &file); err != nil {
				return cfg, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if cfg.Server == "" {
		cfg.Server = os.Getenv("SLUICE_SERVER")
	}
	if cfg.Server == "" {
		cfg.Server = file.Server
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv("SLUICE_TOKEN")
	}
	if cfg.Token == "" {
		cfg.Token = file.Token
	}
	if cfg.CA == "" {
		cfg.CA = os.Getenv("SLUICE_CA")
	}
	if cfg.CA == "" {
		cfg.CA = file.CA
	}
	return cfg, nil
}

func newLoginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Check a server URL and API token and save them for later commands",
		Example: `  sluice login --server http://sched:8080 --token @~/.local/share/sluice/admin.token
  sluice status`,
		Args: cobra.NoArgs,
	}
	c := clientFlags(cmd)
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the server, the user and where the login was saved")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if c.Server == "" || c.Token == "" {
			return errors.New("login: --server and --token are required")
		}
		tok, err := secretArg(c.Token)
		if err != nil {
			return fmt.Errorf("login: --token: %w", err)
		}
		if c.CA == "" {
			c.CA = os.Getenv("SLUICE_CA")
		}
		if c.CA != "" {
			// Saved by its absolute name: later commands run elsewhere.
			if abs, err := filepath.Abs(c.CA); err == nil {
				c.CA = abs
			}
		}
		hc, err := httpClient(c.CA)
		if err != nil {
			return fmt.Errorf("login: --ca: %w", err)
		}
		cl, err := client.New(c.Server, tok, hc)
		if err != nil {
			return err
		}
		u, err := cl.Whoami(cmd.Context())
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		name := clientConfigFile()
		if name == "" {
			return errors.New("login: no configuration directory")
		}
		b, _ := json.MarshalIndent(clientConfig{Server: c.Server, Token: tok, CA: c.CA}, "", "  ")
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if err := os.WriteFile(name, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), loginOut{Server: c.Server, User: u, SavedIn: name})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s as %s (VO %s); saved in %s\n", c.Server, u.Name, u.VO, name)
		return nil
	}
	return cmd
}

// loginOut is what `sluice login --json` prints.
type loginOut struct {
	Server  string       `json:"server"`
	User    wire.UserOut `json:"user"`
	SavedIn string       `json:"saved_in"`
}

func newSubmitCmd() *cobra.Command {
	var file, label, class, checksum, subID, selection, syncLevel string
	var batch, asJSON, watch, optimize, overwrite, preserveMtime, recursive bool
	var streams int
	var sources []string
	cmd := &cobra.Command{
		Use:   "submit [SRC DST | --sources A,B,... DST | -f job.json | -f job.classad]",
		Short: "Submit a transfer job to the server (prints the job id)",
		Long: `submit sends a job to the server and prints its ID. SRC and DST are
sluice://ENDPOINT/path URLs; -f reads a job file: Sluice's or FTS3's JSON, or a
Stork submit file. Nothing at a destination is replaced unless the job asks
(--overwrite, --sync). See docs/user-guide.md.`,
		Example: `  sluice submit sluice://dtn1/data/run7.h5 sluice://dtn2/archive/run7.h5 --watch
  sluice submit -r sluice://dtn1/run42 sluice://dtn2/archive/run42
  sluice submit --sync checksum -f job.json     # again: only what changed moves`,
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var job api.JobIn
		switch {
		case file != "" && len(args) > 0:
			return errors.New("submit: give SRC DST or -f FILE, not both")
		case file != "" && cmd.Flags().Changed("sources"):
			return errors.New("submit: give --sources A,B,... DST or -f FILE, not both (a job file names each file's sources)")
		case file != "":
			var r io.Reader = os.Stdin
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return fmt.Errorf("submit: %w", err)
				}
				defer f.Close()
				r = f
			}
			br := bufio.NewReader(r)
			if isClassAd(br) {
				// A Stork submit file: each ad is a job or an estimate,
				// as the ad says; the job flags would be dropped.
				var set []string
				for _, name := range []string{"batch", "class", "label", "checksum", "submission-id", "optimize", "streams", "selection", "watch", "overwrite", "sync", "preserve-mtime"} {
					if cmd.Flags().Changed(name) {
						set = append(set, "--"+name)
					}
				}
				if len(set) > 0 {
					return fmt.Errorf("submit: %s: %s: not taken with a Stork submit file, whose ads say what each job is (optimization = \"YES\" for --optimize)", file, strings.Join(set, ", "))
				}
				ads, err := stork.Parse(br)
				if err != nil {
					return fmt.Errorf("submit: %s: %w", file, err)
				}
				cl, err := cc.client()
				if err != nil {
					return fmt.Errorf("submit: %w", err)
				}
				if err := runClassAds(cmd.Context(), cl, ads, cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON); err != nil {
					return fmt.Errorf("submit: %s: %w", file, err)
				}
				return nil
			}
			dec := json.NewDecoder(br)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&job); err != nil {
				return fmt.Errorf("submit: %s: %w", file, err)
			}
			end := dec.InputOffset()
			if _, err := dec.Token(); err != io.EOF {
				return fmt.Errorf("submit: %s: more after the job, which ends at byte %d: a job file holds one job", file, end)
			}
		case recursive && len(args) != 2:
			return errors.New("submit: -r takes SRC DST (in a job file, \"recursive\": true on the item)")
		case len(sources) > 0 && len(args) == 1:
			job.Files = []api.FileIn{{Sources: sources, Destination: args[0]}}
		case len(sources) > 0:
			return errors.New("submit: with --sources give only the destination")
		case len(args) == 2:
			job.Files = []api.FileIn{{Source: args[0], Destination: args[1], Recursive: recursive}}
		default:
			return errors.New("submit: give SRC DST (sluice://ENDPOINT/path URLs) or -f job.json")
		}
		if batch {
			class = store.ClassBatch
		}
		if class != "" {
			job.Class = class
		}
		if label != "" {
			job.Label = label
		}
		if checksum != "" {
			job.Checksum = checksum
		}
		if subID != "" {
			job.SubmissionID = subID
		}
		if optimize {
			job.Optimization = true
		}
		if overwrite {
			job.Overwrite = &overwrite
			if job.Params != nil {
				// An FTS3 job file: its own form of the flag, which
				// would otherwise say false (FTS3's default).
				job.Params.Overwrite = &overwrite
			}
		}
		if syncLevel != "" {
			if !backend.ValidSyncLevel(syncLevel) {
				return fmt.Errorf("--sync %q: want one of %s", syncLevel, strings.Join(backend.SyncLevels(), ", "))
			}
			if cmd.Flags().Changed("overwrite") && !overwrite {
				return errors.New("--sync replaces the files that differ, --overwrite=false says to replace nothing: give one")
			}
			job.SyncLevel = syncLevel
			if job.Params != nil && job.Params.Overwrite != nil && !*job.Params.Overwrite {
				// An FTS3 job file's overwrite false is FTS3's default
				// written out; --sync asks for the sync's replacing.
				job.Params.Overwrite = nil
			}
		}
		if preserveMtime {
			job.PreserveMtime = true
		}
		if streams < 0 {
			return fmt.Errorf("--streams %d: want 0 (the service chooses) or more", streams)
		}
		if streams > 0 {
			job.Streams = streams
		}
		if selection != "" {
			job.Selection = selection
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		j, created, err := cl.SubmitJob(cmd.Context(), job)
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		printWarnings(cmd.ErrOrStderr(), j.Warnings)
		out := cmd.OutOrStdout()
		switch {
		case asJSON:
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(j)
		case !created:
			fmt.Fprintf(out, "%d (already submitted with this submission id)\n", j.ID)
		default:
			fmt.Fprintln(out, j.ID)
		}
		if watch {
			if err := watchJob(cmd.Context(), cl, j.ID, cmd.ErrOrStderr()); err != nil {
				return err
			}
			// stdout stays what submit prints, the job id (or with --json
			// one JSON document), so that JOB=$(sluice submit ... --watch)
			// works: the summary goes to stderr, after the progress.
			return watchEnded(cmd.Context(), cl, j.ID, cmd.ErrOrStderr(), printJob)
		}
		return nil
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "job file (JSON or Stork ClassAd; - for stdin)")
	f.BoolVar(&optimize, "optimize", false, "estimate each endpoint pair's best concurrency first and run with it")
	f.IntVar(&streams, "streams", 0, "fix each file's concurrency (partial transfers at once; default: the scheduler chooses)")
	f.BoolVar(&batch, "batch", false, "submit as batch (background) class")
	f.StringVar(&class, "class", "", "interactive or batch")
	f.StringVar(&label, "label", "", "a label for the job")
	f.StringVar(&checksum, "checksum", "", "checksum algorithm: adler32 (default), md5, sha256, crc32c or none")
	f.StringVar(&subID, "submission-id", "", "idempotency key: resubmitting with it returns the first job")
	f.BoolVar(&asJSON, "json", false, "print the job as JSON")
	f.BoolVar(&watch, "watch", false, "then show progress until the job ends")
	f.BoolVar(&overwrite, "overwrite", false, "replace files already at their destinations (default: an identical one is skipped, any other fails)")
	f.BoolVar(&preserveMtime, "preserve-mtime", false, "give each file its source's modification time")
	f.BoolVarP(&recursive, "recursive", "r", false, "SRC is a directory: copy it whole into DST (its contents land in DST, as cp -r)")
	f.StringVar(&syncLevel, "sync", "", "copy only what is missing or differs by this test, replacing what differs: "+strings.Join(backend.SyncLevels(), ", "))
	f.StringSliceVar(&sources, "sources", nil, "replicas of one file on several endpoints (comma-separated sluice:// URLs)")
	f.StringVar(&selection, "selection", "", "how files with several sources are split: "+strings.Join(copyjob.SplitNames(), ", ")+" (default tcs)")
	moreFlags(cmd, "docs/user-guide.md", "ca", "class", "checksum", "submission-id", "selection", "streams", "preserve-mtime", "optimize", "sources")
	return cmd
}

// printWarnings shows what of a submission the service accepted without
// honouring.
func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}

func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job id", s)
	}
	return id, nil
}

func newStatusCmd() *cobra.Command {
	var asJSON, files bool
	var state string
	var limit int
	var before int64
	cmd := &cobra.Command{
		Use:   "status [JOB]",
		Short: "Show jobs, or one job (with --files, its files); exits 1 for a job that failed, wholly or in part",
		Example: `  sluice status                      # the newest 100 jobs
  sluice status --before 812         # the 100 before job 812
  sluice status 812 --files --json`,
		Args: cobra.MaximumNArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if limit < 0 || before < 0 {
			return errors.New("status: --limit and --before take 0 or more")
		}
		if len(args) > 0 && (cmd.Flags().Changed("limit") || cmd.Flags().Changed("before") || state != "") {
			return errors.New("status: --limit, --before and --state list jobs: give them without a JOB")
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		ctx, out := cmd.Context(), cmd.OutOrStdout()
		if len(args) == 0 {
			return listJobs(ctx, cl, client.JobsQuery{State: state, Before: before, Limit: limit}, asJSON, out, cmd.ErrOrStderr())
		}
		id, err := parseJobID(args[0])
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		j, err := cl.Job(ctx, id)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		var fs []api.FileOut
		if files {
			if fs, err = cl.AllFiles(ctx, id); err != nil {
				return fmt.Errorf("status: %w", err)
			}
		}
		if asJSON {
			if err := writeJSON(out, struct {
				api.JobOut
				FileList []api.FileOut `json:"file_list,omitempty"`
			}{j, fs}); err != nil {
				return err
			}
			return jobEnded(j)
		}
		printJob(out, j)
		if files {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tSTATE\tSIZE\tCC\tRATE\tCHECKSUM\tDESTINATION\tERROR")
			for _, f := range fs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", f.Index, f.State, siBytes(f.Size), f.CC, siRate(f.Throughput), f.Checksum, f.Destination, f.Error)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		return jobEnded(j)
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&files, "files", false, "list the job's files")
	f.StringVar(&state, "state", "", "only jobs in this state (active, done, failed, canceled)")
	f.IntVar(&limit, "limit", 100, "list at most this many jobs, newest first (0: all)")
	f.Int64Var(&before, "before", 0, "list the jobs older than this job ID (the next page: the last ID listed)")
	return cmd
}

// listJobs prints the jobs q selects, a table or JSON, and says on stderr
// how to list the next page when there is one.
func listJobs(ctx context.Context, cl *client.Client, q client.JobsQuery, asJSON bool, out, errs io.Writer) error {
	want := q.Limit
	if want > 0 {
		q.Limit++ // one more: is there a next page?
	}
	js, err := cl.ListJobs(ctx, q)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	more := want > 0 && len(js) > want
	if more {
		js = js[:want]
	}
	if asJSON {
		if err := writeJSON(out, js); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tOWNER\tCLASS\tSTATE\tFILES\tBYTES\tRATE\tLABEL")
		for _, j := range js {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Owner, j.Class, j.State,
				j.FilesDone, j.Files, progressBytes(j), siRate(j.Throughput), j.Label)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if more {
		fmt.Fprintf(errs, "more jobs: sluice status --before %d\n", js[len(js)-1].ID)
	}
	return nil
}

// jobEnded is the error a command that shows one job ends with: none
// while it runs or once every file of it is done; one for a job that
// failed (all of its files or some: a job that finished with failed files
// is failed) or was canceled, so that a script sees it in the exit status
// and not only in the text.
func jobEnded(j api.JobOut) error {
	if !store.Terminal(j.State) {
		return nil
	}
	if j.State == store.StateDone && j.FilesFailed == 0 && j.FilesCanceled == 0 && j.ListingError == "" {
		return nil
	}
	how := j.State
	if j.State != store.StateCanceled && j.FilesDone > 0 {
		how = "partly failed"
	}
	return fmt.Errorf("job %d %s: %d of %d files done, %d failed, %d canceled (sluice status %d --files says why)",
		j.ID, how, j.FilesDone, j.Files, j.FilesFailed, j.FilesCanceled, j.ID)
}

// progressBytes is a job's bytes done of its total, in decimal units.
func progressBytes(j api.JobOut) string {
	return siBytes(j.BytesDone) + " / " + siBytes(j.Bytes)
}

func printJob(w io.Writer, j api.JobOut) {
	fmt.Fprintf(w, "job %d (%s, %s, owner %s)\n", j.ID, j.State, j.Class, j.Owner)
	fmt.Fprintf(w, "  files  %d done, %d failed, %d canceled, of %d", j.FilesDone, j.FilesFailed, j.FilesCanceled, j.Files)
	switch {
	case j.Listing:
		fmt.Fprint(w, " found so far (listing the directory)")
	case j.ListingError != "":
		fmt.Fprintf(w, " (the listing stopped: %s)", j.ListingError)
	}
	fmt.Fprintln(w)
	if j.SyncLevel != "" {
		fmt.Fprintf(w, "  sync   %s: a file already there that matches by this test is kept\n", j.SyncLevel)
	}
	fmt.Fprintf(w, "  bytes  %s", progressBytes(j))
	if j.Throughput > 0 {
		fmt.Fprintf(w, " at %s", siRate(j.Throughput))
	}
	if e := etaText(time.Duration(j.ETA * float64(time.Second))); e != "" {
		fmt.Fprintf(w, ", %s", e)
	}
	fmt.Fprintln(w)
	if j.VerifyChecksum {
		fmt.Fprintf(w, "  checksums verified end to end (%s)\n", j.Checksum)
	}
	if j.Finished != nil {
		fmt.Fprintf(w, "  took   %s\n", j.Finished.Sub(j.Created).Round(time.Millisecond))
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newWatchCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "watch JOB",
		Short: "Show a job's progress live until it ends; exits 1 unless every file was done",
		Long: `watch shows a job's progress (a bar with its rate and ETA on a terminal, a line
every two seconds otherwise) on stderr until the job ends, then the job on
stdout. It exits 1 for a job that failed, wholly or in part, or was canceled.`,
		Args: cobra.ExactArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseJobID(args[0])
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if err := watchJob(cmd.Context(), cl, id, cmd.ErrOrStderr()); err != nil {
			return err
		}
		show := printJob
		if asJSON {
			show = func(w io.Writer, j api.JobOut) { writeJSON(w, j) }
		}
		return watchEnded(cmd.Context(), cl, id, cmd.OutOrStdout(), show)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the ended job as JSON (the progress stays on stderr)")
	return cmd
}

// watchEnded reads a job whose watch saw it end, prints it with show (if
// not nil), and fails unless every file was done: `sluice watch` and
// `sluice submit --watch` exit non-zero for a job that failed, wholly or
// in part, or was canceled, so that a script does not go on as if the
// data had arrived.
func watchEnded(ctx context.Context, cl *client.Client, id int64, out io.Writer, show func(io.Writer, api.JobOut)) error {
	j, err := cl.Job(ctx, id)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if show != nil {
		show(out, j)
	}
	if err := jobEnded(j); err != nil {
		return err
	}
	if j.State != store.StateDone {
		return fmt.Errorf("job %d is %s: it has not ended", id, j.State)
	}
	return nil
}

// watchJob shows progress bars (plain lines when not on a terminal) until
// the job ends; a broken stream is reopened.
// watchPatience is how long watch waits for a server that does not answer
// before it gives up.
const watchPatience = 2 * time.Minute

func watchJob(ctx context.Context, cl *client.Client, id int64, w io.Writer) error {
	v := newProgressView(w)
	defer v.finish()
	show := func(j api.JobOut) {
		v.update(copyjob.Progress{Bytes: j.Bytes, Done: j.BytesDone, Rate: j.Throughput, Files: j.Files, FilesDone: j.FilesDone})
	}
	var failing time.Time // when the server stopped answering (zero: it answers)
	reached := false      // the server answered once
	for {
		j, err := cl.Job(ctx, id)
		var answer *client.Error
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil && errors.As(err, &answer) && answer.Status < 500:
			return fmt.Errorf("watch: %w", err) // the server's answer: no such job, no access
		case err != nil && !reached:
			// Never reached: a wrong address or a server that is not
			// running, not a restart to wait out.
			return fmt.Errorf("watch: %w", err)
		case err != nil:
			// A restarting server (it loses nothing) or a network blip:
			// the job goes on, so the watch waits for the server.
			if failing.IsZero() {
				failing = time.Now()
				fmt.Fprintf(w, "watch: the server does not answer (%v); waiting up to %s for it\n", err, watchPatience)
			} else if time.Since(failing) > watchPatience {
				return fmt.Errorf("watch: the server has not answered for %s: %w", watchPatience, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		failing, reached = time.Time{}, true
		show(j)
		if j.State != store.StateActive {
			return nil
		}
		ended := false
		// The event stream comes from the server this client talks to;
		// with several servers another may schedule the job's files and
		// finish it, so the stream is renewed (and the job re-read)
		// every few seconds rather than trusted to end.
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = cl.EventsFrom(ectx, id, func() bool {
			// Subscribed: read the job again, so that an end between
			// the read above and the subscription is not waited out.
			if now, err := cl.Job(ectx, id); err == nil {
				j = now
				show(j)
				ended = j.State != store.StateActive
			}
			return !ended
		}, func(e server.Event) bool {
			switch e.Type {
			case "progress":
				j.BytesDone, j.Throughput, j.FilesDone = e.BytesDone, e.Throughput, e.FilesDone
				if e.Bytes > 0 {
					j.Bytes, j.Files = e.Bytes, e.Files
				}
				show(j)
			case "task":
				if e.State == store.StateDone {
					j.FilesDone++
					show(j)
				}
			case "job":
				if e.State != store.StateActive {
					ended = true
					return false
				}
			}
			return true
		})
		cancel()
		if ectx.Err() != nil && ctx.Err() == nil {
			continue // renew: re-read the job, then listen again
		}
		if ended {
			if j, err := cl.Job(ctx, id); err == nil {
				show(j)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && strings.Contains(err.Error(), "401") {
			return fmt.Errorf("watch: %w", err)
		}
		time.Sleep(time.Second)
	}
}

func newCancelCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a job (files already done stay; partial copies are removed)",
		Args:  cobra.ExactArgs(1),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseJobID(args[0])
		if err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		j, err := cl.Cancel(cmd.Context(), id)
		if err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), j)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "job %d %s: %d files done, %d canceled\n", j.ID, j.State, j.FilesDone, j.FilesCanceled)
		return nil
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	return cmd
}

func newEndpointsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List the endpoints (agents and storage servers) and their live load",
		Args:  cobra.NoArgs,
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("endpoints: %w", err)
		}
		es, err := cl.Endpoints(cmd.Context())
		if err != nil {
			return fmt.Errorf("endpoints: %w", err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), es)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tURL\tUP\tMB/S\tCC\tPEAK MB/S\tMAX MB/S\tMAX CC\tLAST SEEN")
		for _, e := range es {
			kind := e.Kind
			if e.Via != "" {
				kind += " via " + e.Via
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%.1f\t%d\t%.1f\t%.1f\t%d\t%s\n", e.Name, kind, e.URL, e.Up, e.Throughput/1e6, e.CC,
				e.Peak/1e6, e.MaxThroughput/1e6, e.MaxCC, e.LastSeen.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// isClassAd reports whether the input is a ClassAd (opens with '[') rather
// than JSON, without consuming it.
func isClassAd(r *bufio.Reader) bool {
	for i := 1; ; i++ {
		b, err := r.Peek(i)
		if err != nil || len(b) < i {
			return false
		}
		switch c := b[i-1]; c {
		case ' ', '\t', '\r', '\n':
			continue
		case '#', '/':
			return true // JSON has no comments; ClassAds do
		default:
			return c == '['
		}
	}
}
