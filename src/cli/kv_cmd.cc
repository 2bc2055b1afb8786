// `wort kv get|put|delete|scan|dump|load|stats`: a key-value store's contents from the shell
// (the store of wort/kv.h: root NAME of a pool file). Keys and values on the command line are in
// the escaped form of cli/kv_text.h (plain text stands for itself; "\\" is a backslash, "\ff" a
// byte); dump/load use the text format described there, which round-trips any bytes.
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sys/stat.h>

#include "cli/command.h"
#include "cli/kv_text.h"
#include "cli/options.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/kv.h"
#include "wort/pool.h"

namespace wort::cli {
namespace {

struct KvOpts {
  std::string pool;
  std::string store = "kv";
  std::string kind;          // of a new store (put, load); a check when opening
  std::string key_type;      // of a new store: bytes or u64
  uint64_t pool_size = KvConfig{}.size;
  // per command
  std::string key, value, value_file, start, end, file;
  uint64_t limit = ~uint64_t{0};
  uint64_t batch = 0;  // load: pairs per batch (0: as many as one batch holds)
  bool raw = false, keys_only = false;
};

[[noreturn]] void Die(const char* cmd, const Status& s) { Fail(std::string("wort kv ") + cmd, s); }

std::string Arg(const char* cmd, const char* what, const std::string& text) {
  std::string out;
  Status s = Unescape(text, &out);
  if (!s.ok()) Die(cmd, Status::InvalidArgument(std::string(what) + " '" + text + "': " + s.message()));
  return out;
}

// What the pool holds under the store's name, found by a read-only look (nothing is written):
// kind and key type, so that the store can be opened as what it is.
struct Existing {
  bool pool = false, store = false;
  std::string kind;
  KeyType key_type = KeyType::kBytes;
};

Existing Probe(const char* cmd, const KvOpts& o) {
  Existing e;
  struct stat sb;
  if (::stat(o.pool.c_str(), &sb) != 0) return e;
  e.pool = true;
  PoolOptions po;
  po.read_only = true;
  po.background_recovery = false;
  std::unique_ptr<Pool> p;
  Status s = Pool::Open(o.pool, po, &p);
  if (!s.ok()) Die(cmd, s);
  RootInfo r;
  if (p->FindRoot(o.store, &r).ok()) {
    const IndexKind* k = FindIndexKindById(r.type);
    if (k == nullptr) Die(cmd, Status::InvalidArgument("root '" + o.store + "' of " + o.pool + " is not a key-value store"));
    std::unique_ptr<Index> idx;
    s = OpenIndex(*p, o.store, &idx);
    if (!s.ok()) Die(cmd, s);
    e.store = true;
    e.kind = k->name;
    e.key_type = idx->key_type();
  }
  (void)p->Close();
  return e;
}

// Opens the store. `create`: a missing pool or store is created (kind: --kind, else `dflt_kind`).
// `read_only` (get, scan, dump, stats): KvConfig::read_only - beside a writing process, and on a
// file this user cannot write; a pool that needs recovery (no writer alive) is opened for
// writing instead, which recovers it.
std::unique_ptr<KvStore> OpenStore(const char* cmd, const KvOpts& o, bool create, const std::string& dflt_kind = "woart",
                                   KeyType dflt_key_type = KeyType::kBytes, bool read_only = false) {
  const Existing e = Probe(cmd, o);
  if (!create && !e.pool) Die(cmd, Status::NotFound("no pool file " + o.pool));
  if (!create && !e.store) Die(cmd, Status::NotFound("no store '" + o.store + "' in " + o.pool));
  KvConfig c;
  c.path = o.pool;
  c.name = o.store;
  c.size = o.pool_size;
  c.create_if_missing = create;
  if (e.store) {
    c.kind = o.kind;  // "" = whatever it is; else a check
    c.key_type = e.key_type;
    if (!o.key_type.empty() && o.key_type != (e.key_type == KeyType::kU64 ? "u64" : "bytes"))
      Die(cmd, Status::InvalidArgument("store '" + o.store + "' has " + (e.key_type == KeyType::kU64 ? "u64" : "bytes") +
                                       " keys, not " + o.key_type));
  } else {
    c.kind = o.kind.empty() ? dflt_kind : o.kind;
    c.key_type = o.key_type.empty() ? dflt_key_type : o.key_type == "u64" ? KeyType::kU64 : KeyType::kBytes;
  }
  std::unique_ptr<KvStore> db;
  c.read_only = read_only;
  Status s = KvStore::Open(c, &db);
  if (read_only && s.code() == Code::kBusy && s.message().starts_with("pool needs recovery")) {
    c.read_only = false;
    s = KvStore::Open(c, &db);
  }
  if (!s.ok()) Die(cmd, s);
  return db;
}

void Close(const char* cmd, std::unique_ptr<KvStore>& db) {
  Status s = db->Close();
  if (!s.ok()) Die(cmd, s);
}

void WriteAll(const char* cmd, std::FILE* f, std::string_view bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    Die(cmd, Status::IOError("write to the output failed"));
}

CLI::App* AddCommon(CLI::App* kv, const char* name, const char* help, const std::shared_ptr<KvOpts>& o) {
  auto* c = kv->add_subcommand(name, help);
  c->add_option("pool", o->pool, "Pool file")->required();
  c->add_option("--store", o->store, "Name of the store in the pool (a root name)")->capture_default_str();
  c->add_option("--kind", o->kind,
                "Index kind of a new store (put, load; default: woart, or the dump's); when the store exists, "
                "refused unless it is of this kind");
  return c;
}

void AddCreateOptions(CLI::App* c, const std::shared_ptr<KvOpts>& o) {
  c->add_option("--key-type", o->key_type, "Key type of a new store: bytes or u64 (8-byte keys)")
      ->check(CLI::IsMember({"bytes", "u64"}));
  AddSizeOption(c, "--pool-size", &o->pool_size, "Size limit of the pool (0: none; a new pool starts at about 1 MiB; another value replaces the limit of an existing one)");
}

void AddKv(CLI::App& app) {
  auto* kv = app.add_subcommand(
      "kv",
      "Read and write a key-value store (wort/kv.h) of a pool. Keys and values on the command line are escaped "
      "text: printable bytes stand for themselves, \\\\ is a backslash, \\hh a byte in hex");
  kv->require_subcommand(1);

  {  // get
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "get", "Print the value of a key (escaped, then a newline; --raw: the bytes as they are)", o);
    c->add_option("key", o->key, "Key (escaped text)")->required();
    c->add_flag("--raw", o->raw, "Write the value's bytes unescaped, without a newline");
    c->callback([o] {
      const std::string key = Arg("get", "key", o->key);
      auto db = OpenStore("get", *o, false, "woart", KeyType::kBytes, /*read_only=*/true);
      std::string v;
      Status s = db->Get(key, &v);
      if (!s.ok()) Die("get", s.IsNotFound() ? Status::NotFound("no key '" + Escape(key) + "' in store '" + o->store + "'") : s);
      if (o->raw) WriteAll("get", stdout, v);
      else fmt::print("{}\n", Escape(v));
      std::fflush(stdout);
      Close("get", db);
    });
  }
  {  // put
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "put", "Set a key's value (insert or overwrite; durable when the command returns)", o);
    c->add_option("key", o->key, "Key (escaped text)")->required();
    c->add_option("value", o->value, "Value (escaped text)");
    c->add_option("--value-file", o->value_file, "Read the value's bytes from this file ('-': standard input)");
    AddCreateOptions(c, o);
    c->callback([o] {
      const std::string key = Arg("put", "key", o->key);
      std::string value;
      if (!o->value_file.empty()) {
        if (!o->value.empty()) Die("put", Status::InvalidArgument("give a value or --value-file, not both"));
        if (o->value_file == "-") {
          value.assign(std::istreambuf_iterator<char>(std::cin), {});
        } else {
          std::ifstream f(o->value_file, std::ios::binary);
          if (!f) Die("put", Status::NotFound("cannot read " + o->value_file));
          value.assign(std::istreambuf_iterator<char>(f), {});
        }
      } else {
        value = Arg("put", "value", o->value);
      }
      auto db = OpenStore("put", *o, true);
      Status s = db->Put(key, value);
      if (!s.ok()) Die("put", s);
      Close("put", db);
    });
  }
  {  // delete
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "delete", "Remove a key (exit status 4 if it is absent)", o);
    c->add_option("key", o->key, "Key (escaped text)")->required();
    c->callback([o] {
      const std::string key = Arg("delete", "key", o->key);
      auto db = OpenStore("delete", *o, false);
      Status s = db->Remove(key);
      if (!s.ok()) Die("delete", s.IsNotFound() ? Status::NotFound("no key '" + Escape(key) + "' in store '" + o->store + "'") : s);
      Close("delete", db);
    });
  }
  {  // scan
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "scan",
                        "Print pairs with START <= key < END in key order, one per line: escaped key, a tab, escaped "
                        "value (ordered kinds only)",
                        o);
    c->add_option("--start", o->start, "First key (escaped text; default: the first key)");
    c->add_option("--end", o->end, "End key, excluded (escaped text; default: to the last key)");
    AddCountOption(c, "--limit", &o->limit, "At most this many pairs")->default_str("all");
    c->add_flag("--keys-only", o->keys_only, "Print the keys only");
    c->callback([o] {
      const std::string start = Arg("scan", "--start", o->start);
      std::optional<std::string> end;
      if (!o->end.empty()) end = Arg("scan", "--end", o->end);
      auto db = OpenStore("scan", *o, false, "woart", KeyType::kBytes, /*read_only=*/true);
      std::string line;
      Status s = db->Scan(
          start, end ? std::optional<std::string_view>(*end) : std::nullopt,
          [&](std::string_view k, std::string_view v) {
            line.clear();
            EscapeBytes(k, &line);
            if (!o->keys_only) {
              line.push_back('\t');
              EscapeBytes(v, &line);
            }
            line.push_back('\n');
            WriteAll("scan", stdout, line);
            return true;
          },
          o->limit);
      if (!s.ok()) Die("scan", s);
      std::fflush(stdout);
      Close("scan", db);
    });
  }
  {  // dump
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "dump",
                        "Write every pair in the text format `wort kv load` reads (any bytes round-trip; format: "
                        "doc/cli.md)",
                        o);
    c->add_option("-o,--output", o->file, "Output file (default: standard output)");
    c->callback([o] {
      auto db = OpenStore("dump", *o, false, "woart", KeyType::kBytes, /*read_only=*/true);
      const KvCapabilities caps = db->Capabilities();
      std::FILE* f = stdout;
      const std::string tmp = o->file.empty() ? "" : o->file + ".tmp";
      if (!tmp.empty()) {
        f = std::fopen(tmp.c_str(), "wb");
        if (!f) Die("dump", Status::IOError("cannot create " + tmp + ": " + std::strerror(errno)));
      }
      DumpHeader h;
      h.kind = caps.kind;
      h.key_type = caps.key_type;
      WriteAll("dump", f, DumpHeaderText(h));
      std::string line;
      Status s = db->ForEach([&](std::string_view k, std::string_view v) {
        line.assign(" ");
        EscapeBytes(k, &line);
        line.append("\n ");
        EscapeBytes(v, &line);
        line.push_back('\n');
        WriteAll("dump", f, line);
        return true;
      });
      if (!s.ok()) {
        if (!tmp.empty()) {
          std::fclose(f);
          std::remove(tmp.c_str());
        }
        Die("dump", s);
      }
      WriteAll("dump", f, "DATA=END\n");
      if (std::fflush(f) != 0) Die("dump", Status::IOError("write to the output failed"));
      if (!tmp.empty()) {
        if (std::fclose(f) != 0 || std::rename(tmp.c_str(), o->file.c_str()) != 0)
          Die("dump", Status::IOError("cannot write " + o->file + ": " + std::strerror(errno)));
      }
      Close("dump", db);
    });
  }
  {  // load
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "load",
                        "Put every pair of a dump (`wort kv dump`) into the store, creating the pool and the store "
                        "(of the dump's kind) when absent. The whole input is read and checked first: malformed "
                        "input is refused with its line number and nothing is written. The pairs are then applied "
                        "as one failure-atomic batch (KvStore::Write: all or nothing, also across a crash); a dump "
                        "larger than a batch holds (2^20 pairs or 1 GiB of keys and values) or than --batch goes in "
                        "several batches, in order, and a failure names the pairs that were applied",
                        o);
    c->add_option("-i,--input", o->file, "Input file (default: standard input)");
    c->add_option("--batch", o->batch, "Pairs per batch (0: the whole dump in one batch, up to a batch's limits)")
        ->capture_default_str();
    AddSizeOption(c, "--pool-size", &o->pool_size, "Size limit of the pool (0: none; a new pool starts at about 1 MiB; another value replaces the limit of an existing one)");
    c->callback([o] {
      DumpHeader h;
      std::vector<std::pair<std::string, std::string>> pairs;
      Status s;
      const std::string src = o->file.empty() ? "standard input" : o->file;
      if (o->file.empty()) {
        s = ReadDump(std::cin, &h, &pairs);
      } else {
        std::ifstream f(o->file, std::ios::binary);
        if (!f) Die("load", Status::NotFound("cannot read " + o->file));
        s = ReadDump(f, &h, &pairs);
      }
      if (!s.ok()) Die("load", Status(s.code(), src + ": " + s.message() + " (nothing was written)"));
      if (FindIndexKind(h.kind) == nullptr && o->kind.empty())
        Die("load", Status::InvalidArgument(src + ": the dump's kind '" + h.kind + "' is not an index kind of this wort "
                                            "(--kind picks another; nothing was written)"));
      KvOpts oo = *o;
      oo.key_type = h.key_type == KeyType::kU64 ? "u64" : "bytes";
      auto db = OpenStore("load", oo, true, h.kind, h.key_type);
      // Batches of consecutive pairs, each within KvStore::Write's limits (and --batch): pairs
      // [done, i) go in one batch; a pair larger than a batch alone cannot occur (the parser
      // bounds keys by kMaxKeyLen and values by kMaxValueLen, far below kMaxBatchBytes).
      const uint64_t max_ops = o->batch == 0 ? kMaxBatchOps : std::min<uint64_t>(o->batch, kMaxBatchOps);
      size_t done = 0, batches = 0;
      while (done < pairs.size()) {
        KvBatch b;
        size_t i = done;
        while (i < pairs.size() && b.size() < max_ops &&
               b.bytes() + pairs[i].first.size() + pairs[i].second.size() <= kMaxBatchBytes) {
          b.Put(pairs[i].first, pairs[i].second);
          ++i;
        }
        s = db->Write(b);
        if (!s.ok()) {
          // Refused before its commit point, a batch changed nothing; committed but not applied
          // (the index ran out of space), the next open of the store finishes it (wort/kv.h).
          const bool committed = s.message().starts_with("batch committed");
          const std::string applied =
              fmt::format("pairs 1-{} were applied ({} batch{})", done, batches, batches == 1 ? "" : "es");
          std::string what;
          if (committed)
            what = (done > 0 ? applied + "; " : std::string()) +
                   fmt::format("pairs {}-{} are committed and the store's next open applies them", done + 1, i) +
                   (i < pairs.size() ? fmt::format("; pairs {}-{} were not written", i + 1, pairs.size()) : std::string());
          else
            what = done == 0 ? std::string("nothing was written: the store is as it was")
                             : applied + fmt::format(", pairs {}-{} were not", done + 1, pairs.size());
          Die("load", Status(s.code(), fmt::format("{}: the batch of pairs {}-{} failed: {} ({})", src, done + 1, i,
                                                   s.message(), what)));
        }
        ++batches;
        done = i;
      }
      Close("load", db);
      fmt::print(stderr, "loaded {} pairs into store '{}' of {} ({} batch{})\n", pairs.size(), o->store, o->pool, batches,
                 batches == 1 ? "" : "es");
    });
  }
  {  // stats
    auto o = std::make_shared<KvOpts>();
    auto* c = AddCommon(kv, "stats", "Print the store's kind, key count, durability and the pool's space use", o);
    c->callback([o] {
      auto db = OpenStore("stats", *o, false, "woart", KeyType::kBytes, /*read_only=*/true);
      const KvCapabilities caps = db->Capabilities();
      uint64_t n = 0;
      Status s = db->Count(&n);
      if (!s.ok()) Die("stats", s);
      const AllocStats a = db->pool().allocator().Stats();
      fmt::print("store:       {} in {}\n", o->store, o->pool);
      fmt::print("kind:        {} ({})\n", caps.kind, caps.ordered ? "ordered" : "unordered: no scan; dump in no particular order");
      fmt::print("key type:    {}\n", caps.key_type == KeyType::kU64 ? "u64 (8-byte keys)" : "bytes");
      fmt::print("keys:        {}\n", n);
      fmt::print("durability:  {} - {}\n", DurabilityName(caps.durability), DurabilityDescription(caps.durability));
      fmt::print("pool:        {} bytes (may grow to {})\n", db->pool().size(), db->pool().max_size());
      if (caps.read_only && !db->pool().opened_clean())
        fmt::print("allocated:   unknown (another process has the pool open for writing)\n");
      else
        fmt::print("allocated:   {} blocks, {} bytes (every store and index of the pool)\n", a.blocks_allocated,
                   a.bytes_allocated);
      Close("stats", db);
    });
  }
}

const bool kRegistered = RegisterCommand(&AddKv, {"kv"});

}  // namespace
}  // namespace wort::cli
