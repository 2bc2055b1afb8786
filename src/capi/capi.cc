// The C API (wort.h) over the key-value store API (wort/kv.h). Every entry point catches every
// exception (none crosses into C) and turns a Status into a code + a per-thread message.
#include "wort.h"

#include <cstring>
#include <new>
#include <string>

#include "wort/kv.h"
#include "wort/version.h"

struct wort_config {
  wort::KvConfig cfg;
};

struct wort_db {
  std::unique_ptr<wort::KvStore> kv;
};

struct wort_batch {
  wort::KvBatch b;
};

static_assert(WORT_MAX_BATCH_OPS == wort::kMaxBatchOps && WORT_MAX_BATCH_BYTES == wort::kMaxBatchBytes);

namespace {

thread_local std::string g_msg;

int Fail(int code, std::string msg) {
  g_msg = std::move(msg);
  return code;
}

int From(const wort::Status& s) {
  if (s.ok()) return WORT_OK;
  return Fail(static_cast<int>(s.code()), s.ToString());
}

// Runs fn (returning an int code), mapping exceptions to codes.
template <class F>
int Guard(F&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(WORT_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(WORT_UNKNOWN_ERROR, e.what());
  } catch (...) {
    return Fail(WORT_UNKNOWN_ERROR, "unknown error");
  }
}

int NullArg(const char* what) { return Fail(WORT_INVALID_ARGUMENT, std::string(what) + " is NULL"); }

// A byte string from C: NULL is allowed only with length 0.
bool View(const char* p, size_t n, std::string_view* out) {
  if (!p && n) return false;
  *out = n ? std::string_view(p, n) : std::string_view();
  return true;
}

#define WORT_CHECK_DB(db) \
  if (!(db) || !(db)->kv) return NullArg("db")
#define WORT_VIEW(p, n, v, what) \
  std::string_view v;            \
  if (!View(p, n, &v)) return NullArg(what)

}  // namespace

