// watch_reactor: the server side of one JobService/WatchMatrix stream.
//
// Authorized on the pool, then joined to the WatchHub, which
// reads the matrix for all of its streams (on change notifications, at most
// once per min_interval, else every fallback_poll) and hands each read
// over. The stream sends a message when the counts changed, on a fallback
// read (keep-alive, fresh rate/ETA) and when the matrix is done, and checks
// its principal again at each read. Database outages do not end a stream
// that has sent something.
//
// Concurrency: at most one step (a task on the pool or a write in flight)
// at a time (`busy_`, set from the start: authorization is the first step).
// Reads handed over meanwhile wait in `pending_` (the newest wins; a
// fallback read's "send anyway" is kept) and cause one more step when this
// one ends. Finish is called only between steps or by the step itself, so
// never with a write in flight. The reactor is deleted when gRPC is done
// with it and no posted task still refers to it.
#ifndef SCHEDULER_WATCH_REACTOR_H_
#define SCHEDULER_WATCH_REACTOR_H_

#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "iommufarm/v1/farm.grpc.pb.h"
#include "scheduler/authz.h"
#include "scheduler/watch_hub.h"
#include "scheduler/worker_pool.h"

namespace farm::scheduler {

// A new stream for `matrix_id`, its first step (authorization) already
// scheduled on `pool`. The pool, the authorizer and the hub are not owned
// and must outlive the stream.
grpc::ServerWriteReactor<pb::MatrixProgress>* NewWatchReactor(grpc::CallbackServerContext* ctx,
                                                              WorkerPool* pool, Authorizer* authz,
                                                              WatchHub* hub, int64_t matrix_id);

}  // namespace farm::scheduler

#endif  // SCHEDULER_WATCH_REACTOR_H_
