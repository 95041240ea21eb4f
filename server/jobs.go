package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// MaxFilesPerJob bounds one submission.
const MaxFilesPerJob = 1_000_000

// MaxReplicas bounds the sources of one file (FTS3's list of sources).
const MaxReplicas = 16

// FileSpec is one file of a submission.
type FileSpec struct {
	Source, Destination string
	// Replicas are other copies of Source, on other endpoints: the file
	// is downloaded from all of them at once, split by the job's
	// Selection (Yang, Schopf, Foster).
	Replicas []string
	Size     int64  // -1: unknown, the service stats the source
	Checksum string // "algo:hex" the user expects, or ""
	// Metadata is what the submitter attaches to the file: JSON, kept
	// and given back as sent (FTS3's files[].metadata, which Rucio finds
	// its requests by), at most MaxMetadataBytes.
	Metadata string
	// Recursive copies the directory Source into Destination, as `cp -r`
	// (the directory's contents land in Destination): the service lists
	// it a page at a time and adds its files as it goes (listing.go).
	Recursive bool
}

// JobSpec is a submission.
type JobSpec struct {
	Files          []FileSpec
	Class          string // "interactive" (default) or "batch"
	Priority       int
	Label          string
	Deadline       time.Time
	VerifyChecksum *bool  // default true
	Checksum       string // algorithm (default adler32)
	Retry          *int   // transient failures tolerated per file (default 3)
	SubmissionID   string
	// Optimize runs the job's files with the estimated best concurrency
	// of their endpoint pair (see Estimate).
	Optimize bool
	// Streams, if > 0, fixes the files' concurrency (FTS3 nostreams).
	Streams int
	// Adaptive makes the job an adaptive client of the Policy Service.
	Adaptive *AdaptiveSpec
	// Selection is how files with replicas are split across them: one
	// of copyjob.SplitNames (default tcs).
	Selection string
	// Overwrite is what the job does with a file already at a
	// destination: store.OverwriteKeep (default), OverwriteFail,
	// OverwriteReplace or a sync level (store.OverwriteSync+level).
	Overwrite string
	// PreserveModTime gives each file its source's modification time.
	PreserveModTime bool
	// Metadata is what the submitter attaches to the job: JSON, kept
	// and given back as sent (FTS3's job_metadata), at most
	// MaxMetadataBytes.
	Metadata string
}

// MaxMetadataBytes bounds the metadata of a job and of each file: what
// FTS3 clients and Rucio attach (request ids, scopes, activities) is a
// few hundred bytes, and a bound keeps a submission's rows small.
const MaxMetadataBytes = 4096

// checkMetadata checks a job's or a file's metadata.
func checkMetadata(md string) error {
	switch {
	case md == "":
		return nil
	case len(md) > MaxMetadataBytes:
		return fmt.Errorf("metadata of %d bytes; at most %d", len(md), MaxMetadataBytes)
	case !json.Valid([]byte(md)):
		return errors.New("metadata is not JSON")
	}
	return nil
}

// JobStatus is a job with live figures.
type JobStatus struct {
	store.Job
	Throughput float64 // bytes/s now
	ETA        float64 // seconds, 0 if unknown
}

// endpointIndex resolves the host part of sluice:// URLs: an endpoint's
// name, or the host:port it registered with.
func (s *Server) endpointIndex(ctx context.Context) (map[string]store.Endpoint, error) {
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	idx := make(map[string]store.Endpoint, 2*len(eps))
	for _, e := range eps {
		if e.Storage() {
			idx[e.URL] = e // scheme://host:port: storage URLs name it so
			continue
		}
		if u, err := url.Parse(e.URL); err == nil && u.Host != "" {
			idx[u.Host] = e
		}
	}
	// Names last, so that no alias takes one: a URL without a port
	// (https://dtn1) has a host that can be another endpoint's name, and
	// the agent registering it would get around nameFree and have that
	// endpoint's jobs sent to it.
	for _, e := range eps {
		idx[e.Name] = e
	}
	return idx, nil
}

