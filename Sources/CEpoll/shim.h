// Linux's readiness calls, which Glibc's Swift module leaves out: epoll(7) and eventfd(2) for
// HTTPServer's event loops, and the two calls the loops' threads make about themselves.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The processors this process may run on (its affinity mask, as taskset sets it), at least 1.
static inline int cepoll_allowed_processors(void) {
    unsigned long mask[16] = {0};
    long size = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    int count = 0;
    for (long i = 0; i < size / (long)sizeof(unsigned long); i++) count += __builtin_popcountl(mask[i]);
    return count > 0 ? count : 1;
}

/// Names the calling thread (top, perf and gdb show it); at most 15 characters are kept.
static inline void cepoll_name_thread(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// Whether every page of the first `size` bytes of `fd` is in the page cache: 1 yes, 0 no, -1 the
/// kernel cannot say (cachestat(2), Linux 6.5 and later). A query of the cache alone, with no I/O,
/// so an event loop may ask even when the file system below has stopped answering.
static inline int cepoll_file_cached(int fd, long long size) {
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
    struct { unsigned long long off, len; } range = { 0, (unsigned long long)size };
    struct { unsigned long long nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; } stat = {0};
    if (size <= 0) return 1;
    if (syscall(__NR_cachestat, fd, &range, &stat, 0) != 0) return -1;
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long pages = ((unsigned long long)size + (unsigned long long)page - 1) / (unsigned long long)page;
    return stat.nr_cache >= pages ? 1 : 0;
}
