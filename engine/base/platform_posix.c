/*
 * platform_posix.c - platform.h on POSIX systems (Linux, macOS, the BSDs).
 *
 * DESIGN: thin wrappers; every failure becomes a dp_status plus a message naming the path and
 * strerror(). EINTR is retried where POSIX allows it; a failed fsync is never retried (after a
 * failed writeback Linux may mark the pages clean, so a second fsync would lie). Opaque types
 * from platform.h are checked against the real pthread sizes at compile time.
 */
#include "platform.h"

#include "name_list.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <dirent.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(pthread_t) <= sizeof(((dp_thread *)0)->opaque), "dp_thread too small");
_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((dp_mutex *)0)->opaque), "dp_mutex too small");
_Static_assert(sizeof(pthread_cond_t) <= sizeof(((dp_cond *)0)->opaque), "dp_cond too small");

static dp_status os_err(dp_err *err, const char *what, const char *path) {
    int e = errno;
    return dp_err_set(err, dp_status_from_errno(e), "%s %s: %s", what, path, strerror(e));
}

/* ---- Files ------------------------------------------------------------------------------ */

dp_status dp_file_open(dp_file *f, const char *path, int flags, dp_err *err) {
    int oflags = O_CLOEXEC;
    if ((flags & DP_FILE_READ) && (flags & DP_FILE_WRITE)) oflags |= O_RDWR;
    else if (flags & DP_FILE_WRITE) oflags |= O_WRONLY;
    else oflags |= O_RDONLY;
    if (flags & DP_FILE_CREATE) oflags |= O_CREAT;
    if (flags & DP_FILE_TRUNC) oflags |= O_TRUNC;
    if (flags & DP_FILE_APPEND) oflags |= O_APPEND;
    if (flags & DP_FILE_EXCL) oflags |= O_EXCL;
    f->handle = -1;
    f->mode = flags;
    snprintf(f->path, sizeof(f->path), "%s", path);
    int fd;
    do {
        fd = open(path, oflags, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return os_err(err, "cannot open", path);
    f->handle = fd;
    return DP_OK;
}

dp_status dp_file_close(dp_file *f, dp_err *err) {
    if (!f || f->handle < 0) return DP_OK;
    int fd = (int)f->handle;
    f->handle = -1;
    /* close() must not be retried on EINTR on Linux: the descriptor is already gone. */
    if (close(fd) != 0 && errno != EINTR) return os_err(err, "cannot close", f->path);
    return DP_OK;
}

dp_status dp_file_pread(dp_file *f, void *buf, size_t n, uint64_t off, dp_err *err) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread((int)f->handle, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return os_err(err, "cannot read", f->path);
        }
        if (r == 0) return dp_err_set(err, DP_EOF, "unexpected end of file in %s", f->path);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return DP_OK;
}

dp_status dp_file_write(dp_file *f, const void *buf, size_t n, dp_err *err) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write((int)f->handle, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return os_err(err, "cannot write", f->path);
        }
        p += w;
        n -= (size_t)w;
    }
    return DP_OK;
}

dp_status dp_file_size(dp_file *f, uint64_t *size, dp_err *err) {
    struct stat st;
    if (fstat((int)f->handle, &st) != 0) return os_err(err, "cannot stat", f->path);
    *size = (uint64_t)st.st_size;
    return DP_OK;
}

dp_status dp_file_truncate(dp_file *f, uint64_t size, dp_err *err) {
    int r;
    do {
        r = ftruncate((int)f->handle, (off_t)size);
    } while (r != 0 && errno == EINTR);
    if (r != 0) return os_err(err, "cannot truncate", f->path);
    return DP_OK;
}

dp_status dp_file_datasync(dp_file *f, dp_err *err) {
#if defined(__APPLE__)
    if (fcntl((int)f->handle, F_FULLFSYNC) != 0) return os_err(err, "cannot sync", f->path);
#else
    if (fdatasync((int)f->handle) != 0) return os_err(err, "cannot sync", f->path);
#endif
    return DP_OK;
}

