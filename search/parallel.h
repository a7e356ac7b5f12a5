#pragma once

// ParallelFor: runs fn(0) ... fn(n - 1) on up to `threads` std::threads (the caller's thread is
// one of them) and returns when all are done. Items are handed out in index order; a result
// that depends only on its index (each item seeded by its index, writing its own slot) is the
// same for every thread count.
//
// Threads: fn is called from several threads at once; it must only touch its own item's state
// and state that is safe to share.

#include <functional>

namespace tessel::search {

// `threads` <= 0: std::thread::hardware_concurrency().
int ResolveThreads(int threads);

void ParallelFor(int n, int threads, const std::function<void(int)>& fn);

}  // namespace tessel::search
