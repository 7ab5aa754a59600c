/*
 * platform_win32.c - platform.h on Windows, with Win32 calls only (no POSIX emulation layer).
 *
 * DESIGN: paths arrive as UTF-8 with '/' or '\' separators and are handed to the wide (UTF-16)
 * API; an absolute path is given the "\\?\" prefix so that paths past MAX_PATH work without the
 * system's long-path setting. Paths that leave this file (dp_path_resolve) use '/', the form the
 * rest of docpipe compares and joins. Files are opened with FILE_SHARE_DELETE so that the atomic
 * replace (MoveFileExW over a file another handle still reads) behaves as rename does on POSIX.
 * Durability: FlushFileBuffers for data, MOVEFILE_WRITE_THROUGH for a replace; NTFS journals the
 * directory entry itself, so dp_dir_sync has nothing to flush.
 * Threads are Win32 threads, locks SRW locks and condition variables; a job lock is LockFileEx
 * on a byte far past the note the lock file holds, so that other processes can still read the
 * note ("held by pid N") while the lock is held.
 */
#include "platform.h"

#include "name_list.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#include <shellapi.h> /* CommandLineToArgvW */

#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(SRWLOCK) <= sizeof(((dp_mutex *)0)->opaque), "dp_mutex too small");
_Static_assert(sizeof(CONDITION_VARIABLE) <= sizeof(((dp_cond *)0)->opaque), "dp_cond too small");
_Static_assert(2 * sizeof(void *) <= sizeof(((dp_thread *)0)->opaque), "dp_thread too small");

#define H(f) ((HANDLE)(f)->handle)

/* ---- Errors ------------------------------------------------------------------------------- */

static dp_status status_from_win(DWORD e) {
    switch (e) {
    case ERROR_FILE_NOT_FOUND: case ERROR_PATH_NOT_FOUND: case ERROR_INVALID_DRIVE: case ERROR_BAD_NETPATH:
        return DP_ENOENT;
    case ERROR_ACCESS_DENIED: case ERROR_WRITE_PROTECT: case ERROR_PRIVILEGE_NOT_HELD: return DP_EACCES;
    case ERROR_FILE_EXISTS: case ERROR_ALREADY_EXISTS: return DP_EEXIST;
    case ERROR_DISK_FULL: case ERROR_HANDLE_DISK_FULL: return DP_ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY: case ERROR_OUTOFMEMORY: return DP_ENOMEM;
    case ERROR_SHARING_VIOLATION: case ERROR_LOCK_VIOLATION: case ERROR_BUSY: return DP_EBUSY;
    case ERROR_INVALID_NAME: case ERROR_BAD_PATHNAME: case ERROR_DIRECTORY: case ERROR_FILENAME_EXCED_RANGE:
        return DP_EINVAL;
    case ERROR_HANDLE_EOF: return DP_EOF;
    default: return DP_EIO;
    }
}

/* The system's message for e, in UTF-8, without the trailing line break. */
static void win_message(DWORD e, char *out, size_t cap) {
    wchar_t w[512];
    DWORD n = FormatMessageW(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, e,
                             MAKELANGID(LANG_NEUTRAL, SUBLANG_DEFAULT), w, 512, NULL);
    while (n > 0 && (w[n - 1] == L'\r' || w[n - 1] == L'\n' || w[n - 1] == L' ' || w[n - 1] == L'.')) n--;
    int m = n ? WideCharToMultiByte(CP_UTF8, 0, w, (int)n, out, (int)cap - 1, NULL, NULL) : 0;
    if (m <= 0) m = snprintf(out, cap, "Windows error %lu", (unsigned long)e);
    else out[m] = 0;
}

static dp_status win_err_code(dp_err *err, DWORD e, const char *what, const char *path) {
    char msg[512];
    win_message(e, msg, sizeof(msg));
    return dp_err_set(err, status_from_win(e), "%s %s: %s", what, path, msg);
}

static dp_status win_err(dp_err *err, const char *what, const char *path) {
    return win_err_code(err, GetLastError(), what, path);
}

/* ---- Paths ------------------------------------------------------------------------------- */

static wchar_t *utf8_to_wide(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    if (n <= 0) return NULL;
    wchar_t *w = malloc((size_t)n * sizeof(wchar_t));
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) <= 0) {
        free(w);
        return NULL;
    }
    return w;
}

static char *wide_to_utf8(const wchar_t *w) {
    int n = WideCharToMultiByte(CP_UTF8, 0, w, -1, NULL, 0, NULL, NULL);
    if (n <= 0) return NULL;
    char *s = malloc((size_t)n);
    if (s && WideCharToMultiByte(CP_UTF8, 0, w, -1, s, n, NULL, NULL) <= 0) {
        free(s);
        return NULL;
    }
    return s;
}