dp_status dp_file_sync(dp_file *f, dp_err *err) {
#if defined(__APPLE__)
    if (fcntl((int)f->handle, F_FULLFSYNC) != 0) return os_err(err, "cannot sync", f->path);
#else
    if (fsync((int)f->handle) != 0) return os_err(err, "cannot sync", f->path);
#endif
    return DP_OK;
}

dp_status dp_dir_sync(const char *dir, dp_err *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return os_err(err, "cannot open directory", dir);
    int r = fsync(fd);
    int e = errno;
    close(fd);
    if (r != 0) {
        errno = e;
        return os_err(err, "cannot sync directory", dir);
    }
    return DP_OK;
}

dp_status dp_rename(const char *from, const char *to, dp_err *err) {
    if (rename(from, to) != 0) {
        int e = errno;
        return dp_err_set(err, dp_status_from_errno(e), "cannot rename %s to %s: %s", from, to,
                          strerror(e));
    }
    return DP_OK;
}

dp_status dp_remove(const char *path, dp_err *err) {
    if (unlink(path) != 0) return os_err(err, "cannot remove", path);
    return DP_OK;
}

dp_status dp_mkdir_p(const char *path, dp_err *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) return dp_err_set(err, DP_EINVAL, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return os_err(err, "cannot create directory", buf);
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0) return os_err(err, "cannot stat", path);
    if (!S_ISDIR(st.st_mode)) return dp_err_set(err, DP_EEXIST, "%s exists and is not a directory", path);
    return DP_OK;
}

bool dp_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

bool dp_dir_writable(const char *dir) { return access(dir, W_OK | X_OK) == 0; }

dp_status dp_file_read_all(const char *path, size_t max_bytes, char **data, size_t *len, dp_err *err) {
    dp_file f;
    uint64_t size = 0;
    *data = NULL;
    *len = 0;
    dp_status st = dp_file_open(&f, path, DP_FILE_READ, err);
    if (st) return st;
    st = dp_file_size(&f, &size, err);
    if (st) goto done;
    if (size > max_bytes) {
        st = dp_err_set(err, DP_ERANGE, "%s is %llu bytes, more than the limit of %zu", path,
                        (unsigned long long)size, max_bytes);
        goto done;
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        st = dp_err_set(err, DP_ENOMEM, "cannot allocate %llu bytes for %s", (unsigned long long)size, path);
        goto done;
    }
    st = dp_file_pread(&f, buf, (size_t)size, 0, err);
    if (st) {
        free(buf);
        goto done;
    }
    buf[size] = '\0';
    *data = buf;
    *len = (size_t)size;
done:
    dp_file_close(&f, NULL);
    return st;
}

dp_status dp_file_read_doc(const char *path, bool follow, const dp_stat_info *listed, size_t max_bytes, char **data,
                           size_t *len, dp_err *err) {
    *data = NULL;
    *len = 0;
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow ? 0 : O_NOFOLLOW));
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == ELOOP && !follow)
            return dp_err_set(err, DP_EACCES, "%s is now a symbolic link (replaced since it was listed); links are "
                              "not followed", path);
        return os_err(err, "cannot open", path);
    }
    dp_status st = DP_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = os_err(err, "cannot stat", path);
    } else if (!S_ISREG(sb.st_mode)) {
        st = dp_err_set(err, DP_EUNSUPPORTED, "%s is not a regular file (a %s is in its place)", path,
                        S_ISFIFO(sb.st_mode) ? "FIFO" : S_ISDIR(sb.st_mode) ? "folder" : S_ISSOCK(sb.st_mode) ? "socket"
                        : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "device" : "special file");
    } else if (listed && ((uint64_t)sb.st_dev != listed->dev || (uint64_t)sb.st_ino != listed->ino)) {
        st = dp_err_set(err, DP_EBUSY, "%s was replaced by another file since it was listed", path);
    } else if ((uint64_t)sb.st_size > max_bytes) {
        st = dp_err_set(err, DP_ERANGE, "%s is %llu bytes, more than the limit of %zu", path,
                        (unsigned long long)sb.st_size, max_bytes);
    } else {
        const size_t size = (size_t)sb.st_size;
        char *buf = malloc(size + 1);
        if (!buf) {
            st = dp_err_set(err, DP_ENOMEM, "cannot allocate %zu bytes for %s", size, path);
        } else {
            size_t got = 0;
            while (got < size) {
                ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
                if (r < 0 && errno == EINTR) continue;
                if (r < 0) {
                    st = os_err(err, "cannot read", path);
                    break;
                }
                if (r == 0) break; /* shrank while read: what is there */
                got += (size_t)r;
            }
            if (st) free(buf);
            else {
                buf[got] = '\0';
                *data = buf;
                *len = got;
            }
        }
    }
    close(fd);
    return st;
}

