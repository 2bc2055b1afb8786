#include <wort/kv.h>

#include <cstdio>

int main() {
  wort::KvConfig cfg;
  cfg.path = "data.pool";
  cfg.kind = "woart";  // wort::KvKinds() lists the kinds
  std::unique_ptr<wort::KvStore> db;
  wort::Status s = wort::KvStore::Open(cfg, &db);
  if (s.ok()) s = db->Put("alice", "{\"age\": 42}");  // durable when it returns OK
  std::string v;
  if (s.ok()) s = db->Get("alice", &v);
  if (s.ok())
    s = db->Scan("a", "b", [](std::string_view key, std::string_view value) {  // "a" <= key < "b"
      std::printf("%.*s = %.*s\n", int(key.size()), key.data(), int(value.size()), value.data());
      return true;  // false stops the scan
    });
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok() && v == "{\"age\": 42}" ? 0 : 1;
}
