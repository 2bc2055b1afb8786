#include <wort/kv.h>

#include <cstdio>

int main() {
  wort::KvConfig cfg;
  cfg.path = "data.pool";
  std::unique_ptr<wort::KvStore> db;
  wort::Status s = wort::KvStore::Open(cfg, &db);
  wort::KvBatch batch;  // all or nothing, even across a crash or power failure
  batch.Put("alice", "{\"age\": 42}");
  batch.Put("bob", "{\"age\": 7}");
  batch.Remove("carol");
  if (s.ok()) s = db->Write(batch);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