bool dp_path_is_absolute(const char *p) {
    if ((p[0] == '/' || p[0] == '\\')) return true; /* "\\server\share", "\x" on the current drive */
    return ((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') && p[1] == ':' && (p[2] == '/' || p[2] == '\\');
}

void dp_path_to_slashes(char *p) {
    for (; *p; p++)
        if (*p == '\\') *p = '/';
}

/* The wide form of a UTF-8 path for the file API: the full path with '\' separators behind
 * "\\?\" (or "\\?\UNC\" for a share). The prefix lifts MAX_PATH and turns off the Win32 name
 * rewriting, so a name means the file it names: the folder part is made full by
 * GetFullPathNameW ("." and ".." resolved against the current folder), the last part is kept
 * as written, so that a file listed as "aux.txt", "CON" or "notes." is that file, not a device
 * or "notes". NULL (errno set) for a path that is not valid UTF-8, or out of memory. */
static wchar_t *wpath(const char *path) {
    wchar_t *w = utf8_to_wide(path);
    if (!w) {
        errno = EINVAL;
        return NULL;
    }
    if (!wcsncmp(w, L"\\\\?\\", 4) || !wcsncmp(w, L"\\\\.\\", 4)) return w; /* already in the native form */
    for (wchar_t *c = w; *c; c++)
        if (*c == L'/') *c = L'\\';
    /* split off the last part, unless it is "." or ".." (or the path ends in a separator) */
    size_t len = wcslen(w), cut = len;
    while (cut > 0 && w[cut - 1] != L'\\' && !(cut == 2 && w[1] == L':')) cut--;
    const wchar_t *last = w + cut;
    const bool keep_last = *last && wcscmp(last, L".") && wcscmp(last, L"..");
    wchar_t *dir = w;
    wchar_t dot[] = L".";
    if (keep_last) {
        if (cut == 0) dir = dot;
        else if (cut == 1 || (cut == 3 && w[1] == L':') || (cut == 2 && w[1] == L':')) {
            /* the root ("\", "C:\") or a drive's current folder ("C:") */
            dir = malloc((cut + 2) * sizeof(wchar_t));
            if (!dir) goto oom;
            memcpy(dir, w, cut * sizeof(wchar_t));
            if (cut == 2) dir[cut++] = L'.';
            dir[cut] = 0;
        } else {
            w[cut - 1] = 0; /* the folder without its trailing separator */
        }
    }
    DWORD n = GetFullPathNameW(dir, 0, NULL, NULL);
    wchar_t *full = n ? malloc(((size_t)n + wcslen(last) + 16) * sizeof(wchar_t)) : NULL;
    DWORD got = full ? GetFullPathNameW(dir, n, full + 8, NULL) : 0;
    if (dir != w && dir != dot) free(dir);
    if (!full || !got || got >= n) {
        free(full);
        if (!n || (full && !got)) { /* not a path Windows can make full: as written */
            if (keep_last && cut > 0) w[cut - 1] = L'\\';
            return w;
        }
        goto oom;
    }
    wchar_t *at = full + 8;
    if (keep_last) {
        if (at[got - 1] != L'\\') at[got++] = L'\\';
        wcscpy(at + got, last);
    }
    free(w);
    if (at[0] == L'\\' && at[1] == L'\\') { /* \\server\share\x -> \\?\UNC\server\share\x */
        memmove(full + 8, at + 2, (wcslen(at + 2) + 1) * sizeof(wchar_t));
        memcpy(full, L"\\\\?\\UNC\\", 8 * sizeof(wchar_t));
    } else {
        memmove(full + 4, at, (wcslen(at) + 1) * sizeof(wchar_t));
        memcpy(full, L"\\\\?\\", 4 * sizeof(wchar_t));
    }
    return full;
oom:
    free(w);
    errno = ENOMEM;
    return NULL;
}

#define WPATH_OR_FAIL(var, path, err)                                                                          \
    wchar_t *var = wpath(path);                                                                                \
    if (!var) return dp_err_set(err, errno == ENOMEM ? DP_ENOMEM : DP_EINVAL, "%s: %s", path,               \
                                errno == ENOMEM ? "out of memory" : "not a valid UTF-8 path");

/* ---- Files ------------------------------------------------------------------------------ */

static const DWORD share_all = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

dp_status dp_file_open(dp_file *f, const char *path, int flags, dp_err *err) {
    f->handle = -1;
    f->mode = flags;
    snprintf(f->path, sizeof(f->path), "%s", path);
    DWORD access = 0, disp;
    if (flags & DP_FILE_READ) access |= GENERIC_READ;
    if (flags & (DP_FILE_WRITE | DP_FILE_APPEND)) access |= GENERIC_WRITE;
    if (!access) access = GENERIC_READ;
    if ((flags & DP_FILE_CREATE) && (flags & DP_FILE_EXCL)) disp = CREATE_NEW;
    else if ((flags & DP_FILE_CREATE) && (flags & DP_FILE_TRUNC)) disp = CREATE_ALWAYS;
    else if (flags & DP_FILE_CREATE) disp = OPEN_ALWAYS;
    else if (flags & DP_FILE_TRUNC) disp = TRUNCATE_EXISTING;
    else disp = OPEN_EXISTING;
    WPATH_OR_FAIL(w, path, err);
    HANDLE h = CreateFileW(w, access, share_all, NULL, disp, FILE_ATTRIBUTE_NORMAL, NULL);
    DWORD e = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE) return win_err_code(err, e, "cannot open", path);
    if (GetFileType(h) != FILE_TYPE_DISK) { /* CON, NUL, a pipe: not a file docpipe may keep */
        CloseHandle(h);
        return dp_err_set(err, DP_EUNSUPPORTED, "cannot open %s: a device name, not a file", path);
    }
    f->handle = (intptr_t)h;
    return DP_OK;
}

dp_status dp_file_close(dp_file *f, dp_err *err) {
    if (!f || f->handle == -1) return DP_OK;
    HANDLE h = H(f);
    f->handle = -1;
    if (!CloseHandle(h)) return win_err(err, "cannot close", f->path);
    return DP_OK;
}

dp_status dp_file_pread(dp_file *f, void *buf, size_t n, uint64_t off, dp_err *err) {
    /* a read at an offset moves a Win32 handle's position, a POSIX pread does not: the writer's
     * position is put back */
    LARGE_INTEGER keep = {0};
    const bool restore = (f->mode & DP_FILE_WRITE) && !(f->mode & DP_FILE_APPEND) &&
                         SetFilePointerEx(H(f), (LARGE_INTEGER){0}, &keep, FILE_CURRENT);
    dp_status st = DP_OK;
    uint8_t *p = buf;
    while (n > 0) {
        OVERLAPPED ov = {0};
        ov.Offset = (DWORD)off;
        ov.OffsetHigh = (DWORD)(off >> 32);
        DWORD want = n > (1u << 30) ? (1u << 30) : (DWORD)n, got = 0;
        if (!ReadFile(H(f), p, want, &got, &ov)) {
            if (GetLastError() == ERROR_HANDLE_EOF) got = 0;
            else {
                st = win_err(err, "cannot read", f->path);
                break;
            }
        }
        if (got == 0) {
            st = dp_err_set(err, DP_EOF, "unexpected end of file in %s", f->path);
            break;
        }
        p += got;
        n -= got;
        off += got;
    }
    if (restore) SetFilePointerEx(H(f), keep, NULL, FILE_BEGIN);
    return st;
}

dp_status dp_file_write(dp_file *f, const void *buf, size_t n, dp_err *err) {
    const uint8_t *p = buf;
    while (n > 0) {
        DWORD want = n > (1u << 30) ? (1u << 30) : (DWORD)n, put = 0;
        BOOL ok;
        if (f->mode & DP_FILE_APPEND) {
            /* offset all ones: at the end of the file, as O_APPEND */
            OVERLAPPED ov = {0};
            ov.Offset = ov.OffsetHigh = 0xFFFFFFFFu;
            ok = WriteFile(H(f), p, want, &put, &ov);
        } else {
            ok = WriteFile(H(f), p, want, &put, NULL);
        }
        if (!ok) return win_err(err, "cannot write", f->path);
        p += put;
        n -= put;
    }
    return DP_OK;
}

dp_status dp_file_size(dp_file *f, uint64_t *size, dp_err *err) {
    LARGE_INTEGER li;
    if (!GetFileSizeEx(H(f), &li)) return win_err(err, "cannot stat", f->path);
    *size = (uint64_t)li.QuadPart;
    return DP_OK;
}

dp_status dp_file_truncate(dp_file *f, uint64_t size, dp_err *err) {
    FILE_END_OF_FILE_INFO eof;
    eof.EndOfFile.QuadPart = (LONGLONG)size;
    if (!SetFileInformationByHandle(H(f), FileEndOfFileInfo, &eof, sizeof(eof)))
        return win_err(err, "cannot truncate", f->path);
    /* a later plain write continues at the new end, as after ftruncate + O_APPEND */
    LARGE_INTEGER to;
    to.QuadPart = (LONGLONG)size;
    LARGE_INTEGER cur = {0};
    if (SetFilePointerEx(H(f), (LARGE_INTEGER){0}, &cur, FILE_CURRENT) && (uint64_t)cur.QuadPart > size)
        SetFilePointerEx(H(f), to, NULL, FILE_BEGIN);
    return DP_OK;
}

dp_status dp_file_datasync(dp_file *f, dp_err *err) {
    if (!FlushFileBuffers(H(f))) return win_err(err, "cannot sync", f->path);
    return DP_OK;
}

dp_status dp_file_sync(dp_file *f, dp_err *err) { return dp_file_datasync(f, err); }

dp_status dp_dir_sync(const char *dir, dp_err *err) {
    (void)dir, (void)err; /* NTFS journals directory entries; replaces are MOVEFILE_WRITE_THROUGH */
    return DP_OK;
}

dp_status dp_rename(const char *from, const char *to, dp_err *err) {
    wchar_t *wf = wpath(from), *wt = wpath(to);
    BOOL ok = wf && wt && MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH);
    DWORD e = wf && wt ? GetLastError() : ERROR_INVALID_NAME;
    free(wf);
    free(wt);
    if (!ok) {
        char msg[512];
        win_message(e, msg, sizeof(msg));
        return dp_err_set(err, status_from_win(e), "cannot rename %s to %s: %s", from, to, msg);
    }
    return DP_OK;
}

