// Room in the server's main shared memory for kvg's per-call segments.
//
// Every call hands its request to a worker in a dynamic shared memory
// segment of its own (toc_segment.hpp): the engine worker's call segment,
// the audit writer's row. By default PostgreSQL makes each one a POSIX
// shared memory file that both sides map and unmap; on a small model that
// costs more than the arithmetic: a file created and removed, two mmaps and
// two munmaps per segment, each munmap a TLB shootdown across the cores
// (expensive in a virtual machine). PostgreSQL's min_dynamic_shared_memory
// carves segments out of memory the postmaster mapped once, which every
// process already has: no system call at all.
//
// So kvg, preloaded, gives min_dynamic_shared_memory a default of its own
// (kDefault) where the server's configuration does not set it. A value from
// postgresql.conf, ALTER SYSTEM or the command line is the server's and
// wins, 0 included. A segment that does not fit in the space (a large
// artifact on its way to the audit writer, many at once) is made as before.
#pragma once

namespace kvg::pg::segment_space {

// Enough for hundreds of calls in flight and artifacts of several MB; the
// postmaster maps it at start, and pages never used are never touched.
inline constexpr const char* kDefault = "64MB";

// From _PG_init under shared_preload_libraries, before the postmaster sizes
// its shared memory. Never raises.
void default_at_preload();

}  // namespace kvg::pg::segment_space