extern "C" {

const char* wort_version(void) { return wort::Version(); }

const char* wort_errormsg(void) { return g_msg.c_str(); }

size_t wort_kind_count(void) {
  try {
    return wort::KvKinds().size();
  } catch (...) {
    return 0;
  }
}

const char* wort_kind_name(size_t i) {
  try {
    static const std::vector<std::string> kinds = wort::KvKinds();
    return i < kinds.size() ? kinds[i].c_str() : nullptr;
  } catch (...) {
    return nullptr;
  }
}

wort_config* wort_config_new(void) { return new (std::nothrow) wort_config(); }
void wort_config_delete(wort_config* cfg) { delete cfg; }

int wort_config_put_path(wort_config* cfg, const char* path) {
  if (!cfg || !path) return NullArg(!cfg ? "cfg" : "path");
  return Guard([&] { return cfg->cfg.path = path, WORT_OK; });
}
int wort_config_put_size(wort_config* cfg, uint64_t size) {
  if (!cfg) return NullArg("cfg");
  cfg->cfg.size = size;
  return WORT_OK;
}
int wort_config_put_kind(wort_config* cfg, const char* kind) {
  if (!cfg || !kind) return NullArg(!cfg ? "cfg" : "kind");
  return Guard([&] { return cfg->cfg.kind = kind, WORT_OK; });
}
int wort_config_put_name(wort_config* cfg, const char* name) {
  if (!cfg || !name) return NullArg(!cfg ? "cfg" : "name");
  return Guard([&] { return cfg->cfg.name = name, WORT_OK; });
}
int wort_config_put_key_type(wort_config* cfg, int key_type) {
  if (!cfg) return NullArg("cfg");
  if (key_type != WORT_KEY_BYTES && key_type != WORT_KEY_U64)
    return Fail(WORT_INVALID_ARGUMENT, "key type must be WORT_KEY_BYTES or WORT_KEY_U64");
  cfg->cfg.key_type = static_cast<wort::KeyType>(key_type);
  return WORT_OK;
}
int wort_config_put_sync(wort_config* cfg, int sync) {
  if (!cfg) return NullArg("cfg");
  if (sync != WORT_SYNC_PERSIST && sync != WORT_SYNC_MSYNC)
    return Fail(WORT_INVALID_ARGUMENT, "sync must be WORT_SYNC_PERSIST or WORT_SYNC_MSYNC");
  cfg->cfg.sync = static_cast<wort::SyncMode>(sync);
  return WORT_OK;
}
int wort_config_put_create_if_missing(wort_config* cfg, int create) {
  if (!cfg) return NullArg("cfg");
  cfg->cfg.create_if_missing = create != 0;
  return WORT_OK;
}

int wort_config_put_read_only(wort_config* cfg, int read_only) {
  if (!cfg) return NullArg("cfg");
  cfg->cfg.read_only = read_only != 0;
  return WORT_OK;
}

int wort_open(const wort_config* cfg, wort_db** db) {
  if (!cfg || !db) return NullArg(!cfg ? "cfg" : "db");
  return Guard([&] {
    auto h = std::make_unique<wort_db>();
    const int rc = From(wort::KvStore::Open(cfg->cfg, &h->kv));
    if (rc == WORT_OK) *db = h.release();
    return rc;
  });
}

int wort_close(wort_db* db) {
  if (!db) return WORT_OK;
  const int rc = Guard([&] { return db->kv ? From(db->kv->Close()) : WORT_OK; });
  delete db;
  return rc;
}

int wort_put(wort_db* db, const char* key, size_t key_len, const char* value, size_t value_len) {
  WORT_CHECK_DB(db);
  WORT_VIEW(key, key_len, k, "key");
  WORT_VIEW(value, value_len, v, "value");
  return Guard([&] { return From(db->kv->Put(k, v)); });
}

int wort_get(wort_db* db, const char* key, size_t key_len, wort_get_cb* cb, void* arg) {
  WORT_CHECK_DB(db);
  WORT_VIEW(key, key_len, k, "key");
  if (!cb) return NullArg("cb");
  return Guard([&] {
    return From(db->kv->Get(k, [&](std::string_view v) { cb(v.data(), v.size(), arg); }));
  });
}

int wort_get_copy(wort_db* db, const char* key, size_t key_len, char* buf, size_t buf_size, size_t* value_len) {
  WORT_CHECK_DB(db);
  WORT_VIEW(key, key_len, k, "key");
  if (!value_len || (!buf && buf_size)) return NullArg(!value_len ? "value_len" : "buf");
  return Guard([&] {
    bool fits = true;
    const int rc = From(db->kv->Get(k, [&](std::string_view v) {
      *value_len = v.size();
      fits = v.size() <= buf_size;
      if (fits && !v.empty()) std::memcpy(buf, v.data(), v.size());
    }));
    if (rc == WORT_OK && !fits)
      return Fail(WORT_INVALID_ARGUMENT, "buffer of " + std::to_string(buf_size) + " bytes is too small for a value of " +
                                             std::to_string(*value_len) + " bytes");
    return rc;
  });
}

int wort_exists(wort_db* db, const char* key, size_t key_len) {
  WORT_CHECK_DB(db);
  WORT_VIEW(key, key_len, k, "key");
  return Guard([&] { return From(db->kv->Exists(k)); });
}

int wort_remove(wort_db* db, const char* key, size_t key_len) {
  WORT_CHECK_DB(db);
  WORT_VIEW(key, key_len, k, "key");
  return Guard([&] { return From(db->kv->Remove(k)); });
}

wort_batch* wort_batch_new(void) { return new (std::nothrow) wort_batch; }

void wort_batch_delete(wort_batch* batch) { delete batch; }

int wort_batch_put(wort_batch* batch, const char* key, size_t key_len, const char* value, size_t value_len) {
  if (!batch) return NullArg("batch");
  WORT_VIEW(key, key_len, k, "key");
  WORT_VIEW(value, value_len, v, "value");
  return Guard([&] {
    batch->b.Put(k, v);
    return WORT_OK;
  });
}

int wort_batch_remove(wort_batch* batch, const char* key, size_t key_len) {
  if (!batch) return NullArg("batch");
  WORT_VIEW(key, key_len, k, "key");
  return Guard([&] {
    batch->b.Remove(k);
    return WORT_OK;
  });
}

void wort_batch_clear(wort_batch* batch) {
  if (batch) batch->b.Clear();
}

size_t wort_batch_count(const wort_batch* batch) { return batch ? batch->b.size() : 0; }

int wort_write(wort_db* db, const wort_batch* batch) {
  WORT_CHECK_DB(db);
  if (!batch) return NullArg("batch");
  return Guard([&] { return From(db->kv->Write(batch->b)); });
}

int wort_count(wort_db* db, uint64_t* count) {
  WORT_CHECK_DB(db);
  if (!count) return NullArg("count");
  return Guard([&] { return From(db->kv->Count(count)); });
}

int wort_scan(wort_db* db, const char* start, size_t start_len, const char* end, size_t end_len, wort_scan_cb* cb,
              void* arg) {
  WORT_CHECK_DB(db);
  WORT_VIEW(start, start_len, s, "start");
  std::string_view e;
  if (end && !View(end, end_len, &e)) return NullArg("end");
  if (!cb) return NullArg("cb");
  return Guard([&] {
    std::optional<std::string_view> bound;
    if (end) bound = e;
    return From(db->kv->Scan(s, bound, [&](std::string_view k, std::string_view v) {
      return cb(k.data(), k.size(), v.data(), v.size(), arg) == 0;
    }));
  });
}

int wort_get_capabilities(wort_db* db, wort_capabilities* out) {
  WORT_CHECK_DB(db);
  if (!out) return NullArg("out");
  return Guard([&] {
    const wort::KvCapabilities c = db->kv->Capabilities();
    wort_capabilities r{};
    r.ordered = c.ordered;
    r.thread_safe = c.thread_safe;
    r.parallel_writes = c.parallel_writes;
    r.key_type = static_cast<int>(c.key_type);
    r.max_key_len = c.max_key_len;
    r.max_value_len = c.max_value_len;
    switch (c.durability) {
      case wort::Durability::kPowerFail: r.durability = WORT_DURABLE_POWER_FAIL; break;
      case wort::Durability::kFileSync: r.durability = WORT_DURABLE_FILE_SYNC; break;
      case wort::Durability::kProcessCrash: r.durability = WORT_DURABLE_PROCESS_CRASH; break;
      case wort::Durability::kTmpfs: r.durability = WORT_DURABLE_TMPFS; break;
    }
    std::strncpy(r.kind, c.kind.c_str(), sizeof r.kind - 1);
    *out = r;
    return WORT_OK;
  });
}

}  // extern "C"

static_assert(WORT_NOT_FOUND == static_cast<int>(wort::Code::kNotFound) &&
                  WORT_ALREADY_EXISTS == static_cast<int>(wort::Code::kAlreadyExists) &&
                  WORT_INVALID_ARGUMENT == static_cast<int>(wort::Code::kInvalidArgument) &&
                  WORT_POOL_FULL == static_cast<int>(wort::Code::kPoolFull) &&
                  WORT_CORRUPTION == static_cast<int>(wort::Code::kCorruption) &&
                  WORT_IO_ERROR == static_cast<int>(wort::Code::kIOError) &&
                  WORT_NOT_SUPPORTED == static_cast<int>(wort::Code::kNotSupported) &&
                  WORT_BUSY == static_cast<int>(wort::Code::kBusy),
              "wort.h's codes are wort::Code's");
static_assert(WORT_KEY_BYTES == static_cast<int>(wort::KeyType::kBytes) &&
              WORT_KEY_U64 == static_cast<int>(wort::KeyType::kU64));
