/*
 * platform.h - every OS call docpipe makes: files, mmap, threads, locks, fsync, clocks.
 *
 * A port to another OS (Windows) is one new file implementing this header; nothing else in the
 * tree may include <pthread.h>, <sys/mman.h> or <fcntl.h>. Types are opaque fixed-size storage
 * so this header needs no OS header; the implementation checks the sizes with static_assert.
 *
 * All functions return dp_status and fill the caller's dp_err with the path and the OS reason.
 */
#ifndef DP_PLATFORM_H
#define DP_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

/* ---- Files ------------------------------------------------------------------------------ */

typedef struct dp_file {
    intptr_t handle; /* OS descriptor or handle; -1 when closed */
    int mode;        /* the DP_FILE_* flags it was opened with */
    char path[512];  /* for messages */
} dp_file;

enum {
    DP_FILE_READ = 1,
    DP_FILE_WRITE = 2,    /* open for writing */
    DP_FILE_CREATE = 4,   /* create if missing */
    DP_FILE_TRUNC = 8,    /* truncate to 0 */
    DP_FILE_APPEND = 16,  /* writes go to the end */
    DP_FILE_EXCL = 32,    /* fail with DP_EEXIST if it exists */
};

dp_status dp_file_open(dp_file *f, const char *path, int flags, dp_err *err);
/* Closes f (no-op when already closed). A failed close is reported: it can mean lost data. */
dp_status dp_file_close(dp_file *f, dp_err *err);
/* Reads exactly n bytes at offset off; DP_EOF if the file ends first. */
dp_status dp_file_pread(dp_file *f, void *buf, size_t n, uint64_t off, dp_err *err);
/* Writes all n bytes (retrying short writes and EINTR). */
dp_status dp_file_write(dp_file *f, const void *buf, size_t n, dp_err *err);
dp_status dp_file_size(dp_file *f, uint64_t *size, dp_err *err);
dp_status dp_file_truncate(dp_file *f, uint64_t size, dp_err *err);
/* Flushes data (and the metadata needed to read it back) to stable storage. Never retry a
 * failed sync: the kernel may have dropped the dirty pages (see docs/internals/durability.md). */
dp_status dp_file_datasync(dp_file *f, dp_err *err);
dp_status dp_file_sync(dp_file *f, dp_err *err);

/* Makes a completed rename or create inside dir durable. */
dp_status dp_dir_sync(const char *dir, dp_err *err);
/* Atomic replace of to by from (same file system). */
dp_status dp_rename(const char *from, const char *to, dp_err *err);
dp_status dp_remove(const char *path, dp_err *err);
/* Creates dir and missing parents (mode 0755). Existing directories are fine. */
dp_status dp_mkdir_p(const char *path, dp_err *err);
bool dp_path_exists(const char *path);
/* Whether this process may create files in folder dir (a check before work starts; the
 * create itself still reports its own error). */
bool dp_dir_writable(const char *dir);
/* The folder part of path into out: "a/b" for "a/b/c.txt", "/" for "/c.txt", "." for "c.txt"
 * (on Windows also "C:/" for "C:\c.txt": a backslash separates there too). */
void dp_path_dir(const char *path, char *out, size_t cap);
/* Whether path is absolute ("/x"; on Windows also "C:\x", "C:/x", "\\server\share"). */
bool dp_path_is_absolute(const char *path);
/* On Windows turns every backslash into '/', the separator docpipe joins and compares paths with
 * (Windows accepts both); elsewhere a backslash is an ordinary file-name byte and nothing changes. */
void dp_path_to_slashes(char *path);
/* fopen for a UTF-8 path, bytes as written (no newline translation). */
FILE *dp_fopen(const char *path, const char *mode);
/* Reads a whole file (up to max_bytes) into a new NUL-terminated buffer; free with free(). */
dp_status dp_file_read_all(const char *path, size_t max_bytes, char **data, size_t *len, dp_err *err);

typedef enum dp_file_kind { DP_KIND_OTHER = 0, DP_KIND_FILE, DP_KIND_DIR, DP_KIND_LINK } dp_file_kind;

