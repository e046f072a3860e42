// Accept limit: a process-wide bound on the descriptor an accepted
// connection may take, so that incoming connections alone can never fill
// the descriptor table.
//
// Why: gRPC 1.51 (Debian bookworm) has no cap on incoming connections, and
// its TCP listener treats EMFILE from accept4() as fatal: it logs "Too many
// open files" once and never accepts again, though the process stays up.
// About a thousand connections that never start TLS were enough. This
// module defines accept4() in the executable, which the dynamic linker
// binds gRPC's (and every other library's) accept4 calls to ahead of
// glibc's; it calls glibc's accept4 and
//  - closes a connection whose descriptor is at or above the limit (the
//    table then holds at least `limit` descriptors) and accepts the next,
//    so a full server refuses by closing instead of wedging;
//  - reports EMFILE/ENFILE as EAGAIN, which gRPC answers by waiting for the
//    next connection instead of giving the listener up.
// Descriptors below the limit stay for PostgreSQL, files and outgoing
// calls. A second, per-peer limit keeps one address (one host, or one
// attacker with a certificate of the farm) from taking every slot: a
// connection from an address that already holds `per peer` open accepted
// connections is closed at accept the same way. With no limits set (the
// default) accept4 behaves as glibc's.
//
// Only a binary that calls SetAcceptFdLimit() links this in.
//
// Thread-safety: thread-safe (atomics; the per-peer table under a mutex);
// call the setters before the server listens.
#ifndef LIB_SERVICE_ACCEPT_LIMIT_H_
#define LIB_SERVICE_ACCEPT_LIMIT_H_

#include <cstdint>

namespace farm::service {

// Accepted descriptors numbered >= `limit` are closed at once; 0: no limit.
void SetAcceptFdLimit(int limit);
int AcceptFdLimit();
// At most `limit` open accepted connections per peer address (IPv4, IPv6;
// an IPv4-mapped IPv6 address counts as its IPv4 one); 0: no limit.
void SetAcceptPeerLimit(int limit);
int AcceptPeerLimit();
// Connections closed by either limit since the process started.
int64_t AcceptRefusals();

// The limit for a process whose soft RLIMIT_NOFILE is `open_file_limit`:
// that minus `reserve` descriptors kept for everything else (at least half
// the table is kept when the limit is small).
int AcceptFdLimitFor(int64_t open_file_limit, int reserve = 256);

}  // namespace farm::service

#endif  // LIB_SERVICE_ACCEPT_LIMIT_H_
