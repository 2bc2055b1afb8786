#include <sys/wait.h>
#include <unistd.h>
#include <wort/kv.h>

#include <cstdio>

int main() {
  wort::KvConfig cfg;
  cfg.path = "data.pool";
  std::unique_ptr<wort::KvStore> writer;  // the one writing process
  wort::Status s = wort::KvStore::Open(cfg, &writer);
  if (s.ok()) s = writer->Put("alice", "{\"age\": 42}");
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  if (fork() == 0) {  // any number of reading processes beside it
    wort::KvConfig ro = cfg;
    ro.read_only = true;  // writes nothing to the pool; never blocks the writer
    std::unique_ptr<wort::KvStore> reader;
    std::string v;
    wort::Status r = wort::KvStore::Open(ro, &reader);
    if (r.ok()) r = reader->Get("alice", &v);  // a value the writer acknowledged
    std::printf("%s\n", r.ok() ? v.c_str() : r.ToString().c_str());
    _exit(r.ok() ? 0 : 1);
  }
  int status = 0;
  wait(&status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