typedef struct dp_stat_info {
    dp_file_kind kind;
    uint64_t size;     /* bytes (files) */
    uint64_t dev, ino; /* identity, to detect directory loops */
    int64_t mtime_ns;
} dp_stat_info;

/* Reads a document that a listing found, refusing anything but that regular file: opened without
 * blocking (a FIFO or device put in its place cannot hang the reader) and, unless follow, without
 * following a symbolic link put in its place; then checked with fstat: a regular file and, when
 * listed is given, the device and inode the listing saw (DP_EBUSY: replaced since). DP_ERANGE over
 * max_bytes. *data is NUL-terminated; free it. */
dp_status dp_file_read_doc(const char *path, bool follow, const dp_stat_info *listed, size_t max_bytes, char **data,
                           size_t *len, dp_err *err);
/* The absolute path with every link and "." / ".." resolved, into out (malloc'd). */
dp_status dp_path_resolve(const char *path, char **out, dp_err *err);

/* Information about path; follow = false describes a symbolic link itself (DP_KIND_LINK). */
dp_status dp_stat(const char *path, bool follow, dp_stat_info *out, dp_err *err);
/* The entry names of a directory (no "." or ".."), sorted byte-wise, in one allocation:
 * free *names with free(). */
dp_status dp_dir_list(const char *path, char ***names, size_t *n, dp_err *err);

/* ---- Memory maps ------------------------------------------------------------------------ */

typedef struct dp_map {
    const uint8_t *data; /* read-only view of the whole file; NULL for an empty file */
    size_t size;         /* bytes */
    intptr_t handle;     /* OS handle kept for the mapping's lifetime */
} dp_map;

/* Maps path read-only. */
dp_status dp_map_open(dp_map *m, const char *path, dp_err *err);
void dp_map_close(dp_map *m);

/* ---- Threads and locks ------------------------------------------------------------------ */

typedef struct dp_thread { _Alignas(8) unsigned char opaque[16]; } dp_thread;
typedef struct dp_mutex { _Alignas(16) unsigned char opaque[64]; } dp_mutex;
typedef struct dp_cond { _Alignas(16) unsigned char opaque[64]; } dp_cond;

typedef void *(*dp_thread_fn)(void *arg);

dp_status dp_thread_create(dp_thread *t, dp_thread_fn fn, void *arg, dp_err *err);
void *dp_thread_join(dp_thread *t);

void dp_mutex_init(dp_mutex *m);
void dp_mutex_free(dp_mutex *m);
void dp_mutex_lock(dp_mutex *m);
void dp_mutex_unlock(dp_mutex *m);

void dp_cond_init(dp_cond *c);
void dp_cond_free(dp_cond *c);
void dp_cond_wait(dp_cond *c, dp_mutex *m);
/* Waits at most ms milliseconds (monotonic clock); false on timeout. */
bool dp_cond_timedwait_ms(dp_cond *c, dp_mutex *m, int ms);
void dp_cond_signal(dp_cond *c);
void dp_cond_broadcast(dp_cond *c);

/* A spin-wait's pause: tells the core (and a hyperthread sibling that shares it) that this
 * thread only polls. An instruction, not an OS call, but it differs per compiler and CPU. */
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <intrin.h>
static inline void dp_cpu_relax(void) { _mm_pause(); }
#elif defined(__x86_64__) || defined(__i386__)
static inline void dp_cpu_relax(void) { __builtin_ia32_pause(); }
#elif defined(__aarch64__)
static inline void dp_cpu_relax(void) { __asm__ __volatile__("yield"); }
#else
static inline void dp_cpu_relax(void) {}
#endif

/* Number of CPUs this process may run on (>= 1). */
int dp_cpu_count(void);
/* Memory a process could use now without swapping (Linux: MemAvailable, which counts the page
 * cache that can be dropped, a mapped model file's pages among it; a cgroup limit lowers it);
 * 0 when unknown. */
