/* wort.h - the C API of wort (C99): a persistent key-value store in a pool file, over any of
 * wort's persistent index kinds. It wraps the C++ key-value API (wort/kv.h), which states the
 * design, the crash guarantees and the limits; libpmemkv.h and lmdb.h are the models.
 *
 *   wort_config *cfg = wort_config_new();
 *   wort_config_put_path(cfg, "/dev/shm/data.pool");
 *   wort_config_put_kind(cfg, "woart");
 *   wort_db *db;
 *   if (wort_open(cfg, &db) != WORT_OK) fprintf(stderr, "%s\n", wort_errormsg());
 *   wort_config_delete(cfg);
 *   wort_put(db, "k", 1, "v", 1);
 *   wort_close(db);
 *
 * Conventions
 *   - Every call that can fail returns a status code (WORT_OK = 0 on success); after a failure
 *     wort_errormsg() returns a message for it (per thread, valid until the thread's next wort
 *     call). No call aborts on bad input and no C++ exception leaves the library.
 *   - Keys and values are byte strings (pointer + length, any bytes, 0x00 included). Keys are at
 *     most 4096 bytes (exactly 8 for a store of WORT_KEY_U64: big-endian integers); values at
 *     most 64 MiB (wort_capabilities tells).
 *   - A write that returned WORT_OK is durable: it survives a crash of the process at any
 *     instant (and a power failure when the pool is on a DAX filesystem, or with
 *     WORT_SYNC_MSYNC). Output parameters are untouched unless the call returned WORT_OK.
 *   - Thread safety: a wort_db may be used from many threads; a wort_config from one at a time.
 *     Callbacks (wort_get, wort_scan) must not write to the same database.
 */
#ifndef WORT_H
#define WORT_H

#include <stddef.h>
#include <stdint.h>

#include "wort/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (the C++ wort::Code values, plus two of the C layer). */
#define WORT_OK 0
#define WORT_NOT_FOUND 1
#define WORT_ALREADY_EXISTS 2
#define WORT_INVALID_ARGUMENT 3
#define WORT_POOL_FULL 4
#define WORT_CORRUPTION 5
#define WORT_IO_ERROR 6
#define WORT_NOT_SUPPORTED 7
#define WORT_BUSY 8
#define WORT_OUT_OF_MEMORY 100 /* the library could not allocate DRAM */
#define WORT_UNKNOWN_ERROR 101

/* Key types and sync modes (wort_config_put_key_type, wort_config_put_sync). */
#define WORT_KEY_BYTES 2
#define WORT_KEY_U64 1
#define WORT_SYNC_PERSIST 0 /* flush + fence before a write returns (default) */
#define WORT_SYNC_MSYNC 1   /* every fence also msyncs what it flushed: power-fail durable on a file system */

/* Durability levels (wort_capabilities.durability). */
#define WORT_DURABLE_PROCESS_CRASH 0 /* a file without DAX: survives kill -9, not an OS crash or power loss */
#define WORT_DURABLE_POWER_FAIL 1    /* DAX with MAP_SYNC */
#define WORT_DURABLE_FILE_SYNC 2     /* a file without DAX in sync mode (WORT_SYNC_MSYNC): power-fail durable */
#define WORT_DURABLE_TMPFS 3         /* tmpfs (/dev/shm): survives kill -9, lost at reboot */

typedef struct wort_config wort_config;
typedef struct wort_db wort_db;

typedef struct wort_capabilities {
  int ordered;          /* wort_scan works (ordered kinds); else WORT_NOT_SUPPORTED */
  int thread_safe;      /* calls may come from many threads */
  int parallel_writes;  /* writers of different keys run in parallel (0: one at a time) */
  int key_type;         /* WORT_KEY_BYTES or WORT_KEY_U64 */
  size_t max_key_len;
  size_t max_value_len;
  int durability;       /* WORT_DURABLE_* */
  char kind[32];        /* index kind name, NUL-terminated */
} wort_capabilities;

/* wort's version, "MAJOR.MINOR.PATCH" (as `wort --version`, wort::Version() and pkg-config
 * --modversion wort state it). */
WORT_EXPORT const char *wort_version(void);

/* Message of the calling thread's last failure ("" if none). */
WORT_EXPORT const char *wort_errormsg(void);

/* The index kinds a store can use: wort_kind_name(0 .. wort_kind_count()-1). */
WORT_EXPORT size_t wort_kind_count(void);
WORT_EXPORT const char *wort_kind_name(size_t i); /* NULL when i is out of range */

/* A configuration: path is required; size (bytes, default 1 GiB: the pool's maximum when it is
 * created), kind (default "woart"; "" opens a store of any kind), name (the store's root name
 * in the pool, default "kv"), key type, sync mode, create_if_missing (default 1). The put
 * functions copy their arguments; they return WORT_INVALID_ARGUMENT for a NULL or bad value. */