dp_status dp_remove(const char *path, dp_err *err) {
    WPATH_OR_FAIL(w, path, err);
    BOOL ok = DeleteFileW(w);
    DWORD e = GetLastError();
    free(w);
    if (!ok) return win_err_code(err, e, "cannot remove", path);
    return DP_OK;
}

/* Length of the part of p that names a root: "C:/" (3), "//server/share/" (through the share's
 * separator), "/" (1), or 0 for a relative path. */
static size_t root_len(const char *p) {
    if (((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') && p[1] == ':') return (p[2] == '/' || p[2] == '\\') ? 3 : 2;
    if ((p[0] == '/' || p[0] == '\\') && (p[1] == '/' || p[1] == '\\')) {
        size_t i = 2;
        for (int parts = 0; p[i] && parts < 2; i++)
            if (p[i] == '/' || p[i] == '\\') parts++;
        return i;
    }
    return (p[0] == '/' || p[0] == '\\') ? 1 : 0;
}

dp_status dp_mkdir_p(const char *path, dp_err *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) return dp_err_set(err, DP_EINVAL, "bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = root_len(buf) + 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\\' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            wchar_t *w = wpath(buf);
            if (!w) return dp_err_set(err, DP_EINVAL, "%s: not a valid UTF-8 path", buf);
            BOOL ok = CreateDirectoryW(w, NULL);
            DWORD e = GetLastError();
            free(w);
            if (!ok && e != ERROR_ALREADY_EXISTS) return win_err_code(err, e, "cannot create directory", buf);
            buf[i] = c;
        }
    }
    dp_stat_info si;
    dp_status st = dp_stat(path, true, &si, err);
    if (st) return st;
    if (si.kind != DP_KIND_DIR) return dp_err_set(err, DP_EEXIST, "%s exists and is not a directory", path);
    return DP_OK;
}

bool dp_path_exists(const char *path) {
    wchar_t *w = wpath(path);
    if (!w) return false;
    DWORD a = GetFileAttributesW(w);
    free(w);
    return a != INVALID_FILE_ATTRIBUTES;
}

bool dp_dir_writable(const char *dir) {
    /* ACLs decide, not attribute bits: create and drop a probe file */
    char probe[600];
    static volatile LONG seq;
    snprintf(probe, sizeof(probe), "%s/.docpipe-probe-%lu-%ld", dir, (unsigned long)GetCurrentProcessId(),
             (long)InterlockedIncrement(&seq));
    wchar_t *w = wpath(probe);
    if (!w) return false;
    HANDLE h = CreateFileW(w, GENERIC_WRITE, 0, NULL, CREATE_NEW,
                           FILE_ATTRIBUTE_TEMPORARY | FILE_ATTRIBUTE_HIDDEN | FILE_FLAG_DELETE_ON_CLOSE, NULL);
    free(w);
    if (h == INVALID_HANDLE_VALUE) return false;
    CloseHandle(h);
    return true;
}

dp_status dp_file_read_all(const char *path, size_t max_bytes, char **data, size_t *len, dp_err *err) {
    return dp_file_read_doc(path, true, NULL, max_bytes, data, len, err);
}

static int64_t filetime_ns(FILETIME ft) {
    /* 100 ns ticks since 1601-01-01 -> ns since 1970-01-01 */
    const int64_t t = (int64_t)(((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime);
    return (t - 116444736000000000LL) * 100;
}

static void fill_info(const BY_HANDLE_FILE_INFORMATION *bi, bool follow, dp_stat_info *out) {
    const DWORD a = bi->dwFileAttributes;
    out->kind = (!follow && (a & FILE_ATTRIBUTE_REPARSE_POINT)) ? DP_KIND_LINK
              : (a & FILE_ATTRIBUTE_DIRECTORY) ? DP_KIND_DIR : DP_KIND_FILE;
    out->size = ((uint64_t)bi->nFileSizeHigh << 32) | bi->nFileSizeLow;
    out->dev = bi->dwVolumeSerialNumber;
    out->ino = ((uint64_t)bi->nFileIndexHigh << 32) | bi->nFileIndexLow;
    out->mtime_ns = filetime_ns(bi->ftLastWriteTime);
}

dp_status dp_file_read_doc(const char *path, bool follow, const dp_stat_info *listed, size_t max_bytes, char **data,
                           size_t *len, dp_err *err) {
    *data = NULL;
    *len = 0;
    WPATH_OR_FAIL(w, path, err);
    HANDLE h = CreateFileW(w, GENERIC_READ, share_all, NULL, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL | (follow ? 0 : FILE_FLAG_OPEN_REPARSE_POINT), NULL);
    DWORD e = GetLastError();
    free(w);
    if (h == INVALID_HANDLE_VALUE) return win_err_code(err, e, "cannot open", path);
    dp_status st = DP_OK;
    BY_HANDLE_FILE_INFORMATION bi;
    if (GetFileType(h) != FILE_TYPE_DISK) {
        st = dp_err_set(err, DP_EUNSUPPORTED, "%s is not a regular file (a device or pipe is in its place)", path);
    } else if (!GetFileInformationByHandle(h, &bi)) {
        st = win_err(err, "cannot stat", path);
    } else if (!follow && (bi.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        st = dp_err_set(err, DP_EACCES, "%s is now a link (replaced since it was listed); links are not followed",
                        path);
    } else if (bi.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
        st = dp_err_set(err, DP_EUNSUPPORTED, "%s is not a regular file (a folder is in its place)", path);
    } else {
        dp_stat_info si;
        fill_info(&bi, true, &si);
        if (listed && (si.dev != listed->dev || si.ino != listed->ino)) {
            st = dp_err_set(err, DP_EBUSY, "%s was replaced by another file since it was listed", path);
        } else if (si.size > max_bytes) {
            st = dp_err_set(err, DP_ERANGE, "%s is %llu bytes, more than the limit of %zu", path,
                            (unsigned long long)si.size, max_bytes);
        } else {
            const size_t size = (size_t)si.size;
            char *buf = malloc(size + 1);
            size_t got = 0;
            if (!buf) st = dp_err_set(err, DP_ENOMEM, "cannot allocate %zu bytes for %s", size, path);
            while (!st && got < size) {
                DWORD want = size - got > (1u << 30) ? (1u << 30) : (DWORD)(size - got), r = 0;
                if (!ReadFile(h, buf + got, want, &r, NULL)) st = win_err(err, "cannot read", path);
                else if (r == 0) break; /* shrank while read: what is there */
                got += r;
            }
            if (st) free(buf);
            else {
                buf[got] = '\0';
                *data = buf;
                *len = got;
            }
        }
    }
    CloseHandle(h);
    return st;
}

/* Opens path for its attributes only (folders too); follow = false opens a link itself. */
static HANDLE open_meta(const char *path, bool follow, DWORD *e) {
    wchar_t *w = wpath(path);
    if (!w) {
        *e = ERROR_INVALID_NAME;
        return INVALID_HANDLE_VALUE;
    }
    HANDLE h = CreateFileW(w, FILE_READ_ATTRIBUTES, share_all, NULL, OPEN_EXISTING,
                           FILE_FLAG_BACKUP_SEMANTICS | (follow ? 0 : FILE_FLAG_OPEN_REPARSE_POINT), NULL);
    *e = GetLastError();
    free(w);
    return h;
}

dp_status dp_path_resolve(const char *path, char **out, dp_err *err) {
    *out = NULL;
    DWORD e;
    HANDLE h = open_meta(path, true, &e);
    if (h == INVALID_HANDLE_VALUE) return win_err_code(err, e, "cannot resolve", path);
    wchar_t stackbuf[1024], *w = stackbuf;
    DWORD n = GetFinalPathNameByHandleW(h, w, 1024, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS);
    if (n >= 1024) {
        w = malloc(((size_t)n + 1) * sizeof(wchar_t));
        n = w ? GetFinalPathNameByHandleW(h, w, n + 1, FILE_NAME_NORMALIZED | VOLUME_NAME_DOS) : 0;
    }
    e = GetLastError();
    CloseHandle(h);
    if (!n) {
        if (w != stackbuf) free(w);
        return win_err_code(err, e, "cannot resolve", path);
    }
    /* \\?\C:\x -> C:/x, \\?\UNC\server\share -> //server/share */
    const wchar_t *p = w;
    bool unc = false;
    if (!wcsncmp(p, L"\\\\?\\UNC\\", 8)) p += 8, unc = true;
    else if (!wcsncmp(p, L"\\\\?\\", 4)) p += 4;
    char *s = wide_to_utf8(p);
    if (w != stackbuf) free(w);
    if (!s) return dp_err_set(err, DP_ENOMEM, "cannot resolve %s: out of memory", path);
    if (unc) {
        char *u = malloc(strlen(s) + 3);
        if (!u) {
            free(s);
            return dp_err_set(err, DP_ENOMEM, "cannot resolve %s: out of memory", path);
        }
        u[0] = u[1] = '/';
        strcpy(u + 2, s);
        free(s);
        s = u;
    }
    dp_path_to_slashes(s);
    *out = s;
    return DP_OK;
}

dp_status dp_stat(const char *path, bool follow, dp_stat_info *out, dp_err *err) {
    DWORD e;
    HANDLE h = open_meta(path, follow, &e);
    if (h == INVALID_HANDLE_VALUE) return win_err_code(err, e, "cannot stat", path);
    BY_HANDLE_FILE_INFORMATION bi;
    BOOL ok = GetFileInformationByHandle(h, &bi);
    e = GetLastError();
    const DWORD type = GetFileType(h);
    CloseHandle(h);
    if (!ok) {
        if (type != FILE_TYPE_DISK) { /* a device name */
            memset(out, 0, sizeof(*out));
            out->kind = DP_KIND_OTHER;
            return DP_OK;
        }
        return win_err_code(err, e, "cannot stat", path);
    }
    fill_info(&bi, follow, out);
    return DP_OK;
}

dp_status dp_dir_list(const char *path, char ***names, size_t *n, dp_err *err) {
    *names = NULL;
    *n = 0;
    const size_t pl = strlen(path);
    char *pattern = malloc(pl + 3);
    if (!pattern) return dp_err_set(err, DP_ENOMEM, "out of memory listing %s", path);
    memcpy(pattern, path, pl);
    size_t at = pl;
    if (at && path[at - 1] != '/' && path[at - 1] != '\\') pattern[at++] = '/';
    pattern[at++] = '*';
    pattern[at] = 0;
    wchar_t *w = wpath(pattern);
    free(pattern);
    if (!w) return dp_err_set(err, DP_EINVAL, "%s: not a valid UTF-8 path", path);
    WIN32_FIND_DATAW fd;
    HANDLE fh = FindFirstFileExW(w, FindExInfoBasic, &fd, FindExSearchNameMatch, NULL, 0);
    DWORD e = GetLastError();
    free(w);
    if (fh == INVALID_HANDLE_VALUE) {
        if (e == ERROR_FILE_NOT_FOUND) { /* an empty folder (a drive root has no "." entry) */
            *names = malloc(1);
            return *names ? DP_OK : dp_err_set(err, DP_ENOMEM, "out of memory listing %s", path);
        }
        return win_err_code(err, e, "cannot open directory", path);
    }
    dp_name_list l = {0};
    dp_status st = DP_OK;
    do {
        if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L"..")) continue;
        char *name = wide_to_utf8(fd.cFileName);
        st = name ? dp_name_list_add(&l, name) : DP_ENOMEM;
        free(name);
    } while (!st && FindNextFileW(fh, &fd));
    FindClose(fh);
    if (st) dp_name_list_free(&l);
    else st = dp_name_list_finish(&l, names, n);
    return st ? dp_err_set(err, st, "out of memory listing %s", path) : DP_OK;
}

FILE *dp_fopen(const char *path, const char *mode) {
    wchar_t *w = wpath(path), wmode[8];
    size_t i = 0;
    for (; mode[i] && i < 6; i++) wmode[i] = (wchar_t)mode[i];
    if (!strchr(mode, 'b')) wmode[i++] = L'b'; /* bytes as written: no CR added before LF */
    wmode[i] = 0;
    FILE *f = w ? _wfopen(w, wmode) : NULL;
    free(w);
    return f;
}

/* ---- Memory maps ------------------------------------------------------------------------ */

dp_status dp_map_open(dp_map *m, const char *path, dp_err *err) {
    memset(m, 0, sizeof(*m));
    m->handle = -1;
    WPATH_OR_FAIL(w, path, err);
    HANDLE fh = CreateFileW(w, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                            FILE_ATTRIBUTE_NORMAL, NULL);
    DWORD e = GetLastError();
    const DWORD attrs = fh == INVALID_HANDLE_VALUE ? GetFileAttributesW(w) : 0;
    free(w);
    if (fh == INVALID_HANDLE_VALUE && attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY))
        return dp_err_set(err, DP_EINVAL, "%s is not a regular file", path); /* (folders open only for metadata) */
    if (fh == INVALID_HANDLE_VALUE) return win_err_code(err, e, "cannot open", path);
    LARGE_INTEGER size;
    if (GetFileType(fh) != FILE_TYPE_DISK || !GetFileSizeEx(fh, &size)) {
        CloseHandle(fh);
        return dp_err_set(err, DP_EINVAL, "%s is not a regular file", path);
    }
    m->size = (size_t)size.QuadPart;
    if (m->size > 0) {
        HANDLE mh = CreateFileMappingW(fh, NULL, PAGE_READONLY, 0, 0, NULL);
        if (!mh) {
            dp_status s = win_err(err, "cannot map", path);
            CloseHandle(fh);
            return s;
        }
        void *p = MapViewOfFile(mh, FILE_MAP_READ, 0, 0, 0);
        if (!p) {
            dp_status s = win_err(err, "cannot map", path);
            CloseHandle(mh);
            CloseHandle(fh);
            return s;
        }
        m->data = p;
        m->handle = (intptr_t)mh;
    }
    CloseHandle(fh); /* the mapping holds the file open */
    return DP_OK;
}

void dp_map_close(dp_map *m) {
    if (!m) return;
    if (m->data) UnmapViewOfFile(m->data);
    if (m->handle != -1) CloseHandle((HANDLE)m->handle);
    m->data = NULL;
    m->size = 0;
    m->handle = -1;
}

/* ---- Threads and locks ------------------------------------------------------------------ */

typedef struct thread_start {
    dp_thread_fn fn;
    void *arg, *ret;
} thread_start;

static unsigned __stdcall thread_main(void *p) {
    thread_start *s = p;
    s->ret = s->fn(s->arg);
    return 0;
}

dp_status dp_thread_create(dp_thread *t, dp_thread_fn fn, void *arg, dp_err *err) {
    thread_start *s = malloc(sizeof(*s));
    if (!s) return dp_err_set(err, DP_ENOMEM, "cannot create thread: out of memory");
    s->fn = fn, s->arg = arg, s->ret = NULL;
    /* _beginthreadex, not CreateThread: the C runtime sets up its per-thread state */
    uintptr_t h = _beginthreadex(NULL, 0, thread_main, s, 0, NULL);
    if (!h) {
        free(s);
        return dp_err_set(err, DP_EBUSY, "cannot create thread: %s", strerror(errno));
    }
    void *slots[2] = {(void *)h, s};
    memcpy(t->opaque, slots, sizeof(slots));
    return DP_OK;
}

void *dp_thread_join(dp_thread *t) {
    void *slots[2];
    memcpy(slots, t->opaque, sizeof(slots));
    WaitForSingleObject((HANDLE)slots[0], INFINITE);
    CloseHandle((HANDLE)slots[0]);
    thread_start *s = slots[1];
    void *ret = s->ret;
    free(s);
    return ret;
}

#define SRW(m) ((SRWLOCK *)(void *)(m)->opaque)
#define CV(c) ((CONDITION_VARIABLE *)(void *)(c)->opaque)

void dp_mutex_init(dp_mutex *m) { InitializeSRWLock(SRW(m)); }
void dp_mutex_free(dp_mutex *m) { (void)m; }
void dp_mutex_lock(dp_mutex *m) { AcquireSRWLockExclusive(SRW(m)); }
void dp_mutex_unlock(dp_mutex *m) { ReleaseSRWLockExclusive(SRW(m)); }

void dp_cond_init(dp_cond *c) { InitializeConditionVariable(CV(c)); }
void dp_cond_free(dp_cond *c) { (void)c; }
void dp_cond_wait(dp_cond *c, dp_mutex *m) { SleepConditionVariableSRW(CV(c), SRW(m), INFINITE, 0); }
bool dp_cond_timedwait_ms(dp_cond *c, dp_mutex *m, int ms) {
    /* a relative wait: the wall clock's jumps do not move it */
    return SleepConditionVariableSRW(CV(c), SRW(m), ms < 0 ? 0 : (DWORD)ms, 0) != 0;
}
void dp_cond_signal(dp_cond *c) { WakeConditionVariable(CV(c)); }
void dp_cond_broadcast(dp_cond *c) { WakeAllConditionVariable(CV(c)); }

int dp_cpu_count(void) {
    DWORD_PTR proc = 0, sys = 0;
    int n = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys))
        for (; proc; proc &= proc - 1) n++;
    /* one processor group's mask counts at most 64; past that, every active processor */
    const DWORD all = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    if (n <= 0 || (n == 64 && all > 64)) n = (int)all;
    return n > 0 ? n : 1;
}

