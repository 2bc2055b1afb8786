/* The C API (wort.h), compiled as C99, including only wort.h: every call, the full byte range
 * of keys, values up to a multi-chunk one, reopen, scans with bounds, every kind, and the error
 * cases (each must return a code and a message, never abort). Prints "N passed, N failed".
 * Usage: test_capi [dir]   (pools are created under dir, default /dev/shm, and removed) */
#include <wort.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (cond) {                                                                              \
      ++passed;                                                                              \
    } else {                                                                                 \
      ++failed;                                                                              \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              wort_errormsg());                                                              \
    }                                                                                        \
  } while (0)

static char pool_path[512];

static wort_db *open_db(const char *kind, int key_type) {
  wort_config *cfg = wort_config_new();
  wort_db *db = NULL;
  CHECK(cfg != NULL);
  CHECK(wort_config_put_path(cfg, pool_path) == WORT_OK);
  CHECK(wort_config_put_size(cfg, (uint64_t)256 << 20) == WORT_OK);
  CHECK(wort_config_put_kind(cfg, kind) == WORT_OK);
  CHECK(wort_config_put_key_type(cfg, key_type) == WORT_OK);
  CHECK(wort_open(cfg, &db) == WORT_OK);
  wort_config_delete(cfg);
  return db;
}

struct got {
  char buf[64];
  size_t len;
  int calls;
};
static void get_cb(const char *v, size_t n, void *arg) {
  struct got *g = (struct got *)arg;
  g->len = n;
  memcpy(g->buf, v, n < sizeof g->buf ? n : sizeof g->buf);
  g->calls++;
}

struct scan_state {
  int n;
  int stop_after;
  char last[16];
  size_t last_len;
  int ordered_ok;
};
static int scan_cb(const char *k, size_t kl, const char *v, size_t vl, void *arg) {
  struct scan_state *s = (struct scan_state *)arg;
  if (s->n > 0) {
    size_t m = kl < s->last_len ? kl : s->last_len;
    int c = memcmp(s->last, k, m);
    if (c > 0 || (c == 0 && s->last_len >= kl)) s->ordered_ok = 0;
  }
  if (vl != kl + 1 || memcmp(v + 1, k, kl) != 0 || v[0] != 'v') s->ordered_ok = 0;
  memcpy(s->last, k, kl < sizeof s->last ? kl : sizeof s->last);
  s->last_len = kl;
  s->n++;
  return s->stop_after && s->n >= s->stop_after;
}

/* Keys over the byte range: empty, 0x00, 0x00 0x00, 0x80, 0xff, prefixes. */
static const char *keys[] = {"", "\0", "\0\0", "\x80", "\xff", "a", "ab", "abc"};
static const size_t key_lens[] = {0, 1, 2, 1, 1, 1, 2, 3};
#define NKEYS 8

static void put_all(wort_db *db) {
  size_t i;
  for (i = 0; i < NKEYS; i++) {
    char v[16];
    v[0] = 'v';
    memcpy(v + 1, keys[i], key_lens[i]);
    CHECK(wort_put(db, keys[i], key_lens[i], v, key_lens[i] + 1) == WORT_OK);
  }
}