// maxNameBytes is the longest name of one path element most file systems
// take (NAME_MAX): a longer one could never be written.
const maxNameBytes = 255

// maxPathBytes is the longest path Submit takes (PATH_MAX): the agents'
// data tokens carry the path, and much longer ones outgrow what agents
// accept, so the file would fail only when it ran.
const maxPathBytes = 4096

// parseFileURL checks a sluice://endpoint/path URL and returns the
// endpoint and a clean absolute path. The path is percent-decoded, as
// sluice cp and FTS3 read URLs: a name with ?, # or % in it is written
// %3F, %23 or %25.
func parseFileURL(idx map[string]store.Endpoint, raw string) (store.Endpoint, string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	_, storage := storageSchemes[scheme]
	if _, web := webSchemes[scheme]; web {
		storage = true // a WebDAV storage endpoint's file (agents are named sluice://)
	}
	if !ok || (scheme != "sluice" && scheme != "sluices" && !storage) {
		return store.Endpoint{}, "", fmt.Errorf("%q: want sluice://ENDPOINT/path (ENDPOINT: a registered endpoint's name or host:port), or the URL of a storage endpoint (gsiftp://, ftp://, root://, davs://, https://, s3://)", raw)
	}
	host, p, _ := strings.Cut(rest, "/")
	if storage {
		// A storage server's URL: the endpoint an admin registered for
		// that server (its port made explicit), which the path must
		// not leave.
		if strings.Contains(host, "@") {
			return store.Endpoint{}, "", fmt.Errorf("%q: a user in the URL; the storage endpoint's credential is used", raw)
		}
		base, _, err := StorageBase(scheme + "://" + host)
		if err != nil {
			return store.Endpoint{}, "", fmt.Errorf("%q: %v", raw, err)
		}
		e, ok := idx[base]
		if !ok {
			return store.Endpoint{}, "", fmt.Errorf("%q: no storage endpoint is registered for %s (an admin registers it: sluice endpoint add NAME %s)", raw, base, base)
		}
		host = e.Name
	}
	p = "/" + p
	if strings.ContainsAny(p, "?#\x00") {
		return store.Endpoint{}, "", fmt.Errorf("%q: query, fragment or NUL in the path (percent-encode ? as %%3F and # as %%23 in names)", raw)
	}
	p, err := url.PathUnescape(p)
	if err != nil {
		return store.Endpoint{}, "", fmt.Errorf("%q: bad percent-encoding in the path (a %% in a name is written %%25)", raw)
	}
	if strings.ContainsRune(p, 0) {
		return store.Endpoint{}, "", fmt.Errorf("%q: NUL in the path", raw)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return store.Endpoint{}, "", fmt.Errorf("%q: '..' in the path", raw)
		}
		if len(el) > maxNameBytes {
			return store.Endpoint{}, "", fmt.Errorf("%q: a name of %d bytes in the path; file systems take at most %d", raw, len(el), maxNameBytes)
		}
	}
	if n := len(path.Clean(p)); n > maxPathBytes {
		return store.Endpoint{}, "", fmt.Errorf("%.80q...: a path of %d bytes; at most %d", raw, n, maxPathBytes)
	}
	e, ok := idx[host]
	if !ok {
		return store.Endpoint{}, "", fmt.Errorf("%q: no endpoint %q is registered (see `sluice endpoints`)", raw, host)
	}
	return e, path.Clean(p), nil
}

