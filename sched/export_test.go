package sched

// SetEager makes a SEAL, STEAL or seal+ scheduler test saturation for
// every waiting task, also where the answer does not count.
func SetEager(s Scheduler) { s.(*SEAL).eager = true }