static void test_basic(void) {
  wort_db *db = open_db("woart", WORT_KEY_BYTES);
  struct got g;
  uint64_t n = 0;
  size_t len = 0;
  char small[2];
  char *big;
  size_t big_len = (size_t)300 << 10, i;
  wort_capabilities caps;
  struct scan_state s;

  if (!db) return;
  put_all(db);
  CHECK(wort_count(db, &n) == WORT_OK && n == NKEYS);
  memset(&g, 0, sizeof g);
  CHECK(wort_get(db, "\0", 1, get_cb, &g) == WORT_OK && g.calls == 1 && g.len == 2 && memcmp(g.buf, "v\0", 2) == 0);
  CHECK(wort_get(db, "zz", 2, get_cb, &g) == WORT_NOT_FOUND && g.calls == 1);
  CHECK(strlen(wort_errormsg()) > 0);
  CHECK(wort_exists(db, "\xff", 1) == WORT_OK);
  CHECK(wort_exists(db, "\xfe", 1) == WORT_NOT_FOUND);
  CHECK(wort_get_copy(db, "abc", 3, small, sizeof small, &len) == WORT_INVALID_ARGUMENT && len == 4);
  CHECK(wort_get_copy(db, "ab", 2, g.buf, sizeof g.buf, &len) == WORT_OK && len == 3 && memcmp(g.buf, "vab", 3) == 0);

  /* overwrite with a multi-chunk value, then a short one */
  big = (char *)malloc(big_len);
  for (i = 0; i < big_len; i++) big[i] = (char)(i * 7);
  CHECK(wort_put(db, "a", 1, big, big_len) == WORT_OK);
  {
    char *back = (char *)malloc(big_len);
    CHECK(wort_get_copy(db, "a", 1, back, big_len, &len) == WORT_OK && len == big_len && memcmp(back, big, big_len) == 0);
    free(back);
  }
  free(big);
  CHECK(wort_put(db, "a", 1, "va", 2) == WORT_OK);

  /* scans: all, bounded [a, abc), stopped by the callback */
  memset(&s, 0, sizeof s);
  s.ordered_ok = 1;
  CHECK(wort_scan(db, NULL, 0, NULL, 0, scan_cb, &s) == WORT_OK && s.n == NKEYS && s.ordered_ok);
  memset(&s, 0, sizeof s);
  s.ordered_ok = 1;
  CHECK(wort_scan(db, "a", 1, "abc", 3, scan_cb, &s) == WORT_OK && s.n == 2 && s.ordered_ok);
  memset(&s, 0, sizeof s);
  s.ordered_ok = 1;
  s.stop_after = 3;
  CHECK(wort_scan(db, "", 0, NULL, 0, scan_cb, &s) == WORT_OK && s.n == 3);

  CHECK(wort_remove(db, "ab", 2) == WORT_OK);
  CHECK(wort_remove(db, "ab", 2) == WORT_NOT_FOUND);
  CHECK(wort_count(db, &n) == WORT_OK && n == NKEYS - 1);

  CHECK(wort_get_capabilities(db, &caps) == WORT_OK);
  CHECK(caps.ordered == 1 && caps.thread_safe == 1 && caps.key_type == WORT_KEY_BYTES);
  CHECK(caps.max_key_len == 4096 && caps.max_value_len == ((size_t)64 << 20));
  CHECK(strcmp(caps.kind, "woart") == 0);

  /* errors: a code and a message, nothing changed */
  {
    char *long_key = (char *)calloc(caps.max_key_len + 1, 1);
    CHECK(wort_put(db, long_key, caps.max_key_len + 1, "x", 1) == WORT_INVALID_ARGUMENT);
    CHECK(strstr(wort_errormsg(), "longer") != NULL);
    free(long_key);
  }
  CHECK(wort_put(db, NULL, 3, "x", 1) == WORT_INVALID_ARGUMENT);
  CHECK(wort_put(NULL, "k", 1, "x", 1) == WORT_INVALID_ARGUMENT);
  CHECK(wort_get(db, "k", 1, NULL, NULL) == WORT_INVALID_ARGUMENT);
  CHECK(wort_count(db, &n) == WORT_OK && n == NKEYS - 1);
  CHECK(wort_close(db) == WORT_OK);

  /* reopen: everything is there */
  db = open_db("", WORT_KEY_BYTES);
  if (!db) return;
  CHECK(wort_count(db, &n) == WORT_OK && n == NKEYS - 1);
  CHECK(wort_get_copy(db, "a", 1, g.buf, sizeof g.buf, &len) == WORT_OK && len == 2 && memcmp(g.buf, "va", 2) == 0);
  CHECK(wort_close(db) == WORT_OK);
  unlink(pool_path);
}