// recursiveItem checks item i, a directory to copy whole, and returns
// its listing: both ends agents' directories the caller may read and
// write in, neither inside the other.
func recursiveItem(idx map[string]store.Endpoint, acc *access.Check, i int, f FileSpec) (store.Listing, error) {
	bad := func(format string, a ...any) (store.Listing, error) {
		return store.Listing{}, fmt.Errorf("%w: file %d: "+format, append([]any{ErrInvalid, i}, a...)...)
	}
	switch {
	case len(f.Replicas) > 0:
		return bad("a directory copied whole has one source")
	case f.Checksum != "":
		return bad("a directory has no checksum of its own")
	case f.Size > 0:
		return bad("a directory has no size: its files are listed")
	}
	se, sp, err := parseFileURL(idx, f.Source)
	if err != nil {
		return bad("source %v", err)
	}
	de, dp, err := parseFileURL(idx, f.Destination)
	if err != nil {
		return bad("destination %v", err)
	}
	sp, dp = path.Clean(sp), path.Clean(dp)
	if se.Storage() || de.Storage() {
		// The listing is paged by agents (GET /v1/list with a cursor);
		// a storage server's listing is not resumable that way yet.
		return bad("directories are copied whole between agents only; list the storage endpoint's files as items")
	}
	if err := acc.Allow(se.Name, sp, AccessRead); err != nil {
		return store.Listing{}, fmt.Errorf("file %d: %w", i, err)
	}
	if err := acc.AllowWriteIn(de.Name, dp); err != nil {
		return store.Listing{}, fmt.Errorf("file %d: destination %s: %w", i, f.Destination, err)
	}
	if se.Name == de.Name && (access.Under(dp, sp) || access.Under(sp, dp)) {
		return bad("the destination %s and the source %s are one inside the other", f.Destination, f.Source)
	}
	return store.Listing{Item: i, Src: scheme(f.Source) + se.Name + sp, Dst: scheme(f.Destination) + de.Name + dp,
		SrcEndpoint: se.Name, DstEndpoint: de.Name}, nil
}

// listingsApart refuses a job in which a directory copied whole would
// read what another item writes, or write where another directory reads
// or writes: a job's items run in no set order. tasks are the job's
// files, at their items' indices (zero at a directory's).
func listingsApart(ls []store.Listing, tasks []store.Task) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format+"; the items of a job run in no set order: submit them as two jobs, one after the other", append([]any{ErrInvalid}, a...)...)
	}
	// overlap: one of two endpoint paths is at or below the other.
	overlap := func(a, b string) bool {
		ae, ap, _ := strings.Cut(pathKey(a), "/")
		be, bp, _ := strings.Cut(pathKey(b), "/")
		return ae == be && (access.Under("/"+ap, "/"+bp) || access.Under("/"+bp, "/"+ap))
	}
	for k, l := range ls {
		for _, o := range ls[k+1:] {
			switch {
			case overlap(l.Dst, o.Src) || overlap(o.Dst, l.Src):
				return bad("directories %d and %d: one is copied into the other", l.Item, o.Item)
			case overlap(l.Dst, o.Dst):
				return bad("directories %d and %d are copied into one place", l.Item, o.Item)
			}
		}
		for i, t := range tasks {
			if t.Src == "" {
				continue
			}
			for _, src := range append([]string{t.Src}, t.Replicas...) {
				if overlap(l.Dst, src) {
					return bad("file %d reads %s, inside directory %d's destination", i, src, l.Item)
				}
			}
			if overlap(t.Dst, l.Src) {
				return bad("file %d writes %s, inside directory %d's source", i, t.Dst, l.Item)
			}
		}
	}
	return nil
}