uint64_t dp_mem_available(void) {
    MEMORYSTATUSEX ms;
    ms.dwLength = sizeof(ms);
    if (!GlobalMemoryStatusEx(&ms)) return 0;
    /* a job object's limit would lower it; docpipe is not run in one by the Task Scheduler */
    return (uint64_t)ms.ullAvailPhys;
}

bool dp_cpu_request_amx(void) {
    /* Windows turns on the AMX state for every process that may use it: check that it did
     * (XCR0 bits 17 and 18, tile config and tile data) */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0x60000u) == 0x60000u;
#elif defined(_MSC_VER) && defined(_M_X64)
    return (_xgetbv(0) & 0x60000u) == 0x60000u;
#else
    return false;
#endif
}

/* ---- Advisory file locks ---------------------------------------------------------------- */

/* Windows locks are mandatory for the byte range they cover; this one lies far past the note,
 * so that readers in other processes can still read it. */
#define LOCK_OFFSET_HIGH 0x40000000u

dp_status dp_lock_acquire(dp_file *f, const char *path, dp_err *err) {
    dp_status st = dp_file_open(f, path, DP_FILE_READ | DP_FILE_WRITE | DP_FILE_CREATE, err);
    if (st) return st;
    OVERLAPPED ov = {0};
    ov.OffsetHigh = LOCK_OFFSET_HIGH;
    if (!LockFileEx(H(f), LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov)) {
        DWORD e = GetLastError();
        dp_file_close(f, NULL);
        if (e == ERROR_LOCK_VIOLATION || e == ERROR_IO_PENDING)
            return dp_err_set(err, DP_EBUSY, "%s is locked by another process", path);
        return win_err_code(err, e, "cannot lock", path);
    }
    return DP_OK;
}