dp_status dp_path_resolve(const char *path, char **out, dp_err *err) {
    *out = realpath(path, NULL);
    return *out ? DP_OK : os_err(err, "cannot resolve", path);
}

dp_status dp_stat(const char *path, bool follow, dp_stat_info *out, dp_err *err) {
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) return os_err(err, "cannot stat", path);
    out->kind = S_ISREG(st.st_mode) ? DP_KIND_FILE : S_ISDIR(st.st_mode) ? DP_KIND_DIR
              : S_ISLNK(st.st_mode) ? DP_KIND_LINK : DP_KIND_OTHER;
    out->size = (uint64_t)st.st_size;
    out->dev = (uint64_t)st.st_dev;
    out->ino = (uint64_t)st.st_ino;
    out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return DP_OK;
}

dp_status dp_dir_list(const char *path, char ***names, size_t *n, dp_err *err) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(path);
    if (!d) return os_err(err, "cannot open directory", path);
    dp_name_list l = {0};
    dp_status st = DP_OK;
    struct dirent *e;
    while (!st && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) st = dp_name_list_add(&l, e->d_name);
    closedir(d);
    if (st) dp_name_list_free(&l);
    else st = dp_name_list_finish(&l, names, n);
    return st ? dp_err_set(err, st, "out of memory listing %s", path) : DP_OK;
}

/* ---- Memory maps ------------------------------------------------------------------------ */

dp_status dp_map_open(dp_map *m, const char *path, dp_err *err) {
    memset(m, 0, sizeof(*m));
    m->handle = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return os_err(err, "cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        dp_status s = os_err(err, "cannot stat", path);
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dp_err_set(err, DP_EINVAL, "%s is not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            dp_status s = os_err(err, "cannot map", path);
            close(fd);
            return s;
        }
        m->data = p;
    }
    m->handle = fd;
    return DP_OK;
}

void dp_map_close(dp_map *m) {
    if (!m) return;
    if (m->data) munmap((void *)m->data, m->size);
    if (m->handle >= 0) close((int)m->handle);
    m->data = NULL;
    m->size = 0;
    m->handle = -1;
}

/* ---- Threads and locks ------------------------------------------------------------------ */

dp_status dp_thread_create(dp_thread *t, dp_thread_fn fn, void *arg, dp_err *err) {
    int r = pthread_create((pthread_t *)(void *)t->opaque, NULL, fn, arg);
    if (r != 0) return dp_err_set(err, dp_status_from_errno(r), "cannot create thread: %s", strerror(r));
    return DP_OK;
}

void *dp_thread_join(dp_thread *t) {
    void *ret = NULL;
    pthread_join(*(pthread_t *)(void *)t->opaque, &ret);
    return ret;
}