func parseChecksum(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	algo, sum, ok := strings.Cut(c, ":")
	algo = strings.ToLower(strings.TrimSpace(algo))
	sum = strings.ToLower(strings.TrimSpace(sum))
	if !ok || sum == "" {
		return "", fmt.Errorf("checksum %q: want ALGO:HEX (e.g. adler32:0a1b2c3d)", c)
	}
	h, err := backend.NewHash(algo)
	if err != nil {
		return "", fmt.Errorf("checksum %q: %w", c, err)
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != h.Size() {
		return "", fmt.Errorf("checksum %q: not %d hex bytes of %s", c, h.Size(), algo)
	}
	return algo + ":" + sum, nil
}

// Submit validates and stores a job, and hands it to the scheduler.
// created is false when SubmissionID named an earlier job of the caller,
// which is returned instead.
func (s *Server) Submit(ctx context.Context, c Caller, spec JobSpec) (store.Job, bool, error) {
	bad := func(format string, a ...any) (store.Job, bool, error) {
		return store.Job{}, false, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
	}
	switch {
	case len(spec.Files) == 0:
		return bad("a job needs at least one file")
	case len(spec.Files) > MaxFilesPerJob:
		return bad("%d files in one job; the limit is %d", len(spec.Files), MaxFilesPerJob)
	case len(spec.Label) > 256 || len(spec.SubmissionID) > 256:
		return bad("label and submission_id are limited to 256 bytes")
	case spec.Streams < 0 || spec.Streams > wire.MaxStreams:
		return bad("streams %d: want 0 (the service chooses) to %d", spec.Streams, wire.MaxStreams)
	case spec.Streams > 0 && spec.Optimize:
		return bad("give streams or optimization, not both")
	case spec.Adaptive != nil && (spec.Streams > 0 || spec.Optimize):
		return bad("an adaptive job chooses its own streams: give adaptive, streams or optimization, not several")
	}
	adaptive, err := adaptiveJSON(spec.Adaptive)
	if err != nil {
		return store.Job{}, false, err
	}
	if spec.Selection != "" && !slices.Contains(copyjob.SplitNames(), spec.Selection) {
		return bad("selection %q: want one of %s", spec.Selection, strings.Join(copyjob.SplitNames(), ", "))
	}
	switch spec.Overwrite {
	case store.OverwriteKeep, store.OverwriteFail, store.OverwriteReplace:
	default:
		if store.SyncLevel(spec.Overwrite) == "" {
			return bad("overwrite %q: want %q, %q, %q or %s followed by one of %s", spec.Overwrite, store.OverwriteKeep, store.OverwriteFail, store.OverwriteReplace,
				store.OverwriteSync, strings.Join(backend.SyncLevels(), ", "))
		}
	}
	class := spec.Class
	if class == "" {
		class = store.ClassInteractive
	}
	if class != store.ClassInteractive && class != store.ClassBatch {
		return bad("class %q: want interactive or batch", spec.Class)
	}
	algo := strings.ToLower(spec.Checksum)
	if algo == "" {
		algo = "adler32"
	}
	if _, err := backend.NewHash(algo); err != nil && algo != "none" {
		return bad("checksum algorithm %q: want one of %v or none", spec.Checksum, backend.Algorithms)
	}
	verify := spec.VerifyChecksum == nil || *spec.VerifyChecksum
	if algo == "none" {
		verify = false
	}
	retry := DefaultRetry
	if spec.Retry != nil {
		if *spec.Retry < 0 || *spec.Retry > 100 {
			return bad("retry %d: want 0 to 100", *spec.Retry)
		}
		retry = *spec.Retry
	}
	now := s.now()
	if !spec.Deadline.IsZero() && !spec.Deadline.After(now) {
		return bad("deadline %s has already passed", spec.Deadline.UTC().Format(time.RFC3339))
	}
	if err := checkMetadata(spec.Metadata); err != nil {
		return bad("job %v", err)
	}
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return store.Job{}, false, err
	}
	acc, err := s.accessFor(ctx, c)
	if err != nil {
		return store.Job{}, false, err
	}
	// Directories copied whole become listings (listing.go); the other
	// items, files, become tasks below, each at its item's index.
	var listings []store.Listing
	for i, f := range spec.Files {
		if !f.Recursive {
			continue
		}
		l, err := recursiveItem(idx, acc, i, f)
		if err != nil {
			return store.Job{}, false, err
		}
		listings = append(listings, l)
	}
	tasks := make([]store.Task, len(spec.Files))
	dsts := make(map[string]int, len(spec.Files))
	var total int64 // of the sizes given, each at most store.MaxSize
	for i, f := range spec.Files {
		if f.Recursive {
			continue // a listing: its tasks come as it lists
		}
		se, sp, err := parseFileURL(idx, f.Source)
		if err != nil {
			return bad("file %d: source %v", i, err)
		}
		de, dp, err := parseFileURL(idx, f.Destination)
		if err != nil {
			return bad("file %d: destination %v", i, err)
		}
		if err := acc.Allow(se.Name, sp, AccessRead); err != nil {
			return store.Job{}, false, fmt.Errorf("file %d: %w", i, err)
		}
		if err := acc.AllowWriteIn(de.Name, path.Dir(dp)); err != nil {
			return store.Job{}, false, fmt.Errorf("file %d: destination %s: %w", i, f.Destination, err)
		}
		if dp == "/" || strings.HasSuffix(f.Destination, "/") {
			return bad("file %d: destination %q names a directory; give the file's full path", i, f.Destination)
		}
		if se.Name == de.Name && sp == dp {
			return bad("file %d: source and destination are the same file %q", i, f.Destination)
		}
		key := de.Name + dp
		if j, dup := dsts[key]; dup {
			return bad("files %d and %d have the same destination %q", j, i, f.Destination)
		}
		dsts[key] = i
		sum, err := parseChecksum(f.Checksum)
		if err != nil {
			return bad("file %d: %v", i, err)
		}
		if err := checkMetadata(f.Metadata); err != nil {
			return bad("file %d: %v", i, err)
		}
		if f.Size < -1 || f.Size > store.MaxSize {
			return bad("file %d: size %d: want 0 to %d bytes (1 EiB), or -1 for unknown", i, f.Size, int64(store.MaxSize))
		}
		if f.Size > 0 {
			// Bounded too, so that no sum of a job's bytes comes near
			// int64's limit (a sum of two files of 2^63-1 bytes wrapped
			// to -2 and made every listing of the job fail).
			if total += f.Size; total > store.MaxSize {
				return bad("file %d: the files' sizes add up to more than %d bytes (1 EiB), the most one job may move", i, int64(store.MaxSize))
			}
		}
		state := store.StateQueued
		if f.Size < 0 {
			state = store.StateResolving
		}
		var replicas []string
		if len(f.Replicas) > 0 {
			if len(f.Replicas) > MaxReplicas-1 {
				return bad("file %d: %d sources; at most %d replicas of a file", i, len(f.Replicas)+1, MaxReplicas)
			}
			seen := map[string]bool{se.Name: true}
			for k, r := range f.Replicas {
				re, rp, err := parseFileURL(idx, r)
				if err != nil {
					return bad("file %d: source %d: %v", i, k+2, err)
				}
				if re.Storage() || se.Storage() || de.Storage() {
					return bad("file %d: a file read from several replicas is copied between agents only (the replicas vote on checksums of ranges, which agents compute)", i)
				}
				if seen[re.Name] {
					return bad("file %d: two sources on endpoint %q: replicas must be on different endpoints", i, re.Name)
				}
				if re.Name == de.Name && rp == dp {
					return bad("file %d: source %d %q is the file's destination", i, k+2, r)
				}
				if err := acc.Allow(re.Name, rp, AccessRead); err != nil {
					return store.Job{}, false, fmt.Errorf("file %d: source %d: %w", i, k+2, err)
				}
				seen[re.Name] = true
				replicas = append(replicas, scheme(r)+re.Name+rp)
			}
			// Every replica is stat'ed before the file queues, to check
			// they are copies of one file.
			state = store.StateResolving
		}
		tasks[i] = store.Task{
			Index: i, Src: scheme(f.Source) + se.Name + sp, Dst: scheme(f.Destination) + de.Name + dp,
			SrcEndpoint: se.Name, DstEndpoint: de.Name, Size: f.Size, Expected: sum, Replicas: replicas, Metadata: f.Metadata,
			Batch: class == store.ClassBatch, State: state, Arrival: now,
		}
	}
	// No file may read what another writes: a job's files run in no set
	// order, so the copy would read the file before, during or after
	// the other one replaces it.
	for i := range tasks {
		if tasks[i].Src == "" {
			continue // a directory's item
		}
		for k := -1; k < len(tasks[i].Replicas); k++ {
			src, what := tasks[i].Src, "source"
			if k >= 0 {
				src, what = tasks[i].Replicas[k], fmt.Sprintf("source %d", k+2)
			}
			if j, ok := dsts[pathKey(src)]; ok && j != i {
				return bad("files %d and %d: the %s of file %d is the destination of file %d (%s); the files of a job run in no set order: submit them as two jobs, one after the other", i, j, what, i, j, src)
			}
		}
		// Nor may a destination be inside another: that one would have
		// to be a file and a directory at once, and whichever file
		// came second would fail (after every retry).
		key := pathKey(tasks[i].Dst)
		for dir := key; ; {
			k := strings.LastIndexByte(dir, '/')
			if k <= strings.IndexByte(key, '/') {
				break // at the endpoint's root
			}
			dir = dir[:k]
			if j, ok := dsts[dir]; ok {
				return bad("files %d and %d: the destination of file %d (%s) is inside that of file %d (%s), which is a file", i, j, i, tasks[i].Dst, j, tasks[j].Dst)
			}
		}
	}
	if err := listingsApart(listings, tasks); err != nil {
		return store.Job{}, false, err
	}
	tasks = slices.DeleteFunc(tasks, func(t store.Task) bool { return t.Src == "" })
	if spec.Adaptive != nil {
		if err := s.adaptiveFits(adaptiveDefaults(*spec.Adaptive).P, tasks); err != nil {
			return store.Job{}, false, err
		}
	}
	j := store.Job{
		OwnerID: c.User.ID, Owner: c.User.Name, VO: c.User.VO, SubmissionID: spec.SubmissionID,
		Label: spec.Label, Class: class, Priority: spec.Priority, Deadline: spec.Deadline,
		VerifyChecksum: verify, Checksum: algo, Retry: retry, Optimize: spec.Optimize, Streams: spec.Streams, Adaptive: adaptive, Selection: spec.Selection, Overwrite: spec.Overwrite, PreserveModTime: spec.PreserveModTime, Metadata: spec.Metadata, State: store.StateActive, Created: now,
		Listings: listings,
	}
	created, err := s.st.CreateJob(ctx, &j, tasks)
	if err != nil {
		return store.Job{}, false, fmt.Errorf("server: storing job: %w", err)
	}
	if !created {
		return j, false, nil
	}
	// The job is durable now: the servers that schedule its sources'
	// partitions claim its tasks (cluster.go), woken by the hints or at
	// their next poll at the latest.
	s.met.jobsSubmitted.Inc()
	s.wakeUp()
	if err := s.st.Notify(context.WithoutCancel(ctx), cluster.WorkChannel); err != nil {
		s.log.Warn("notifying other servers of a new job", "job", j.ID, "err", err)
	}
	s.events.publish(Event{Type: "job", Job: j.ID, Owner: j.OwnerID, State: j.State})
	return j, true, nil
}