WORT_EXPORT wort_config *wort_config_new(void); /* NULL when out of memory */
WORT_EXPORT void wort_config_delete(wort_config *cfg);
WORT_EXPORT int wort_config_put_path(wort_config *cfg, const char *path);
WORT_EXPORT int wort_config_put_size(wort_config *cfg, uint64_t size);
WORT_EXPORT int wort_config_put_kind(wort_config *cfg, const char *kind);
WORT_EXPORT int wort_config_put_name(wort_config *cfg, const char *name);
WORT_EXPORT int wort_config_put_key_type(wort_config *cfg, int key_type);
WORT_EXPORT int wort_config_put_sync(wort_config *cfg, int sync);
WORT_EXPORT int wort_config_put_create_if_missing(wort_config *cfg, int create);
/* Read-only (default 0): open an existing store without writing to the pool - beside one
 * process that has it open for writing, or on a file this process cannot write (wort/kv.h,
 * "Read-only opens and readers in other processes"). wort_put, wort_remove and batches then
 * return WORT_INVALID_ARGUMENT. */
WORT_EXPORT int wort_config_put_read_only(wort_config *cfg, int read_only);

/* Opens (creating when allowed) the store; cfg stays the caller's. */
WORT_EXPORT int wort_open(const wort_config *cfg, wort_db **db);
/* Closes cleanly and frees db (NULL is allowed). Returns the close's status. */
WORT_EXPORT int wort_close(wort_db *db);

WORT_EXPORT int wort_put(wort_db *db, const char *key, size_t key_len, const char *value, size_t value_len);
/* Calls cb(value, value_len, arg) with the value (valid only during the call). */
typedef void wort_get_cb(const char *value, size_t value_len, void *arg);
WORT_EXPORT int wort_get(wort_db *db, const char *key, size_t key_len, wort_get_cb *cb, void *arg);
/* Copies the value into buf (up to buf_size bytes) and stores its full length in *value_len;
 * WORT_INVALID_ARGUMENT (and nothing copied) when buf_size is too small: *value_len still tells
 * the size needed. */
WORT_EXPORT int wort_get_copy(wort_db *db, const char *key, size_t key_len, char *buf, size_t buf_size, size_t *value_len);
/* WORT_OK if present, WORT_NOT_FOUND if absent. */
WORT_EXPORT int wort_exists(wort_db *db, const char *key, size_t key_len);
WORT_EXPORT int wort_remove(wort_db *db, const char *key, size_t key_len);
WORT_EXPORT int wort_count(wort_db *db, uint64_t *count);

/* A batch of puts and removes that wort_write applies all-or-nothing, failure-atomically (the
 * last operation of a key counts; removing an absent key is no error). Built in one thread;
 * reusable after wort_write (wort_batch_clear empties it). Limits: WORT_MAX_BATCH_OPS
 * operations, WORT_MAX_BATCH_BYTES bytes of keys and values (WORT_INVALID_ARGUMENT beyond). */
#define WORT_MAX_BATCH_OPS (1u << 20)
#define WORT_MAX_BATCH_BYTES (1ull << 30)
typedef struct wort_batch wort_batch;
WORT_EXPORT wort_batch *wort_batch_new(void); /* NULL when out of memory */
WORT_EXPORT void wort_batch_delete(wort_batch *batch); /* NULL is allowed */
WORT_EXPORT int wort_batch_put(wort_batch *batch, const char *key, size_t key_len, const char *value, size_t value_len);
WORT_EXPORT int wort_batch_remove(wort_batch *batch, const char *key, size_t key_len);
WORT_EXPORT void wort_batch_clear(wort_batch *batch);
WORT_EXPORT size_t wort_batch_count(const wort_batch *batch); /* operations recorded */
/* WORT_OK: all of the batch is durable and visible; otherwise nothing of it is. */
WORT_EXPORT int wort_write(wort_db *db, const wort_batch *batch);

/* Calls cb for each pair with start <= key < end in ascending order (end == NULL: no upper
 * bound), until cb returns non-zero (then wort_scan returns WORT_OK too). Ordered kinds only. */
typedef int wort_scan_cb(const char *key, size_t key_len, const char *value, size_t value_len, void *arg);
WORT_EXPORT int wort_scan(wort_db *db, const char *start, size_t start_len, const char *end, size_t end_len, wort_scan_cb *cb,
                          void *arg);

WORT_EXPORT int wort_get_capabilities(wort_db *db, wort_capabilities *out);

#ifdef __cplusplus
}
#endif

#endif /* WORT_H */