void dp_mutex_init(dp_mutex *m) { DP_ASSERT(pthread_mutex_init((pthread_mutex_t *)(void *)m->opaque, NULL) == 0); }
void dp_mutex_free(dp_mutex *m) { pthread_mutex_destroy((pthread_mutex_t *)(void *)m->opaque); }
void dp_mutex_lock(dp_mutex *m) { DP_ASSERT(pthread_mutex_lock((pthread_mutex_t *)(void *)m->opaque) == 0); }
void dp_mutex_unlock(dp_mutex *m) { DP_ASSERT(pthread_mutex_unlock((pthread_mutex_t *)(void *)m->opaque) == 0); }

void dp_cond_init(dp_cond *c) {
    /* timed waits measure against the monotonic clock: a wall-clock jump must not fire them */
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    DP_ASSERT(pthread_cond_init((pthread_cond_t *)(void *)c->opaque, &a) == 0);
    pthread_condattr_destroy(&a);
}
void dp_cond_free(dp_cond *c) { pthread_cond_destroy((pthread_cond_t *)(void *)c->opaque); }
void dp_cond_wait(dp_cond *c, dp_mutex *m) {
    DP_ASSERT(pthread_cond_wait((pthread_cond_t *)(void *)c->opaque, (pthread_mutex_t *)(void *)m->opaque) == 0);
}
bool dp_cond_timedwait_ms(dp_cond *c, dp_mutex *m, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return pthread_cond_timedwait((pthread_cond_t *)(void *)c->opaque, (pthread_mutex_t *)(void *)m->opaque, &ts) == 0;
}
void dp_cond_signal(dp_cond *c) { pthread_cond_signal((pthread_cond_t *)(void *)c->opaque); }
void dp_cond_broadcast(dp_cond *c) { pthread_cond_broadcast((pthread_cond_t *)(void *)c->opaque); }

