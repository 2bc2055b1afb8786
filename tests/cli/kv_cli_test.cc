// `wort kv` (src/cli/kv_cmd.cc) and its text format (src/cli/kv_text.h), as a user meets them:
// dump -> load into a new pool -> dump again is byte-identical, for keys of every byte 0x00-0xff,
// empty values, a multi-MiB value and the longest key; hash kinds and u64 keys round-trip too;
// malformed load input is refused with its line number and writes nothing; and each command's
// exit status for each kind of error (doc/cli.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/kv_text.h"
#include "common/test_util.h"
#include "wort/kv.h"

namespace {

using wort::test::TempPath;

int RunCli(const std::string& args, std::string* out) {
  return wort::test::RunShell(std::string(WORT_CLI_PATH) + " " + args, out);
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// A single-quoted shell word.
std::string Sh(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::unique_ptr<wort::KvStore> Open(const std::string& path, const std::string& kind,
                                    wort::KeyType kt = wort::KeyType::kBytes) {
  wort::KvConfig c;
  c.path = path;
  c.kind = kind;
  c.key_type = kt;
  c.size = 256ull << 20;
  std::unique_ptr<wort::KvStore> db;
  const wort::Status s = wort::KvStore::Open(c, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

std::map<std::string, std::string> Contents(wort::KvStore& db) {
  std::map<std::string, std::string> m;
  const wort::Status s = db.ForEach([&](std::string_view k, std::string_view v) {
    EXPECT_TRUE(m.emplace(k, v).second) << "a key given twice";
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Keys and values of arbitrary bytes: every single byte as a key, random byte strings (0 to 300
// bytes, 0x00-0xff), prefixes of one another, the longest key, empty values, a 3 MiB value.
std::map<std::string, std::string> ArbitraryPairs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, std::string> m;
  for (int b = 0; b < 256; ++b) m[std::string(1, static_cast<char>(b))] = RandomBytes(rng, rng() % 40);
  for (int i = 0; i < 400; ++i) m[RandomBytes(rng, rng() % 300)] = RandomBytes(rng, rng() % 200);
  m["pre"] = "";
  m["prefix"] = "";
  m[std::string("pre\0fix", 7)] = std::string("\\\\x00\\", 6);  // backslashes, as text
  m["\\"] = "\\ff";
  m[std::string(wort::kMaxKeyLen, '\xff')] = "longest key";
  m["large"] = RandomBytes(rng, 3u << 20);
  return m;
}

TEST(KvText, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string e = wort::cli::Escape(all);
  for (char c : e) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << "escaped text holds byte " << int(c);
  std::string back;
  ASSERT_TRUE(wort::cli::Unescape(e, &back).ok());
  EXPECT_EQ(back, all);
  EXPECT_EQ(wort::cli::Escape(std::string("a\\b\0\n\x80 ", 7)), "a\\\\b\\00\\0a\\80 ");
  ASSERT_TRUE(wort::cli::Unescape("\\FF\\0a", &back).ok()) << "uppercase hex is accepted";
  EXPECT_EQ(back, "\xff\n");
}

TEST(KvText, BadEscapesNameTheColumn) {
  const std::pair<const char*, const char*> bad[] = {
      {"ab\\", "column 3"}, {"\\g0", "column 1"}, {"x\\0", "column 2"}, {"a\tb", "column 2: byte 0x09"},
      {"\x80", "column 1: byte 0x80"}, {"ok\\x41", "column 3"}};
  for (const auto& [text, want] : bad) {
    std::string out = "untouched";
    const wort::Status s = wort::cli::Unescape(text, &out);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
    EXPECT_EQ(out, "untouched");
  }
}

TEST(KvCli, DumpLoadDumpIsByteIdenticalForArbitraryBytes) {
  TempPath a("kvcli-a"), b("kvcli-b"), d1("kvcli-d1"), d2("kvcli-d2");
  const auto want = ArbitraryPairs(7);
  {
    auto db = Open(a, "woart");
    ASSERT_TRUE(db);
    for (const auto& [k, v] : want) ASSERT_TRUE(db->Put(k, v).ok()) << wort::cli::Escape(k);
    ASSERT_TRUE(db->Close().ok());
  }
  std::string out;
  ASSERT_EQ(RunCli("kv dump " + a.str() + " -o " + d1.str(), &out), 0) << out;
  out.clear();
  ASSERT_EQ(RunCli("kv load " + b.str() + " -i " + d1.str() + " --pool-size 256M", &out), 0) << out;
  EXPECT_NE(out.find("loaded " + std::to_string(want.size()) + " pairs"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(RunCli("kv dump " + b.str() + " -o " + d2.str(), &out), 0) << out;
  const std::string t1 = ReadAll(d1), t2 = ReadAll(d2);
  EXPECT_GT(t1.size(), 6u << 20) << "the 3 MiB value is in the dump (escaped)";
  EXPECT_TRUE(t1 == t2) << "dump -> load -> dump differs";
  EXPECT_EQ(t1.rfind("VERSION=1\nformat=print\nkind=woart\nkey_type=bytes\nHEADER=END\n", 0), 0u);
  EXPECT_EQ(t1.substr(t1.size() - 9), "DATA=END\n");
  for (char c : t1) ASSERT_TRUE(c == '\n' || (c >= 0x20 && c <= 0x7e)) << "the dump is text";
  auto db = Open(b, "");
  ASSERT_TRUE(db);
  EXPECT_EQ(db->Capabilities().kind, "woart") << "load created a store of the dump's kind";
  EXPECT_TRUE(Contents(*db) == want) << "the loaded store differs from the original";
}

TEST(KvCli, HashKindsAndU64KeysRoundTrip) {
  for (const auto& [kind, kt] : {std::pair<const char*, wort::KeyType>{"cceh", wort::KeyType::kBytes},
                                 {"linp", wort::KeyType::kU64},
                                 {"fastfair", wort::KeyType::kU64}}) {
    TempPath a("kvcli-ha"), b("kvcli-hb"), d1("kvcli-hd1"), d2("kvcli-hd2");
    std::map<std::string, std::string> want;
    std::mt19937_64 rng(11);
    for (int i = 0; i < 3000; ++i) {
      const std::string k = kt == wort::KeyType::kU64 ? wort::EncodeU64(rng()) : RandomBytes(rng, 1 + rng() % 40);
      want[k] = RandomBytes(rng, rng() % 64);
    }
    if (kt == wort::KeyType::kU64) want[wort::EncodeU64(0)] = "zero";
    {
      auto db = Open(a, kind, kt);
      ASSERT_TRUE(db);
      for (const auto& [k, v] : want) ASSERT_TRUE(db->Put(k, v).ok());
      EXPECT_TRUE(Contents(*db) == want) << kind << ": ForEach gives every pair once";
      ASSERT_TRUE(db->Close().ok());
    }
    std::string out;
    ASSERT_EQ(RunCli("kv dump " + a.str() + " -o " + d1.str(), &out), 0) << kind << out;
    EXPECT_NE(ReadAll(d1).find(std::string("kind=") + kind + "\nkey_type=" +
                               (kt == wort::KeyType::kU64 ? "u64" : "bytes")),
              std::string::npos);
    ASSERT_EQ(RunCli("kv load " + b.str() + " -i " + d1.str(), &out), 0) << kind << out;
    auto db = Open(b, "", kt);
    ASSERT_TRUE(db);
    EXPECT_EQ(db->Capabilities().kind, kind);
    EXPECT_TRUE(Contents(*db) == want) << kind;
    ASSERT_TRUE(db->Close().ok());
    if (std::string(kind) == "fastfair") {  // ordered: the second dump is byte-identical too
      ASSERT_EQ(RunCli("kv dump " + b.str() + " -o " + d2.str(), &out), 0) << out;
      EXPECT_TRUE(ReadAll(d1) == ReadAll(d2));
    }
  }
}

TEST(KvCli, MalformedLoadInputNamesTheLineAndWritesNothing) {
  const std::string head = "VERSION=1\nformat=print\nkind=woart\nkey_type=bytes\nHEADER=END\n";
  const std::pair<std::string, std::string> bad[] = {
      {"", "empty input: not a wort dump"},
      {"VERSION=2\n", "line 1: unsupported format version"},
      {"format=print\n", "line 1: not a wort dump"},
      {"VERSION=1\nformat=print\nkind=woart\nHEADER=END\n DATA=END\n", "line 4: the header lacks key_type"},
      {"VERSION=1\nformat=print\ncolour=blue\n", "line 3: unknown header line"},
      {"VERSION=1\nformat=print\nkind=woart\nkey_type=bytes\n", "the header has no HEADER=END"},
      {head + " a\n 1\nb\n 2\nDATA=END\n", "line 8: a key line must start with a space"},
      {head + " a\n 1\n b\n\nDATA=END\n", "line 9: a value line must start with a space"},
      {head + " a\n 1\n b\x80\n 2\nDATA=END\n", "line 8: column 3: byte 0x80 must be escaped"},
      {head + " a\n 1\n b\tc\n 2\nDATA=END\n", "line 8: column 3: byte 0x09"},
      {head + " a\n 1\n b\n 2\\zz\nDATA=END\n", "line 9: column 3"},
      {head + " a\n 1\n b\n 2\r\nDATA=END\n", "line 9: column 3: byte 0x0d"},
      {head + " a\n 1\n b\nDATA=END\n", "line 9: DATA=END where the value"},
      {head + " a\n 1\n b\n 2\n", "without DATA=END (truncated?)"},
      {head + " a\n 1\n b\n", "after a key line, without its value"},
      {head + " a\n 1\nDATA=END\n x\n", "line 9: text after DATA=END"},
      {head + " " + std::string(wort::kMaxKeyLen + 1, 'k') + "\n 1\nDATA=END\n", "line 6: key of 4097 bytes"},
      {"VERSION=1\nformat=print\nkind=woart\nkey_type=u64\nHEADER=END\n abc\n 1\nDATA=END\n",
       "line 6: a u64 key is 8 bytes"},
  };
  TempPath fresh("kvcli-fresh"), existing("kvcli-existing"), input("kvcli-bad");
  {
    auto db = Open(existing, "woart");
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->Put("kept", "value").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  const std::string before = ReadAll(existing);
  for (const auto& [text, want] : bad) {
    WriteAll(input, text);
    for (const std::string* pool : {&fresh.str(), &existing.str()}) {
      std::string out;
      EXPECT_EQ(RunCli("kv load " + *pool + " -i " + input.str(), &out), 2) << wort::cli::Escape(text) << "\n" << out;
      EXPECT_NE(out.find(want), std::string::npos) << wort::cli::Escape(text) << "\n" << out;
      EXPECT_NE(out.find("nothing was written"), std::string::npos) << out;
    }
    EXPECT_FALSE(std::filesystem::exists(fresh.str())) << "a refused load created the pool";
    EXPECT_TRUE(ReadAll(existing) == before) << "a refused load changed the pool: " << want;
  }
  // The same input through standard input.
  WriteAll(input, head + " a\n");
  std::string out;
  EXPECT_EQ(RunCli("kv load " + fresh.str() + " < " + input.str(), &out), 2) << out;
  EXPECT_NE(out.find("standard input: line 6"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(fresh.str()));
}

// `wort kv load` applies a dump as one failure-atomic batch: when the pool fills up part way,
// nothing of the dump is in the store (a load of puts would have left the pairs before the
// failure); with --batch N it goes in batches of N pairs, and a failure names the pairs applied,
// which are exactly the first ones of the dump. Keys carry bytes >= 0x80.
TEST(KvCli, LoadIsOneBatchAndAFullPoolLeavesTheStoreUnchanged) {
  TempPath pool("kvcli-batch"), input("kvcli-batch-in");
  {
    auto db = Open(pool, "woart");
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->Put("kept", "value").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string text = "VERSION=1\nformat=print\nkind=woart\nkey_type=bytes\nHEADER=END\n";
  for (int i = 0; i < 600; ++i) {
    std::string k("\x80\xff"), v(8000, static_cast<char>(0x80 + i % 128));
    k += std::to_string(100000 + i);
    text += ' ';
    text += wort::cli::Escape(k);
    text += "\n ";
    text += wort::cli::Escape(v);
    text += '\n';
    pairs.emplace_back(k, v);
  }
  text += "DATA=END\n";
  WriteAll(input, text);
  auto contents = [&] {
    auto db = Open(pool, "");
    EXPECT_TRUE(db);
    return db ? Contents(*db) : std::map<std::string, std::string>{};
  };
  // 600 values of 8000 bytes (4.8 MB) do not fit in a pool limited to 4 MiB: one batch, refused.
  std::string out;
  EXPECT_EQ(RunCli("kv load " + pool.str() + " -i " + input.str() + " --pool-size 4M", &out), 1) << out;
  EXPECT_NE(out.find("the batch of pairs 1-600 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing was written: the store is as it was"), std::string::npos) << out;
  const std::map<std::string, std::string> kept{{"kept", "value"}};
  EXPECT_TRUE(contents() == kept) << "a failed load changed the store";

  // In batches of 100: the first batches fit, a later one does not; the store holds exactly the
  // pairs the message names as applied.
  out.clear();
  EXPECT_EQ(RunCli("kv load " + pool.str() + " -i " + input.str() + " --pool-size 4M --batch 100", &out), 1) << out;
  const size_t at = out.find("pairs 1-");
  ASSERT_NE(at, std::string::npos) << out;
  const size_t applied = std::stoul(out.substr(at + 8));
  EXPECT_NE(out.find("pairs 1-" + std::to_string(applied) + " were applied (" + std::to_string(applied / 100) + " batch"),
            std::string::npos) << out;
  EXPECT_NE(out.find("pairs " + std::to_string(applied + 1) + "-600 were not"), std::string::npos) << out;
  EXPECT_GE(applied, 100u);
  EXPECT_LT(applied, 600u);
  EXPECT_EQ(applied % 100, 0u);
  std::map<std::string, std::string> want = kept;
  for (size_t i = 0; i < applied; ++i) want.insert(pairs[i]);
  EXPECT_TRUE(contents() == want) << "the store holds other pairs than the first " << applied;

  // With room, one batch (the message says so) and every pair present.
  out.clear();
  ASSERT_EQ(RunCli("kv load " + pool.str() + " -i " + input.str() + " --pool-size 64M", &out), 0) << out;
  EXPECT_NE(out.find("loaded 600 pairs into store 'kv' of " + pool.str() + " (1 batch)"), std::string::npos) << out;
  for (const auto& p : pairs) want.insert(p);
  EXPECT_TRUE(contents() == want);
}

TEST(KvCli, GetPutDeleteScanStats) {
  TempPath p("kvcli-ops"), raw("kvcli-raw"), vf("kvcli-vf");
  std::string out;
  ASSERT_EQ(RunCli("kv put " + p.str() + " alice 42 --pool-size 64M", &out), 0) << out;
  ASSERT_EQ(RunCli("kv put " + p.str() + " " + Sh("b\\00\\ff") + " " + Sh("x\\\\y\\0a"), &out), 0) << out;
  out.clear();
  ASSERT_EQ(RunCli("kv get " + p.str() + " alice", &out), 0) << out;
  EXPECT_EQ(out, "42\n");
  out.clear();
  ASSERT_EQ(RunCli("kv get " + p.str() + " " + Sh("b\\00\\ff"), &out), 0) << out;
  EXPECT_EQ(out, "x\\\\y\\0a\n") << "printed escaped";
  out.clear();
  ASSERT_EQ(RunCli("kv get --raw " + p.str() + " " + Sh("b\\00\\ff") + " > " + raw.str(), &out), 0) << out;
  EXPECT_EQ(ReadAll(raw), "x\\y\n") << "--raw: the bytes as they are";
  // A value from a file (any bytes), and an empty value.
  const std::string big(1 << 20, '\0');
  WriteAll(vf, big + "\xff");
  ASSERT_EQ(RunCli("kv put " + p.str() + " big --value-file " + vf.str(), &out), 0) << out;
  ASSERT_EQ(RunCli("kv put " + p.str() + " empty ''", &out), 0) << out;
  ASSERT_EQ(RunCli("kv get --raw " + p.str() + " big > " + raw.str(), &out), 0) << out;
  EXPECT_TRUE(ReadAll(raw) == big + "\xff");
  out.clear();
  ASSERT_EQ(RunCli("kv scan " + p.str() + " --keys-only", &out), 0) << out;
  EXPECT_EQ(out, "alice\nb\\00\\ff\nbig\nempty\n");
  out.clear();
  ASSERT_EQ(RunCli("kv scan " + p.str() + " --start b --end c --limit 1", &out), 0) << out;
  EXPECT_EQ(out, "b\\00\\ff\tx\\\\y\\0a\n");
  out.clear();
  ASSERT_EQ(RunCli("kv stats " + p.str(), &out), 0) << out;
  EXPECT_NE(out.find("keys:        4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("kind:        woart"), std::string::npos) << out;
  // Not found: 4.
  out.clear();
  EXPECT_EQ(RunCli("kv get " + p.str() + " nobody", &out), 4) << out;
  EXPECT_NE(out.find("no key 'nobody'"), std::string::npos) << out;
  EXPECT_EQ(RunCli("kv delete " + p.str() + " alice", &out), 0) << out;
  out.clear();
  EXPECT_EQ(RunCli("kv delete " + p.str() + " alice", &out), 4) << out;
  EXPECT_EQ(RunCli("kv get /dev/shm/wort-kvcli-no-such.pool k", &out), 4) << out;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/wort-kvcli-no-such.pool")) << "get created a pool";
  EXPECT_EQ(RunCli("kv get " + p.str() + " k --store other", &out), 4) << out;
  // Usage: 2.
  out.clear();
  EXPECT_EQ(RunCli("kv get " + p.str() + " " + Sh("bad\\zz"), &out), 2) << out;
  EXPECT_NE(out.find("column 4"), std::string::npos) << out;
  EXPECT_EQ(RunCli("kv put " + p.str() + " k v --kind fastfair", &out), 2) << out;  // it is a woart store
  EXPECT_EQ(RunCli("kv put " + p.str() + " " + std::string(wort::kMaxKeyLen + 1, 'k') + " v", &out), 2) << out;
  EXPECT_EQ(RunCli("kv put /dev/shm/wort-kvcli-no-such.pool k v --kind nosuch", &out), 2) << out;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/wort-kvcli-no-such.pool"));
  EXPECT_EQ(RunCli("kv frob " + p.str(), &out), 2) << out;
  // Runtime: 1 (a hash kind has no scan).
  TempPath h("kvcli-hash");
  ASSERT_EQ(RunCli("kv put " + h.str() + " k v --kind cceh --pool-size 64M", &out), 0) << out;
  out.clear();
  EXPECT_EQ(RunCli("kv scan " + h.str(), &out), 1) << out;
  EXPECT_NE(out.find("NotSupported"), std::string::npos) << out;
}

}  // namespace
