package server

import "iter"

// taskTable holds the loop's tasks: a map for lookups by ID and a slice in
// the order they were added for walks. A server that owns a large
// facility's partitions holds a million queued tasks, and every cycle's
// snapshot walks them all. A map walk (plus the sort that keeps decisions
// independent of map order) cost over a second per cycle at that size (the
// store scale benchmark, docs/results/scale/store.md). A walk
// in ID order was no cure either: a take-over claims partition by
// partition, so consecutive IDs lie far apart in memory. The order tasks
// were added is the order they were allocated in, the one a walk reads
// fastest; the snapshot sorts what it hands the scheduler (sched.IDSorter).
//
// Removal only marks a task; the slice drops marked tasks when a walk
// starts and they are a quarter of it, so removing a task during a walk
// (forget, complete) is safe and costs O(1).
type taskTable struct {
	byID  map[int64]*task
	order []*task // in the order added; may hold removed tasks
	dead  int     // removed tasks still in order
	walks int     // walks in progress: no compaction under them
}

func newTaskTable() taskTable {
	return taskTable{byID: map[int64]*task{}}
}

// get returns the task with the ID, or nil.
func (tt *taskTable) get(id int64) *task { return tt.byID[id] }

// len is the number of tasks in the table.
func (tt *taskTable) len() int { return len(tt.byID) }

// add puts t in the table, replacing nothing: the caller checks get first.
func (tt *taskTable) add(t *task) {
	if old := tt.byID[t.ID]; old == t {
		return
	} else if old != nil {
		tt.remove(old)
	}
	tt.byID[t.ID] = t
	t.removed = false
	if t.listed {
		tt.dead-- // removed earlier and still in order: live again
		return
	}
	tt.order = append(tt.order, t)
	t.listed = true
}

// remove takes t out of the table.
func (tt *taskTable) remove(t *task) {
	if tt.byID[t.ID] != t {
		return
	}
	delete(tt.byID, t.ID)
	t.removed = true
	tt.dead++
}

// all walks the tasks in the order they were added. Tasks added during
// the walk may or may not be visited, as with a map; removed ones are not.
func (tt *taskTable) all() iter.Seq[*task] {
	return func(yield func(*task) bool) {
		if tt.walks == 0 {
			tt.tidy()
		}
		tt.walks++
		defer func() { tt.walks-- }()
		for i := 0; i < len(tt.order); i++ {
			if t := tt.order[i]; !t.removed {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// tidy drops removed tasks once they are a quarter of the slice.
func (tt *taskTable) tidy() {
	if tt.dead == 0 || tt.dead < len(tt.order)/4 {
		return
	}
	live := tt.order[:0]
	for _, t := range tt.order {
		if t.removed {
			t.listed = false
			continue
		}
		live = append(live, t)
	}
	clear(tt.order[len(live):]) // let the removed tasks be collected
	tt.order = live
	tt.dead = 0
}