int dp_cpu_count(void) {
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static uint64_t read_u64_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    if (fscanf(f, "%llu", &v) != 1) v = 0;
    fclose(f);
    return v;
}

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
bool dp_cpu_request_amx(void) {
    /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 (asm/prctl.h, Linux 5.16) */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#else
bool dp_cpu_request_amx(void) { return false; }
#endif

uint64_t dp_mem_available(void) {
    uint64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (uint64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    if (!avail) {
        long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0) avail = (uint64_t)pages * (uint64_t)psz;
    }
    /* a container's memory limit (cgroup v2) bounds what is really available */
    const uint64_t lim = read_u64_file("/sys/fs/cgroup/memory.max"), cur = read_u64_file("/sys/fs/cgroup/memory.current");
    if (lim && lim > cur && lim - cur < avail) avail = lim - cur;
    return avail;
}

dp_status dp_lock_acquire(dp_file *f, const char *path, dp_err *err) {
    dp_status st = dp_file_open(f, path, DP_FILE_READ | DP_FILE_WRITE | DP_FILE_CREATE, err);
    if (st) return st;
    if (flock((int)f->handle, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        dp_file_close(f, NULL);
        if (e == EWOULDBLOCK) return dp_err_set(err, DP_EBUSY, "%s is locked by another process", path);
        errno = e;
        return os_err(err, "cannot lock", path);
    }
    return DP_OK;
}

void dp_lock_release(dp_file *f) {
    if (!f || f->handle < 0) return;
    flock((int)f->handle, LOCK_UN);
    dp_file_close(f, NULL);
}

bool dp_stderr_is_terminal(void) { return isatty(STDERR_FILENO) != 0; }

uint64_t dp_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

dp_status dp_lock_write_note(dp_file *f, const char *text, dp_err *err) {
    if (ftruncate((int)f->handle, 0) != 0) return os_err(err, "cannot write", f->path);
    size_t n = strlen(text);
    ssize_t w = pwrite((int)f->handle, text, n, 0);
    if (w < 0 || (size_t)w != n) return os_err(err, "cannot write", f->path);
    return DP_OK;
}

void dp_lock_read_note(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    ssize_t r = read(fd, buf, cap - 1);
    buf[r > 0 ? (size_t)r : 0] = 0;
    close(fd);
}

int dp_getpid(void) { return (int)getpid(); }

void dp_crash_now(void) {
    raise(SIGKILL);
    _exit(137);
}

void dp_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static volatile sig_atomic_t g_stop_count, g_stop_sig, g_hard_exit = -1;

static void on_stop_signal(int sig) {
    if (g_stop_count == 0) g_stop_sig = sig;
    g_stop_count = g_stop_count + 1;
    if (sig == SIGINT && g_stop_count >= 2 && g_hard_exit >= 0) _exit(g_hard_exit);
}

void dp_stop_signals_install(int hard_exit_code) {
    g_hard_exit = hard_exit_code;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    /* a closed pipe on stdout must be an error return, not a silent death */
    signal(SIGPIPE, SIG_IGN);
}

int dp_stop_requests(void) { return (int)g_stop_count; }
int dp_stop_signal(void) { return (int)g_stop_sig; }
void dp_stop_request(void) { g_stop_count = g_stop_count + 1; }

int64_t dp_time_wall(void) { return (int64_t)time(NULL); }

void dp_time_format(int64_t t, bool date_only, char out[32]) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 32, date_only ? "%Y-%m-%d" : "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void dp_path_dir(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, cap, ".");
    else *(slash == out ? slash + 1 : slash) = 0;
}

/* ---- Processes ---------------------------------------------------------------------------- */

extern char **environ;

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* A pipe whose ends do not leak into other programs we start. */
static int pipe_cloexec(int fd[2]) {
    if (pipe(fd)) return -1;
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

dp_status dp_process_run(const char *const *argv, const void *in, size_t in_len, int timeout_ms, size_t max_out,
                         char **out, size_t *out_len, char *err_tail, size_t err_cap, int *exit_code, dp_err *err) {
    *out = NULL;
    *out_len = 0;
    *exit_code = -1;
    if (err_cap) err_tail[0] = 0;
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (pipe_cloexec(pin) || pipe_cloexec(pout) || pipe_cloexec(perr)) {
        dp_status st = dp_err_set(err, dp_status_from_errno(errno), "%s: pipe: %s", argv[0], strerror(errno));
        close_fd(&pin[0]), close_fd(&pin[1]), close_fd(&pout[0]), close_fd(&pout[1]), close_fd(&perr[0]);
        close_fd(&perr[1]);
        return st;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
    posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
    posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close_fd(&pin[0]), close_fd(&pout[1]), close_fd(&perr[1]);
    if (rc) {
        close_fd(&pin[1]), close_fd(&pout[0]), close_fd(&perr[0]);
        return dp_err_set(err, rc == ENOENT ? DP_ENOENT : dp_status_from_errno(rc), "%s: cannot run it: %s", argv[0],
                          strerror(rc));
    }
    /* a program that exits before reading its input must not kill us with SIGPIPE: blocked in
     * this thread while we write, and a pending one is taken back before unblocking */
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    if (!in || !in_len) close_fd(&pin[1]);
    size_t cap = 65536, n = 0, sent = 0, tail_n = 0;
    char *buf = malloc(cap + 1);
    dp_status st = buf ? DP_OK : dp_err_set(err, DP_ENOMEM, "%s: out of memory", argv[0]);
    const uint64_t deadline = dp_time_ns() + (uint64_t)timeout_ms * 1000000u;
    while (!st && (pout[0] >= 0 || perr[0] >= 0)) {
        struct pollfd fds[3];
        int nf = 0, io = -1, ie = -1, ii = -1;
        if (pout[0] >= 0) io = nf, fds[nf++] = (struct pollfd){pout[0], POLLIN, 0};
        if (perr[0] >= 0) ie = nf, fds[nf++] = (struct pollfd){perr[0], POLLIN, 0};
        if (pin[1] >= 0) ii = nf, fds[nf++] = (struct pollfd){pin[1], POLLOUT, 0};
        const uint64_t now = dp_time_ns();
        if (now >= deadline) {
            st = dp_err_set(err, DP_ETIMEDOUT, "%s: no result after %d s (killed)", argv[0], timeout_ms / 1000);
            break;
        }
        const int wait_ms = (int)((deadline - now) / 1000000u) + 1;
        if (poll(fds, (nfds_t)nf, wait_ms) < 0) {
            if (errno == EINTR) continue;
            st = dp_err_set(err, dp_status_from_errno(errno), "%s: poll: %s", argv[0], strerror(errno));
            break;
        }
        if (ii >= 0 && fds[ii].revents) {
            ssize_t w = write(pin[1], (const char *)in + sent, in_len - sent);
            if (w > 0) sent += (size_t)w;
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || sent == in_len) close_fd(&pin[1]);
        }
        if (io >= 0 && fds[io].revents) {
            if (n == cap) {
                if (cap > max_out) {
                    st = dp_err_set(err, DP_ERANGE, "%s: its output passed %zu bytes (killed)", argv[0], max_out);
                    break;
                }
                char *g = realloc(buf, 2 * cap + 1);
                if (!g) {
                    st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", argv[0]);
                    break;
                }
                buf = g, cap *= 2;
            }
            ssize_t r = read(pout[0], buf + n, cap - n);
            if (r > 0) n += (size_t)r;
            else if (r == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&pout[0]);
            if (n > max_out)
                st = dp_err_set(err, DP_ERANGE, "%s: its output passed %zu bytes (killed)", argv[0], max_out);
        }
        if (ie >= 0 && fds[ie].revents) {
            char tmp[4096];
            ssize_t r = read(perr[0], tmp, sizeof(tmp));
            if (r > 0 && err_cap > 1) { /* keep the last err_cap - 1 bytes */
                const size_t keep = err_cap - 1, add = (size_t)r > keep ? keep : (size_t)r;
                if (tail_n + add > keep) { /* drop the oldest bytes, once per read */
                    const size_t drop = tail_n + add - keep;
                    memmove(err_tail, err_tail + drop, tail_n - drop);
                    tail_n -= drop;
                }
                memcpy(err_tail + tail_n, tmp + (size_t)r - add, add);
                tail_n += add;
                err_tail[tail_n] = 0;
            } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                close_fd(&perr[0]);
            }
        }
    }
    close_fd(&pin[1]), close_fd(&pout[0]), close_fd(&perr[0]);
    if (st) kill(pid, SIGKILL);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    if (st) {
        free(buf);
        return st;
    }
    *exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return DP_OK;
}

dp_status dp_temp_file(const char *suffix, const void *data, size_t len, char *path, size_t cap, dp_err *err) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    const size_t sl = strlen(suffix);
    if (sl > 32 || snprintf(path, cap, "%s/docpipe-XXXXXX%s", dir, suffix) >= (int)cap)
        return dp_err_set(err, DP_EINVAL, "temporary file name too long");
    int fd = mkstemps(path, (int)sl);
    if (fd < 0) return dp_err_set(err, dp_status_from_errno(errno), "%s: %s", path, strerror(errno));
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            dp_status st = dp_err_set(err, dp_status_from_errno(errno), "%s: %s", path, strerror(errno));
            close(fd);
            unlink(path);
            return st;
        }
        off += (size_t)w;
    }
    close(fd);
    return DP_OK;
}

bool dp_program_exists(const char *name) {
    if (strchr(name, '/')) return access(name, X_OK) == 0;
    const char *p = getenv("PATH");
    if (!p) p = "/usr/bin:/bin";
    char buf[4096];
    while (*p) {
        const char *colon = strchr(p, ':');
        const size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? p : ".", name) < (int)sizeof(buf) &&
            access(buf, X_OK) == 0)
            return true;
        p += n + (colon ? 1 : 0);
    }
    return false;
}

bool dp_path_is_absolute(const char *path) { return path[0] == '/'; }

void dp_path_to_slashes(char *path) { (void)path; }

FILE *dp_fopen(const char *path, const char *mode) { return fopen(path, mode); }

void dp_process_init(int *argc, char ***argv) { (void)argc, (void)argv; }
