package dataset

import (
	"slices"
	"sync"
)

// Queue holds the chunks a running job has still to transfer: workers
// Dequeue the next chunk while the job's owner Enqueues more or Removes
// files it no longer wants (the paper's enqueue and dequeue). It is safe
// for concurrent use; the zero value is an empty queue.
type Queue struct {
	mu     sync.Mutex
	chunks []Chunk
}

// Enqueue appends chunks at the back. Empty chunks are dropped; the
// queue keeps its own copy of each chunk's file list.
func (q *Queue) Enqueue(chunks ...Chunk) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range chunks {
		if len(c.Files) > 0 {
			c.Files = slices.Clone(c.Files)
			q.chunks = append(q.chunks, c)
		}
	}
}

// Requeue puts a chunk back at the front, for a worker whose transfer of
// it failed and should be retried before anything else.
func (q *Queue) Requeue(c Chunk) {
	if len(c.Files) == 0 {
		return
	}
	c.Files = slices.Clone(c.Files)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.chunks = slices.Insert(q.chunks, 0, c)
}

// Dequeue removes and returns the chunk at the front; ok is false when the
// queue is empty.
func (q *Queue) Dequeue() (c Chunk, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.chunks) == 0 {
		return Chunk{}, false
	}
	c = q.chunks[0]
	q.chunks[0] = Chunk{} // let the file list be collected once c is done
	q.chunks = q.chunks[1:]
	return c, true
}

// Remove takes the files for which match is true out of the queued chunks
// (dropping chunks it empties) and returns them in queue order: how a job
// gives up part of its dataset while it runs. A chunk already dequeued is
// not affected.
func (q *Queue) Remove(match func(File) bool) []File {
	q.mu.Lock()
	defer q.mu.Unlock()
	var removed []File
	kept := q.chunks[:0]
	for _, c := range q.chunks {
		var rest []File
		for _, f := range c.Files {
			if match(f) {
				removed = append(removed, f)
			} else {
				rest = append(rest, f)
			}
		}
		if len(rest) > 0 {
			c.Files = rest
			kept = append(kept, c)
		}
	}
	clear(q.chunks[len(kept):])
	q.chunks = kept
	return removed
}

// Len is the number of chunks queued.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.chunks)
}

// Pending is the number of files and bytes queued.
func (q *Queue) Pending() (files int, bytes int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range q.chunks {
		files += len(c.Files)
		bytes += c.Size()
	}
	return files, bytes
}