static void test_open_errors(void) {
  wort_config *cfg = wort_config_new();
  wort_db *db = NULL;
  CHECK(wort_open(cfg, &db) == WORT_INVALID_ARGUMENT && db == NULL); /* no path */
  CHECK(wort_config_put_path(cfg, pool_path) == WORT_OK);
  CHECK(wort_config_put_kind(cfg, "no-such-kind") == WORT_OK);
  CHECK(wort_open(cfg, &db) == WORT_INVALID_ARGUMENT && db == NULL);
  CHECK(strstr(wort_errormsg(), "no-such-kind") != NULL);
  CHECK(wort_config_put_key_type(cfg, 7) == WORT_INVALID_ARGUMENT);
  CHECK(wort_config_put_sync(cfg, 9) == WORT_INVALID_ARGUMENT);
  CHECK(wort_config_put_path(cfg, NULL) == WORT_INVALID_ARGUMENT);
  CHECK(wort_config_put_create_if_missing(cfg, 0) == WORT_OK);
  CHECK(wort_config_put_kind(cfg, "woart") == WORT_OK);
  CHECK(wort_open(cfg, &db) == WORT_NOT_FOUND && db == NULL);
  CHECK(wort_open(NULL, &db) == WORT_INVALID_ARGUMENT);
  CHECK(wort_close(NULL) == WORT_OK);
  wort_config_delete(cfg);
}

/* Every kind: u64 keys through fastfair, and put/get/remove/scan-or-not on each kind. */
static void test_every_kind(void) {
  size_t i, nk = wort_kind_count();
  CHECK(nk >= 10);
  CHECK(wort_kind_name(nk) == NULL);
  for (i = 0; i < nk; i++) {
    const char *kind = wort_kind_name(i);
    wort_db *db = open_db(kind, WORT_KEY_BYTES);
    wort_capabilities caps;
    struct scan_state s;
    struct got g;
    int rc;
    if (!db) continue;
    put_all(db);
    memset(&g, 0, sizeof g);
    CHECK(wort_get(db, "\x80", 1, get_cb, &g) == WORT_OK && g.len == 2);
    CHECK(wort_get_capabilities(db, &caps) == WORT_OK && strcmp(caps.kind, kind) == 0);
    memset(&s, 0, sizeof s);
    s.ordered_ok = 1;
    rc = wort_scan(db, NULL, 0, NULL, 0, scan_cb, &s);
    if (caps.ordered) CHECK(rc == WORT_OK && s.n == NKEYS && s.ordered_ok);
    else CHECK(rc == WORT_NOT_SUPPORTED);
    CHECK(wort_remove(db, "", 0) == WORT_OK && wort_exists(db, "", 0) == WORT_NOT_FOUND);
    CHECK(wort_close(db) == WORT_OK);
    unlink(pool_path);
  }
  {
    wort_db *db = open_db("fastfair", WORT_KEY_U64);
    const char k[8] = {0, 0, 0, 0, 0, 0, 1, 0};
    if (db) {
      CHECK(wort_put(db, k, 8, "x", 1) == WORT_OK);
      CHECK(wort_put(db, k, 7, "x", 1) == WORT_INVALID_ARGUMENT);
      CHECK(wort_close(db) == WORT_OK);
    }
    unlink(pool_path);
  }
}

/* The library's version: "MAJOR.MINOR.PATCH", and the one this program was built for when the
 * build says (WORT_EXPECTED_VERSION: the in-tree build and the consumer test pass it). */
static void test_version(void) {
  unsigned major, minor, patch;
  int end = 0;
  const char *v = wort_version();
  CHECK(v != NULL);
  CHECK(sscanf(v, "%u.%u.%u%n", &major, &minor, &patch, &end) == 3 && v[end] == '\0');
#ifdef WORT_EXPECTED_VERSION
  CHECK(strcmp(v, WORT_EXPECTED_VERSION) == 0);
#endif
}