// pathKey is the key of a task's URL (scheme and endpoint's name
// resolved, path cleaned) in Submit's map of destinations:
// ENDPOINT/path.
func pathKey(u string) string {
	_, k, _ := strings.Cut(u, "://")
	return k
}

func scheme(u string) string {
	if strings.HasPrefix(u, "sluices://") {
		return "sluices://"
	}
	return "sluice://"
}

// visible returns the job if the caller may see it.
func (s *Server) visible(ctx context.Context, c Caller, id int64) (store.Job, error) {
	j, err := s.st.Job(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !c.User.Admin && j.OwnerID != c.User.ID) {
		// Someone else's job is reported as missing, not as forbidden:
		// ids are not secrets, but their existence is nobody's business.
		return store.Job{}, fmt.Errorf("%w: job %d", ErrNotFound, id)
	}
	if err != nil {
		return store.Job{}, fmt.Errorf("server: %w", err)
	}
	return j, nil
}

// Job returns one job's status.
func (s *Server) Job(ctx context.Context, c Caller, id int64) (JobStatus, error) {
	j, err := s.visible(ctx, c, id)
	if err != nil {
		return JobStatus{}, err
	}
	return s.status(j), nil
}

func (s *Server) status(j store.Job) JobStatus {
	st := JobStatus{Job: j}
	s.mu.Lock()
	live, ok := s.jobLive[j.ID]
	s.mu.Unlock()
	if ok && j.State == store.StateActive {
		st.Throughput = live.rate
		st.BytesDone = min(store.AddBytes(st.BytesDone, live.extra), max(st.Bytes, st.BytesDone))
		if st.Throughput > 0 && st.Bytes > st.BytesDone {
			st.ETA = float64(st.Bytes-st.BytesDone) / st.Throughput
		}
	}
	return st
}

