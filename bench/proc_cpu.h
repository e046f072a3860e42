// CPU seconds that /proc counts for a process and for a PostgreSQL server,
// for benches that say how busy the scheduler and the database kept the
// cores (sched_bench, queue_scale).
//
// Thread-safe (reads /proc only); Linux only.
#ifndef BENCH_PROC_CPU_H_
#define BENCH_PROC_CPU_H_

#include <sys/types.h>

namespace farm::bench {

// User + system CPU seconds of `pid` (/proc/PID/stat), with those of its
// reaped children when `reaped`; its parent in *ppid when not null. 0 when
// the process is gone.
double ProcessCpuSeconds(pid_t pid, bool reaped, pid_t* ppid = nullptr);

// A PostgreSQL server's CPU seconds so far: the postmaster with the
// children it reaped (backends of closed sessions) plus its live children
// (backends, WAL writer, checkpointer, autovacuum).
double PostgresCpuSeconds(pid_t postmaster);

// This process's user + system CPU seconds (every thread).
double SelfCpuSeconds();

}  // namespace farm::bench

#endif  // BENCH_PROC_CPU_H_
