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