/* Batches: applied all-or-nothing; the last operation of a key counts; bad arguments refused. */
static void test_batch(void) {
  wort_db *db;
  wort_batch *b;
  char buf[16];
  size_t len = 0;
  uint64_t n = 0;
  unlink(pool_path);
  db = open_db("woart", WORT_KEY_BYTES);
  if (!db) return;
  CHECK(wort_put(db, "gone", 4, "x", 1) == WORT_OK);
  b = wort_batch_new();
  CHECK(b != NULL);
  if (!b) return;
  CHECK(wort_batch_put(b, "\x80k", 2, "v1", 2) == WORT_OK);
  CHECK(wort_batch_put(b, "\0", 1, "v0", 2) == WORT_OK);
  CHECK(wort_batch_put(b, "\0", 1, "v2", 2) == WORT_OK); /* the last one counts */
  CHECK(wort_batch_remove(b, "gone", 4) == WORT_OK);
  CHECK(wort_batch_remove(b, "absent", 6) == WORT_OK);
  CHECK(wort_batch_count(b) == 5);
  CHECK(wort_batch_put(b, NULL, 3, "v", 1) == WORT_INVALID_ARGUMENT);
  CHECK(wort_write(NULL, b) == WORT_INVALID_ARGUMENT);
  CHECK(wort_write(db, NULL) == WORT_INVALID_ARGUMENT);
  CHECK(wort_write(db, b) == WORT_OK);
  CHECK(wort_get_copy(db, "\0", 1, buf, sizeof buf, &len) == WORT_OK && len == 2 && memcmp(buf, "v2", 2) == 0);
  CHECK(wort_get_copy(db, "\x80k", 2, buf, sizeof buf, &len) == WORT_OK && len == 2 && memcmp(buf, "v1", 2) == 0);
  CHECK(wort_exists(db, "gone", 4) == WORT_NOT_FOUND);
  CHECK(wort_count(db, &n) == WORT_OK && n == 2);
  /* A batch with one bad operation changes nothing. */
  wort_batch_clear(b);
  CHECK(wort_batch_count(b) == 0);
  CHECK(wort_batch_put(b, "new", 3, "v", 1) == WORT_OK);
  {
    static char long_key[5000];
    memset(long_key, 'k', sizeof long_key);
    CHECK(wort_batch_put(b, long_key, sizeof long_key, "v", 1) == WORT_OK);
  }
  CHECK(wort_write(db, b) == WORT_INVALID_ARGUMENT && strlen(wort_errormsg()) > 0);
  CHECK(wort_exists(db, "new", 3) == WORT_NOT_FOUND);
  wort_batch_delete(b);
  wort_batch_delete(NULL);
  CHECK(wort_close(db) == WORT_OK);
  db = open_db("woart", WORT_KEY_BYTES);
  if (!db) return;
  CHECK(wort_count(db, &n) == WORT_OK && n == 2);
  CHECK(wort_close(db) == WORT_OK);
  unlink(pool_path);
}

/* A read-only open (wort_config_put_read_only): reads work, writes are refused with
 * WORT_INVALID_ARGUMENT and a message naming read-only. */
static void test_read_only(void) {
  wort_db *db = open_db("woart", WORT_KEY_BYTES);
  wort_config *cfg = wort_config_new();
  struct got g;
  uint64_t n = 0;
  CHECK(wort_put(db, "\x80k", 2, "v1", 2) == WORT_OK);
  CHECK(wort_close(db) == WORT_OK);
  db = NULL;
  CHECK(wort_config_put_path(cfg, pool_path) == WORT_OK);
  CHECK(wort_config_put_kind(cfg, "") == WORT_OK);
  CHECK(wort_config_put_read_only(cfg, 1) == WORT_OK);
  CHECK(wort_config_put_read_only(NULL, 1) == WORT_INVALID_ARGUMENT);
  CHECK(wort_open(cfg, &db) == WORT_OK);
  memset(&g, 0, sizeof g);
  CHECK(wort_get(db, "\x80k", 2, get_cb, &g) == WORT_OK && g.len == 2 && memcmp(g.buf, "v1", 2) == 0);
  CHECK(wort_count(db, &n) == WORT_OK && n >= 1);
  CHECK(wort_put(db, "x", 1, "y", 1) == WORT_INVALID_ARGUMENT);
  CHECK(strstr(wort_errormsg(), "read-only") != NULL);
  CHECK(wort_remove(db, "\x80k", 2) == WORT_INVALID_ARGUMENT);
  CHECK(wort_close(db) == WORT_OK);
  wort_config_delete(cfg);
  unlink(pool_path);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/dev/shm";
  snprintf(pool_path, sizeof pool_path, "%s/wort-capi-%ld.pool", dir, (long)getpid());
  unlink(pool_path);
  test_version();
  test_basic();
  test_open_errors();
  test_every_kind();
  test_batch();
  test_read_only();
  unlink(pool_path);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