// Jobs lists the caller's jobs (an admin's: everyone's, or one user's).
func (s *Server) Jobs(ctx context.Context, c Caller, f store.JobFilter) ([]JobStatus, error) {
	if !c.User.Admin {
		f.OwnerID = c.User.ID
	}
	js, err := s.st.Jobs(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	out := make([]JobStatus, len(js))
	for i, j := range js {
		out[i] = s.status(j)
	}
	return out, nil
}

// FilesPage is how many files Files lists when asked for 0 (the API's
// default page). A job may have a million files: none is listed whole
// in one answer.
const FilesPage = 1000

// Files lists a job's files, at most limit from index from (limit 0:
// FilesPage).
func (s *Server) Files(ctx context.Context, c Caller, id int64, from, limit int) ([]store.Task, error) {
	return s.FilesInState(ctx, c, id, "", from, limit)
}

// FilesInState is Files of the files in state only ("": all), so that a
// client finds a large job's few failed files without reading the rest.
func (s *Server) FilesInState(ctx context.Context, c Caller, id int64, state string, from, limit int) ([]store.Task, error) {
	if _, err := s.visible(ctx, c, id); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = FilesPage
	}
	var ts []store.Task
	var err error
	if state == "" {
		ts, err = s.st.Tasks(ctx, id, from, limit)
	} else {
		ts, err = s.st.TasksInState(ctx, id, state, from, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return ts, nil
}

// Cancel cancels a job: files not yet done are abandoned and their partial
// copies removed. Files already done stay. A file whose run was past its
// last check (verified and being renamed) when the cancel came is in
// place, and the store records it done: the job's done count may still
// rise after Cancel returns (seconds later; or at the next sweep of
// ended tasks, if the server stopped between the rename and the write).
func (s *Server) Cancel(ctx context.Context, c Caller, id int64) (JobStatus, error) {
	j, err := s.visible(ctx, c, id)
	if err != nil {
		return JobStatus{}, err
	}
	// The store has the final word on a cancel: the schedulers' fenced
	// writes leave a canceled task canceled. The server that schedules a
	// task stops its run when it hears (here at once, elsewhere by the
	// hint or at the next poll).
	ids, err := s.st.CancelJob(ctx, id, s.now(), c.User.Name)
	if errors.Is(err, store.ErrConflict) {
		// The job ended while the cancel ran (PostgreSQL: its last file
		// was recorded in between): answer as for an ended job.
		if st, err2 := s.Job(ctx, c, id); err2 == nil && st.State != store.StateActive {
			return st, nil
		}
		return JobStatus{}, fmt.Errorf("%w: job %d changed while it was being canceled; try again: %v", ErrConflict, id, err)
	}
	if err != nil {
		return JobStatus{}, fmt.Errorf("server: %w", err)
	}
	if len(ids) > 0 || j.State == store.StateActive {
		s.do(context.WithoutCancel(ctx), func(w *world) { w.jobCanceled(id) })
		if err := s.st.Notify(context.WithoutCancel(ctx), cluster.WorkChannel); err != nil {
			s.log.Warn("notifying other servers of a cancel", "job", id, "err", err)
		}
	}
	return s.Job(ctx, c, id)
}

// AuditPage is how many entries Audit lists when asked for 0. A job of a
// million files has some three million.
const AuditPage = 1000

// Audit returns a job's state changes, at most limit from the from-th
// (limit 0: AuditPage), oldest first.
func (s *Server) Audit(ctx context.Context, c Caller, id int64, from, limit int) ([]store.AuditEntry, error) {
	if _, err := s.visible(ctx, c, id); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = AuditPage
	}
	es, err := s.st.AuditPage(ctx, id, from, limit)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return es, nil
}