void dp_lock_release(dp_file *f) {
    if (!f || f->handle == -1) return;
    OVERLAPPED ov = {0};
    ov.OffsetHigh = LOCK_OFFSET_HIGH;
    UnlockFileEx(H(f), 0, 1, 0, &ov);
    dp_file_close(f, NULL);
}

dp_status dp_lock_write_note(dp_file *f, const char *text, dp_err *err) {
    dp_status st = dp_file_truncate(f, 0, err);
    if (st) return st;
    const DWORD n = (DWORD)strlen(text);
    OVERLAPPED ov = {0};
    DWORD put = 0;
    if (!WriteFile(H(f), text, n, &put, &ov) || put != n) return win_err(err, "cannot write", f->path);
    return DP_OK;
}

void dp_lock_read_note(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    wchar_t *w = wpath(path);
    if (!w) return;
    HANDLE h = CreateFileW(w, GENERIC_READ, share_all, NULL, OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    free(w);
    if (h == INVALID_HANDLE_VALUE) return;
    DWORD r = 0;
    if (!ReadFile(h, buf, (DWORD)(cap - 1), &r, NULL)) r = 0;
    buf[r] = 0;
    CloseHandle(h);
}

/* ---- Processes and signals -------------------------------------------------------------- */

int dp_getpid(void) { return (int)GetCurrentProcessId(); }

void dp_crash_now(void) { TerminateProcess(GetCurrentProcess(), 137); }

void dp_sleep_ms(int ms) { Sleep(ms < 0 ? 0 : (DWORD)ms); }

/* One argument as the C runtime's command-line parser reads it back (quotes, and backslashes
 * doubled before a quote). */
static void quote_arg(const wchar_t *a, wchar_t **o) {
    const bool plain = *a && !wcspbrk(a, L" \t\n\v\"");
    if (plain) {
        for (; *a; a++) *(*o)++ = *a;
        return;
    }
    *(*o)++ = L'"';
    for (;; a++) {
        size_t bs = 0;
        while (*a == L'\\') a++, bs++;
        if (!*a) {
            for (size_t i = 0; i < 2 * bs; i++) *(*o)++ = L'\\';
            break;
        }
        if (*a == L'"') {
            for (size_t i = 0; i < 2 * bs + 1; i++) *(*o)++ = L'\\';
        } else {
            for (size_t i = 0; i < bs; i++) *(*o)++ = L'\\';
        }
        *(*o)++ = *a;
    }
    *(*o)++ = L'"';
}

typedef struct pump {
    HANDLE h;
    const char *in; /* writer: the bytes */
    size_t in_len;
    char *buf; /* stdout reader: grows */
    size_t n, cap, max;
    bool over;
    char *tail; /* stderr reader: the last cap - 1 bytes */
    size_t tail_n, tail_cap;
    HANDLE proc;
} pump;

static unsigned __stdcall pump_in(void *p) {
    pump *s = p;
    size_t sent = 0;
    while (sent < s->in_len) {
        DWORD put = 0, want = s->in_len - sent > (1u << 20) ? (1u << 20) : (DWORD)(s->in_len - sent);
        if (!WriteFile(s->h, s->in + sent, want, &put, NULL)) break; /* it stopped reading */
        sent += put;
    }
    CloseHandle(s->h);
    s->h = NULL;
    return 0;
}

static unsigned __stdcall pump_out(void *p) {
    pump *s = p;
    for (;;) {
        if (s->n == s->cap) {
            if (s->cap > s->max) {
                s->over = true;
                TerminateProcess(s->proc, 1);
                break;
            }
            char *g = realloc(s->buf, 2 * s->cap + 1);
            if (!g) {
                s->over = true;
                TerminateProcess(s->proc, 1);
                break;
            }
            s->buf = g, s->cap *= 2;
        }
        DWORD r = 0;
        if (!ReadFile(s->h, s->buf + s->n, (DWORD)(s->cap - s->n), &r, NULL) || r == 0) break;
        s->n += r;
        if (s->n > s->max) {
            s->over = true;
            TerminateProcess(s->proc, 1);
            break;
        }
    }
    return 0;
}

static unsigned __stdcall pump_err(void *p) {
    pump *s = p;
    char tmp[4096];
    DWORD r = 0;
    while (ReadFile(s->h, tmp, sizeof(tmp), &r, NULL) && r > 0) {
        if (s->tail_cap <= 1) continue;
        const size_t keep = s->tail_cap - 1, add = r > keep ? keep : r;
        if (s->tail_n + add > keep) {
            const size_t drop = s->tail_n + add - keep;
            memmove(s->tail, s->tail + drop, s->tail_n - drop);
            s->tail_n -= drop;
        }
        memcpy(s->tail + s->tail_n, tmp + r - add, add);
        s->tail_n += add;
        s->tail[s->tail_n] = 0;
    }
    return 0;
}

dp_status dp_process_run(const char *const *argv, const void *in, size_t in_len, int timeout_ms, size_t max_out,
                         char **out, size_t *out_len, char *err_tail, size_t err_cap, int *exit_code, dp_err *err) {
    *out = NULL;
    *out_len = 0;
    *exit_code = -1;
    if (err_cap) err_tail[0] = 0;
    /* the command line */
    size_t need = 1;
    wchar_t **wargs = NULL;
    size_t argc = 0;
    while (argv[argc]) argc++;
    wargs = calloc(argc + 1, sizeof(wchar_t *));
    if (!wargs) return dp_err_set(err, DP_ENOMEM, "%s: out of memory", argv[0]);
    for (size_t i = 0; i < argc; i++) {
        wargs[i] = utf8_to_wide(argv[i]);
        if (!wargs[i]) {
            for (size_t j = 0; j < i; j++) free(wargs[j]);
            free(wargs);
            return dp_err_set(err, DP_EINVAL, "%s: an argument is not valid UTF-8", argv[0]);
        }
        need += 2 * wcslen(wargs[i]) + 3;
    }
    wchar_t *cmd = malloc(need * sizeof(wchar_t)), *o = cmd;
    if (cmd)
        for (size_t i = 0; i < argc; i++) {
            if (i) *o++ = L' ';
            quote_arg(wargs[i], &o);
        }
    if (cmd) *o = 0;
    for (size_t i = 0; i < argc; i++) free(wargs[i]);
    free(wargs);
    if (!cmd) return dp_err_set(err, DP_ENOMEM, "%s: out of memory", argv[0]);

    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    HANDLE in_r = NULL, in_w = NULL, out_r = NULL, out_w = NULL, err_r = NULL, err_w = NULL;
    if (!CreatePipe(&in_r, &in_w, &sa, 0) || !CreatePipe(&out_r, &out_w, &sa, 0) || !CreatePipe(&err_r, &err_w, &sa, 0)) {
        dp_status st = win_err(err, "cannot create a pipe for", argv[0]);
        HANDLE hs[] = {in_r, in_w, out_r, out_w, err_r, err_w};
        for (int i = 0; i < 6; i++)
            if (hs[i]) CloseHandle(hs[i]);
        free(cmd);
        return st;
    }
    /* our ends are not inherited */
    SetHandleInformation(in_w, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(out_r, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(err_r, HANDLE_FLAG_INHERIT, 0);
    /* the child inherits its three pipe ends and nothing else: not another thread's pipes
     * (which would keep those open past their own child's exit), not our standard streams */
    STARTUPINFOEXW si;
    memset(&si, 0, sizeof(si));
    si.StartupInfo.cb = sizeof(si);
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = in_r, si.StartupInfo.hStdOutput = out_w, si.StartupInfo.hStdError = err_w;
    HANDLE inherit[3] = {in_r, out_w, err_w};
    PROCESS_INFORMATION pi;
    DWORD e = ERROR_NOT_ENOUGH_MEMORY;
    SIZE_T attr_size = 0;
    InitializeProcThreadAttributeList(NULL, 1, 0, &attr_size);
    si.lpAttributeList = malloc(attr_size);
    BOOL ok = si.lpAttributeList && InitializeProcThreadAttributeList(si.lpAttributeList, 1, 0, &attr_size);
    if (ok) {
        ok = UpdateProcThreadAttribute(si.lpAttributeList, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit,
                                       sizeof(inherit), NULL, NULL);
        /* DETACHED_PROCESS: no console (the streams are pipes), so no console window and no
         * console host process that could outlive the child */
        if (ok)
            ok = CreateProcessW(NULL, cmd, NULL, NULL, TRUE, DETACHED_PROCESS | EXTENDED_STARTUPINFO_PRESENT, NULL,
                                NULL, &si.StartupInfo, &pi);
        if (!ok) e = GetLastError();
        DeleteProcThreadAttributeList(si.lpAttributeList);
    }
    free(si.lpAttributeList);
    free(cmd);
    CloseHandle(in_r), CloseHandle(out_w), CloseHandle(err_w);
    if (!ok) {
        CloseHandle(in_w), CloseHandle(out_r), CloseHandle(err_r);
        char msg[512];
        win_message(e, msg, sizeof(msg));
        return dp_err_set(err, (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND) ? DP_ENOENT : status_from_win(e),
                          "%s: cannot run it: %s", argv[0], msg);
    }
    CloseHandle(pi.hThread);
    pump pin = {.h = in_w, .in = in, .in_len = in ? in_len : 0};
    pump pout = {.h = out_r, .cap = 65536, .max = max_out, .proc = pi.hProcess};
    pump perr = {.h = err_r, .tail = err_tail, .tail_cap = err_cap};
    pout.buf = malloc(pout.cap + 1);
    HANDLE th[3] = {NULL, NULL, NULL};
    dp_status st = pout.buf ? DP_OK : dp_err_set(err, DP_ENOMEM, "%s: out of memory", argv[0]);
    if (!st) {
        th[0] = (HANDLE)_beginthreadex(NULL, 0, pump_in, &pin, 0, NULL);
        th[1] = (HANDLE)_beginthreadex(NULL, 0, pump_out, &pout, 0, NULL);
        th[2] = (HANDLE)_beginthreadex(NULL, 0, pump_err, &perr, 0, NULL);
        if (!th[0] || !th[1] || !th[2]) st = dp_err_set(err, DP_EBUSY, "%s: cannot start a pipe thread", argv[0]);
    }
    if (!st && WaitForSingleObject(pi.hProcess, timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms) == WAIT_TIMEOUT)
        st = dp_err_set(err, DP_ETIMEDOUT, "%s: no result after %d s (killed)", argv[0], timeout_ms / 1000);
    if (st) TerminateProcess(pi.hProcess, 1);
    WaitForSingleObject(pi.hProcess, INFINITE);
    /* a grandchild that inherited the pipes could keep them open: the readers get a moment,
     * then their pipes are cancelled */
    for (int i = 0; i < 3; i++)
        if (th[i] && WaitForSingleObject(th[i], 2000) == WAIT_TIMEOUT) {
            CancelSynchronousIo(th[i]);
            WaitForSingleObject(th[i], INFINITE);
        }
    for (int i = 0; i < 3; i++)
        if (th[i]) CloseHandle(th[i]);
    if (pin.h) CloseHandle(pin.h);
    CloseHandle(out_r), CloseHandle(err_r);
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    if (!st && pout.over) st = dp_err_set(err, DP_ERANGE, "%s: its output passed %zu bytes (killed)", argv[0], max_out);
    if (st) {
        free(pout.buf);
        return st;
    }
    *exit_code = (int)code;
    pout.buf[pout.n] = 0;
    *out = pout.buf;
    *out_len = pout.n;
    return DP_OK;
}

dp_status dp_temp_file(const char *suffix, const void *data, size_t len, char *path, size_t cap, dp_err *err) {
    wchar_t wdir[MAX_PATH + 1];
    DWORD dn = GetTempPathW(MAX_PATH + 1, wdir);
    if (!dn || dn > MAX_PATH) return dp_err_set(err, DP_EIO, "no temporary folder");
    char *dir = wide_to_utf8(wdir);
    if (!dir) return dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_path_to_slashes(dir);
    const size_t dl = strlen(dir);
    if (dl && dir[dl - 1] == '/') dir[dl - 1] = 0;
    static volatile LONG seq;
    dp_status st = DP_OK;
    for (int attempt = 0; attempt < 100; attempt++) {
        LARGE_INTEGER t;
        QueryPerformanceCounter(&t);
        if (strlen(suffix) > 32 ||
            snprintf(path, cap, "%s/docpipe-%lx-%lx-%llx%s", dir, (unsigned long)GetCurrentProcessId(),
                     (unsigned long)InterlockedIncrement(&seq), (unsigned long long)(t.QuadPart & 0xffffff),
                     suffix) >= (int)cap) {
            st = dp_err_set(err, DP_EINVAL, "temporary file name too long");
            break;
        }
        dp_file f;
        st = dp_file_open(&f, path, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_EXCL, err);
        if (st == DP_EEXIST) continue;
        if (st) break;
        st = dp_file_write(&f, data, len, err);
        dp_status cst = dp_file_close(&f, st ? NULL : err);
        if (!st) st = cst;
        if (st) dp_remove(path, NULL);
        break;
    }
    free(dir);
    return st;
}

bool dp_program_exists(const char *name) {
    if (strchr(name, '/') || strchr(name, '\\')) return dp_path_exists(name);
    wchar_t *w = utf8_to_wide(name), found[MAX_PATH];
    if (!w) return false;
    DWORD n = SearchPathW(NULL, w, L".exe", MAX_PATH, found, NULL);
    free(w);
    return n > 0 && n < MAX_PATH;
}

/* Console events as stop requests: Ctrl-C is SIGINT's twin (a second one ends the process at
 * once), Ctrl-Break, closing the console window, logging off and shutting down are SIGTERM's.
 * The handler runs on a thread of its own, so it may do more than store a number; for the
 * close, log-off and shut-down events Windows ends the process when the handler returns, so it
 * waits there (Windows allows about 5 s) for the run to stop cleanly. */
static volatile LONG g_stop_count, g_stop_sig, g_hard_exit = -1;

static BOOL WINAPI on_console_event(DWORD ev) {
    const int sig = ev == CTRL_C_EVENT ? SIGINT : SIGTERM;
    InterlockedCompareExchange(&g_stop_sig, sig, 0);
    const LONG n = InterlockedIncrement(&g_stop_count);
    if (ev == CTRL_C_EVENT && n >= 2 && g_hard_exit >= 0) TerminateProcess(GetCurrentProcess(), (UINT)g_hard_exit);
    if (ev == CTRL_CLOSE_EVENT || ev == CTRL_LOGOFF_EVENT || ev == CTRL_SHUTDOWN_EVENT) Sleep(4500);
    return TRUE;
}

void dp_stop_signals_install(int hard_exit_code) {
    g_hard_exit = hard_exit_code;
    SetConsoleCtrlHandler(on_console_event, TRUE);
}

int dp_stop_requests(void) { return (int)g_stop_count; }
int dp_stop_signal(void) { return (int)g_stop_sig; }
void dp_stop_request(void) { InterlockedIncrement(&g_stop_count); }

/* ---- Process start ----------------------------------------------------------------------- */

void dp_process_init(int *argc, char ***argv) {
    /* the arguments as UTF-8 (the C runtime's argv is in the ANSI code page, which cannot hold
     * every file name), kept for the process's lifetime */
    int wn = 0;
    wchar_t **wv = CommandLineToArgvW(GetCommandLineW(), &wn);
    if (wv && wn > 0) {
        char **v = calloc((size_t)wn + 1, sizeof(char *));
        bool ok = v != NULL;
        for (int i = 0; ok && i < wn; i++) ok = (v[i] = wide_to_utf8(wv[i])) != NULL;
        if (ok) {
            *argc = wn;
            *argv = v;
        }
    }
    if (wv) LocalFree(wv);
    /* text out is UTF-8, and bytes as written (a JSONL line on stdout ends in LF, not CRLF) */
    SetConsoleOutputCP(CP_UTF8);
    _setmode(_fileno(stdout), _O_BINARY);
    _setmode(_fileno(stderr), _O_BINARY);
    _setmode(_fileno(stdin), _O_BINARY);
}

/* ---- Terminal --------------------------------------------------------------------------- */

bool dp_stderr_is_terminal(void) {
    DWORD mode;
    return GetConsoleMode(GetStdHandle(STD_ERROR_HANDLE), &mode) != 0;
}

/* ---- Time ------------------------------------------------------------------------------- */

uint64_t dp_time_ns(void) {
    static LARGE_INTEGER freq;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    const uint64_t c = (uint64_t)t.QuadPart, f = (uint64_t)freq.QuadPart;
    return c / f * 1000000000ull + c % f * 1000000000ull / f;
}

int64_t dp_time_wall(void) {
    FILETIME ft;
    GetSystemTimeAsFileTime(&ft);
    return filetime_ns(ft) / 1000000000;
}

void dp_time_format(int64_t t, bool date_only, char out[32]) {
    /* days to a civil date (proleptic Gregorian), without the C runtime's time_t limits */
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400), secs = t - days * 86400;
    days += 719468;
    const int64_t era = (days >= 0 ? days : days - 146096) / 146097, doe = days - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    const int64_t y = yoe + era * 400 + (m <= 2);
    if (date_only) snprintf(out, 32, "%04lld-%02lld-%02lld", (long long)y, (long long)m, (long long)d);
    else
        snprintf(out, 32, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)m, (long long)d,
                 (long long)(secs / 3600), (long long)(secs / 60 % 60), (long long)(secs % 60));
}

void dp_path_dir(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    const size_t root = root_len(out);
    char *slash = NULL;
    for (char *c = out + root; *c; c++)
        if (*c == '/' || *c == '\\') slash = c;
    if (slash) *slash = 0;
    else if (root) out[root] = 0; /* "C:/x" -> "C:/", "/x" -> "/" */
    else snprintf(out, cap, ".");
}
