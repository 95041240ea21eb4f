package server

import (
	"iter"
	"slices"
)

// taskTable holds the loop's tasks: a map for lookups by ID and a slice in
// ID order for walks. A server that owns a large facility's partitions
// holds a million queued tasks, and every cycle's snapshot walks them
// all: over the slice that walk is cache-friendly and already in the
// order the scheduler needs (decisions must not depend on map order),
// where a map walk plus a sort cost over a second per cycle (the store
// scale benchmark of issue 10, docs/results/scale/store.md).
//
// Removal only marks a task; the slice drops marked tasks when a walk
// starts and they are a quarter of it, so removing a task during a walk
// (forget, complete) is safe and costs O(1).
type taskTable struct {
	byID   map[int64]*task
	order  []*task // ID order when sorted; may hold removed tasks
	sorted bool
	dead   int // removed tasks still in order
	walks  int // walks in progress: no compaction or sort under them
}

func newTaskTable() taskTable {
	return taskTable{byID: map[int64]*task{}, sorted: true}
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
	if n := len(tt.order); n > 0 && tt.order[n-1].ID > t.ID {
		tt.sorted = false
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

// all walks the tasks in ID order. Tasks added during the walk may or may
// not be visited, as with a map; removed ones are not.
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

// tidy drops removed tasks once they are a quarter of the slice, and
// restores ID order after out-of-order adds (claims of several partitions
// interleave IDs).
func (tt *taskTable) tidy() {
	if tt.dead > 0 && tt.dead >= len(tt.order)/4 {
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
	if !tt.sorted {
		slices.SortFunc(tt.order, func(a, b *task) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		tt.sorted = true
	}
}
