// Package engine owns the execution of one file transfer between two
// backend.Backend values: splitting the file into partial transfers run by
// concurrent workers, the checkpoint journal that makes a transfer
// resumable and preemptible (SC'15 §4.5), retries of transient errors,
// end-to-end checksum verification, and the atomic appearance of the
// finished file at its destination path.
//
// # Life of a transfer
//
// Start validates the Spec and runs the transfer in the background; the
// returned *Transfer is the handle a scheduler acts on (Progress, SetCC,
// Pause, Resume, Wait). The data goes to a temporary file in the
// destination's directory, ".NAME.sluice-part" (TempName), allocated with
// Truncate at a fresh start. Its name is deterministic so that a rerun after
// a crash finds it. Only after every byte range is written, the temporary
// file is synced and the checksums computed at both ends agree is it renamed
// over the destination path; the destination path therefore never holds a
// half-written or unverified file.
//
// # Several replicas
//
// With Spec.Sources the file is read from several replicas at once (a
// multi-source download of Yang, Schopf, Foster, "Improving Parallel Data
// Transfer Times Using Predicted Variances in Shared Networks"): each replica
// gets a contiguous part of the missing bytes in proportion to its Share, cut
// into chunks as below, and CC workers of its own; the journal, the
// verification (against the first replica still in use) and the rename are
// the same. A replica whose chunk fails Retry.Attempts times in a row is
// dropped and its bytes are spread over the others; a checksum mismatch is
// traced, by range checksums (backend.RangeChecksummer), to the replica that
// delivered the wrong bytes, which is dropped while its ranges are fetched
// again. With Spec.Steal a replica whose part is done takes over the tail of
// the one expected to finish last (multisrc.Steal). See multi.go.
//
// # Chunks, sub-writes and the journal
//
// The missing bytes are cut into chunks of max(ChunkMin, ceil(missing/(4·CC)))
// bytes: about four chunks per worker, so that workers finishing at different
// times leave little tail, but never below ChunkMin, which keeps each
// partial transfer (one range request) above a WAN bandwidth-delay product
// so its start-up cost is amortised. A worker streams a chunk from one
// OpenRange of the source into WriteAt calls of at most SubWrite bytes
// (4 MiB by default) on the temporary file; nothing is buffered beyond
// io.Copy's buffer. An idle worker (the queue is empty, or SetCC added
// workers) steals the second half of the largest chunk in flight if at least
// 2·ChunkMin of it is left, so raising concurrency takes effect at once and
// the tail of a transfer keeps every worker busy. With Spec.Pull each
// sub-write is a request of its own, so a split costs no connection: chunks
// are split down to halves of 256 KiB, and the sub-writes shrink as the file
// nears its end (a quarter of what is left per worker), so that the last
// bytes are not left to one stream pulling a whole sub-write alone.
//
// A byte range counts as done only after the WriteAt that carried it
// returned. Done ranges are kept as merged intervals and written to the
// journal (a small JSON file, replaced atomically: temporary file, fsync,
// rename) every CheckpointEvery (1 s by default, as in SC'15 §4.5), when a
// pause completes, when the copy phase ends and when the transfer stops on
// an error or cancellation. By default a range is recorded once WriteAt
// returned, without syncing the destination: the data is then in the
// destination host's page cache, which survives the sluice process being
// killed (kill -9) but not a crash of the destination host. With
// Spec.Durable the destination is synced before each checkpoint, and only
// ranges written before that sync are recorded, which survives host
// crashes at the price of one sync per checkpoint.
//
// # Re-sent bytes
//
// Pause and SetCC down stop workers at sub-write boundaries and lose
// nothing (a pause takes at most one sub-write's time). Cancellation and
// errors abandon the sub-write in flight. So the bytes sent again after an
// interruption are at most CC·SubWrite when the process exits normally (the
// journal is written on the way out), plus the bytes completed since the
// last checkpoint (at most CheckpointEvery's worth) when it is killed; each
// retried transient error costs at most one more SubWrite. On resume only
// the missing intervals are sent. TestKillAndResume checks both bounds.
//
// # Resume and start-over
//
// A journal is used if it parses, is internally consistent and names the
// same source path, destination path, size and (if the source backend
// reports one) source modification time, and if the temporary file exists
// with the expected size. Otherwise the transfer starts over from an empty
// temporary file and Progress.Note / Result.Note say why. A corrupt journal
// is never an error, only a reason to start over.
//
// # Errors
//
// Errors classified permanent by backend.Permanent (not found, permission,
// no space, invalid, cancellation) fail the transfer at once and cancel the
// other workers; the temporary file and journal stay so that a rerun
// resumes. Other errors are retried per chunk with jittered exponential
// backoff (RetryPolicy); a chunk fails the transfer after Attempts
// consecutive failures without progress. A source whose size or
// modification time changes fails with ErrSourceChanged. A checksum
// mismatch discards the temporary file and journal and copies the whole
// file once more from scratch; a second mismatch fails with ErrChecksum,
// naming both sums. The package has no global mutable state: everything
// lives in a Transfer.
package engine