uint64_t dp_mem_available(void);
/* Asks the OS to let this process use the AMX tile registers (Linux 5.16+: arch_prctl
 * ARCH_REQ_XCOMP_PERM for the tile data, without which the first tile instruction faults).
 * Process-wide and idempotent; false where the OS refuses or has no such request. The caller
 * checks first that the CPU has AMX. */
bool dp_cpu_request_amx(void);

/* ---- Advisory file locks ---------------------------------------------------------------- */

/* Takes an exclusive lock on path (created if missing) without blocking. DP_EBUSY when another
 * process holds it. The OS drops the lock when the process dies, so a stale lock never blocks. */
dp_status dp_lock_acquire(dp_file *f, const char *path, dp_err *err);
void dp_lock_release(dp_file *f);

/* Writes text into the lock file held by f (replacing its content), for "held by pid N"
 * messages; reads it back with dp_lock_read_note. */
dp_status dp_lock_write_note(dp_file *f, const char *text, dp_err *err);
void dp_lock_read_note(const char *path, char *buf, size_t cap);

/* ---- Processes and signals -------------------------------------------------------------- */

int dp_getpid(void);
/* Ends the process at once, as kill -9 would (crash tests). */
void dp_crash_now(void);
/* Sleeps for ms milliseconds. */
void dp_sleep_ms(int ms);

/* Runs a program without a shell (argv[0] looked up in PATH): stdin is in[0..in_len) (NULL:
 * empty), stdout is collected into *out (free() it; NUL-terminated), at most max_out bytes,
 * the last err_cap - 1 bytes of stderr go to err_tail. The program is killed after timeout_ms,
 * or as soon as its output passes max_out. Returns DP_OK with its exit status in *exit_code
 * (128 + the signal when killed by one); DP_ENOENT when the program does not exist,
 * DP_ETIMEDOUT, DP_ERANGE (output too large), or the error of the system call that failed. */
dp_status dp_process_run(const char *const *argv, const void *in, size_t in_len, int timeout_ms, size_t max_out,
                         char **out, size_t *out_len, char *err_tail, size_t err_cap, int *exit_code, dp_err *err);

/* Writes data to a new private file (mode 0600) in the temporary folder ($TMPDIR or /tmp) whose
 * name ends with suffix (e.g. ".doc": converters look at it); its path into path (cap bytes).
 * The caller removes it (dp_remove). */
dp_status dp_temp_file(const char *suffix, const void *data, size_t len, char *path, size_t cap, dp_err *err);
/* Whether a program of that name is found on PATH (or exists, for a name with a slash). */
bool dp_program_exists(const char *name);

/* Stop requests: SIGINT, SIGTERM and SIGUSR1 (on POSIX) each add one to a counter the program
 * polls with dp_stop_requests(). The handler only stores a number (async-signal-safe). When
 * hard_exit_code >= 0, a second SIGINT ends the process at once with that code: the on-disk
 * protocol is crash-safe, so an immediate exit is always resumable. */
void dp_stop_signals_install(int hard_exit_code);
int dp_stop_requests(void);
/* The number of the first stop signal received (for messages), 0 when none. */
int dp_stop_signal(void);
/* Simulates a stop request (tests). */
void dp_stop_request(void);

/* Called first in main(): on Windows replaces argv by its UTF-8 form (the C runtime's is in the
 * ANSI code page) and makes the console and the standard streams carry UTF-8 bytes unchanged;
 * elsewhere nothing. */
void dp_process_init(int *argc, char ***argv);

/* ---- Terminal --------------------------------------------------------------------------- */

/* True when stderr is an interactive terminal (progress lines may then update in place). */
bool dp_stderr_is_terminal(void);

/* ---- Time ------------------------------------------------------------------------------- */

/* Monotonic nanoseconds, for durations only. */
uint64_t dp_time_ns(void);
/* Wall-clock seconds since 1970 (record metadata only, never for decisions). */
int64_t dp_time_wall(void);
/* "YYYY-MM-DD" (date_only) or "YYYY-MM-DDTHH:MM:SSZ" in UTC for t. */
void dp_time_format(int64_t t, bool date_only, char out[32]);

#endif /* DP_PLATFORM_H */
