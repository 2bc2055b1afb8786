// The wort CLI as a user meets it: one size/count parser for every subcommand (bad values exit 2
// with a message naming the option, and create nothing), --version from wort/version.h, and
// the messages of pool create.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <vector>
#include <set>
#include <algorithm>
#include <filesystem>
#include <string>

#include <fstream>
#include <iterator>
#include <memory>

#include "cli/command.h"
#include "cli/options.h"
#include "common/test_util.h"
#include "wort/index.h"
#include "wort/kv.h"
#include "wort/pool.h"
#include "wort/version.h"

#include <nlohmann/json.hpp>

namespace {

using wort::cli::ParseCount;
using wort::cli::ParseSize;

int RunCli(const std::string& args, std::string* out) {
  return wort::test::RunShell(std::string(WORT_CLI_PATH) + " " + args, out);
}

// The top-level subcommands that one registration's function adds to a fresh app.
std::vector<std::string> AddedBy(wort::cli::AddFn fn) {
  CLI::App app;
  fn(app);
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
  std::sort(names.begin(), names.end());
  return names;
}

// issue 35: a command line that names a subcommand registers only it (AddFor), which is right
// only if every registration names exactly the subcommands its function adds.
TEST(CliCommands, EveryRegistrationNamesTheSubcommandsItAdds) {
  const auto& regs = wort::cli::Registrations();
  ASSERT_GE(regs.size(), 10u);
  std::set<std::string> seen;
  for (const auto& r : regs) {
    std::vector<std::string> declared(r.names.begin(), r.names.end());
    std::sort(declared.begin(), declared.end());
    EXPECT_FALSE(declared.empty());
    EXPECT_EQ(AddedBy(r.fn), declared);
    for (const auto& n : declared) EXPECT_TRUE(seen.insert(n).second) << n << " registered twice";
  }
  EXPECT_TRUE(seen.count("serve"));
}

TEST(CliCommands, ANamedSubcommandIsTheOnlyOneRegistered) {
  auto added = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    CLI::App app;
    wort::cli::AddFor(app, static_cast<int>(argv.size()), argv.data());
    std::set<std::string> names;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) names.insert(c->get_name());
    return names;
  };
  std::set<std::string> all;
  for (const auto& r : wort::cli::Registrations())
    for (auto n : r.names) all.insert(std::string(n));
  EXPECT_EQ(added({"wort", "serve", "--port", "0"}), std::set<std::string>{"serve"});
  EXPECT_EQ(added({"wort", "reproduce-keygen"}), (std::set<std::string>{"reproduce", "reproduce-keygen"}));
  EXPECT_EQ(added({"wort", "--help"}), all);
  EXPECT_EQ(added({"wort", "no-such-command"}), all);
  EXPECT_EQ(added({"wort"}), all);
  // And the binary: a bad option of `serve` is still a usage error, an unknown command still
  // lists every command.
  std::string out;
  EXPECT_EQ(RunCli("serve --no-such-option 2>&1", &out), 2) << out;
  EXPECT_EQ(RunCli("no-such-command 2>&1", &out), 2) << out;
  for (const auto& n : all) EXPECT_NE(out.find(n), std::string::npos) << n << " missing from: " << out;
}

TEST(CliOptions, SizesAcceptTheDocumentedForms) {
  const std::pair<const char*, uint64_t> ok[] = {
      {"0", 0},          {"4096", 4096},           {"64M", 64ull << 20},        {"64m", 64ull << 20},
      {"64MiB", 64ull << 20}, {"64MB", 64ull << 20}, {"1G", 1ull << 30},       {"2T", 2ull << 40},
      {" 8K ", 8192},    {"16 GiB", 16ull << 30},  {"7b", 7},                   {"15E", 15ull << 60},
      {"18446744073709551615", UINT64_MAX}};
  for (const auto& [text, want] : ok) {
    uint64_t v = 1;
    const wort::Status s = ParseSize(text, &v);
    EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
    EXPECT_EQ(v, want) << text;
  }
}

TEST(CliOptions, CountsArePowersOfTen) {
  const std::pair<const char*, uint64_t> ok[] = {
      {"1K", 1000}, {"250k", 250000}, {"16M", 16000000}, {"2G", 2000000000}, {"3T", 3000000000000ull}, {"17", 17}};
  for (const auto& [text, want] : ok) {
    uint64_t v = 1;
    EXPECT_TRUE(ParseCount(text, &v).ok()) << text;
    EXPECT_EQ(v, want) << text;
  }
  uint64_t v;
  EXPECT_FALSE(ParseCount("1KiB", &v).ok()) << "a count has no byte units";
}

TEST(CliOptions, BadValuesAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"abc", "not a number"},       {"-1", "negative"},
      {"99999999999999999999999", "64 bits"}, {"64Mxyz", "unknown suffix"},
      {"1.5M", "whole number"},      {"", "empty"},
      {"0x10", "bad suffix"},        {"20E", "64 bits"},
      {"18446744073709551616", "64 bits"}};
  for (const auto& [text, why] : bad) {
    uint64_t v = 0;
    const wort::Status s = ParseSize(text, &v);
    ASSERT_FALSE(s.ok()) << "'" << text << "' accepted as " << v;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
    EXPECT_FALSE(ParseCount(text, &v).ok()) << text;
  }
}

// Every size or count option of every subcommand goes through the same parser: the same bad
// values exit 2 with a message naming the option, and nothing is created.
TEST(CliOptions, EverySubcommandRefusesBadValuesWithExitCode2) {
  wort::test::TempPath pool("cli-bad");
  const std::string p = pool.str();
  const std::string cases[] = {
      "pool create " + p + " --pool-size",
      "pool create " + p + " --initial-size",
      "bench --index woart --pool " + p + " --keys",
      "bench --index woart --pool " + p + " --pool-size",
      "bench --index woart --pool " + p + " --scan-len",
      "bench --index woart --pool " + p + " --write-latency-ns",
      "bench alloc --pool " + p + " --ops",
      "hashbench --keys",
      "hashbench --capacity",
      "crashtest --index woart --dir /dev/shm --keys",
      "crashtest --index woart --dir /dev/shm --explore",
      "reproduce --out /dev/shm/wort-cli-test-never --keys",
  };
  for (const std::string& c : cases) {
    const std::string option = c.substr(c.rfind(' ') + 1);
    for (const char* v : {"abc", "-1", "99999999999999999999999", "64Mxyz"}) {
      std::string out;
      EXPECT_EQ(RunCli(c + " " + v, &out), 2) << c << " " << v << "\n" << out;
      EXPECT_NE(out.find(option), std::string::npos) << c << " " << v << ": message names the option\n" << out;
      EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
      EXPECT_FALSE(std::filesystem::exists(p)) << c << " " << v << " created the pool";
    }
  }
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/wort-cli-test-never"));
}

TEST(CliOptions, CountSuffixesWorkEverywhere) {
  std::string out;
  // crashtest --keys 1K was refused while bench --keys 1K was accepted.
  EXPECT_EQ(RunCli("crashtest --index woart --dir /dev/shm --keys 1K --explore 1", &out), 0) << out;
  EXPECT_NE(out.find("keys=1000 "), std::string::npos) << out;
}

TEST(CliOptions, UnknownOptionIsAUsageError) {
  std::string out;
  EXPECT_EQ(RunCli("pool create /dev/shm/x --no-such-option", &out), 2) << out;
  out.clear();
  EXPECT_EQ(RunCli("no-such-command", &out), 2) << out;
  EXPECT_NE(out.find("wort: unknown command 'no-such-command' (commands: "), std::string::npos) << out;
  EXPECT_NE(out.find("kv"), std::string::npos) << "the message lists the commands\n" << out;
  out.clear();
  EXPECT_EQ(RunCli("pool frobnicate /dev/shm/x", &out), 2) << out;
  EXPECT_NE(out.find("wort pool: unknown command 'frobnicate' (commands: create, info, check"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunCli("kv --bogus", &out), 2) << out;
}

// doc/cli.md's table: the same status for the same kind of error, whichever subcommand meets it.
TEST(CliExitStatus, SameKindOfErrorSameStatus) {
  wort::test::TempPath garbage("exit-garbage"), pool("exit-pool"), missing("exit-missing");
  {
    std::ofstream f(garbage.str(), std::ios::binary);
    const std::string junk(4 << 20, '\xab');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  struct Case {
    std::string args;
    int status;
  };
  const Case cases[] = {
      // 3: corruption - not a pool
      {"pool info " + garbage.str(), 3},
      {"pool check " + garbage.str(), 3},
      {"kv get " + garbage.str() + " k", 3},
      {"kv stats " + garbage.str(), 3},
      // 4: not found - the pool file, the store, the key
      {"pool info " + missing.str(), 4},
      {"pool check " + missing.str(), 4},
      {"kv stats " + missing.str(), 4},
      {"kv dump " + missing.str(), 4},
      // 2: usage
      {"kv put " + missing.str() + " k v --kind vart", 2},
      {"crashtest --index no-such-kind --dir /dev/shm", 2},
      {"crashtest --index woart --dist no-such-dist --dir /dev/shm", 2},
      // 1: a runtime error (a pool that exists already)
      {"pool create " + garbage.str(), 1},
  };
  for (const Case& c : cases) {
    std::string out;
    EXPECT_EQ(RunCli(c.args, &out), c.status) << c.args << "\n" << out;
    EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
  }
  EXPECT_FALSE(std::filesystem::exists(missing.str())) << "a failed command created the pool";
  // 5: busy - the pool is open for writing in this process, the command runs in another.
  wort::KvConfig cfg;
  cfg.path = pool.str();
  cfg.size = 64 << 20;
  std::unique_ptr<wort::KvStore> db;
  ASSERT_TRUE(wort::KvStore::Open(cfg, &db).ok());
  ASSERT_TRUE(db->Put("k", "v").ok());
  for (const std::string& args : {"kv put " + pool.str() + " k2 v", "kv delete " + pool.str() + " k", "pool info --write " + pool.str()}) {
    std::string out;
    EXPECT_EQ(RunCli(args, &out), 5) << args << "\n" << out;
    EXPECT_NE(out.find("Busy"), std::string::npos) << out;
  }
  {
    // kv get/scan/stats open read-only: they read beside the writer (doc/cli.md).
    std::string out;
    EXPECT_EQ(RunCli("kv get " + pool.str() + " k", &out), 0) << out;
    EXPECT_EQ(out, "v\n");
  }
  ASSERT_TRUE(db->Close().ok());
  std::string out;
  EXPECT_EQ(RunCli("kv get " + pool.str() + " k", &out), 0) << out;
}

// The crash explorer shows progress on a terminal (a line on stderr, redrawn) and only its final
// line otherwise.
TEST(CliProgress, CrashtestShowsProgressOnATerminalOnly) {
  const std::string args = " crashtest --index woart --dir /dev/shm --keys 200 --explore 20";
  std::string out;
  ASSERT_EQ(RunCli(args.substr(1), &out), 0) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "progress written although the output is not a terminal\n" << out;
  EXPECT_NE(out.find("woart: operations 20, crash points"), std::string::npos) << out;
  // script(1) runs the command on a pseudo-terminal.
  out.clear();
  ASSERT_EQ(wort::test::RunShell("script -qec '" + std::string(WORT_CLI_PATH) + args + "' /dev/null", &out), 0) << out;
  EXPECT_NE(out.find("\r\033[Kwoart: operation 0 of 20 (0%), 0 images, 0 violations"), std::string::npos) << out;
  EXPECT_NE(out.find("woart: operations 20, crash points"), std::string::npos) << out;
}

// A wort binary copied out of its build tree finds no scripts/peers.sh: asked for P-ART
// (--peers-src), reproduce refuses before it runs anything, rather than letting woart stand in.
TEST(Cli, ReproduceWithPeersSrcNeedsThePeersScript) {
  wort::test::TempPath copy("cli-copied-wort"), out_dir("cli-reproduce-out");
  std::filesystem::copy_file(WORT_CLI_PATH, copy.str(), std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(copy.str(), std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);
  const std::string args = " reproduce --scale tiny --only roart-peer --index roart --no-report --peers-src /nonexistent --out " +
                           out_dir.str();
  std::string out;
  EXPECT_EQ(wort::test::RunShell("env -u WORT_PEERS_SCRIPT " + copy.str() + args, &out), 4) << out;
  EXPECT_NE(out.find("scripts/peers.sh was not found"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(out_dir.str() + "/results.jsonl")) << "it ran experiments first";
  // The same binary with the script named runs (the peer build then fails on the missing sources,
  // which reproduce reports in its notes) - so the refusal above is about the script, not the copy.
  out.clear();
  const std::string here = __FILE__;  // <source>/tests/cli/cli_test.cc
  const std::string script = here.substr(0, here.rfind("/tests/cli/")) + "/scripts/peers.sh";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;
  EXPECT_EQ(wort::test::RunShell("env WORT_PEERS_SCRIPT=" + script + " " + copy.str() +
                                     " reproduce --scale tiny --only fig7 --index roart --no-report --no-cachegrind "
                                     "--peers-src /nonexistent --out " + out_dir.str(),
                                 &out),
            0)
      << out;
  std::filesystem::remove_all(out_dir.str());  // TempPath removes a file, not a directory
}

TEST(Cli, VersionFromOnePlace) {
  std::string out;
  ASSERT_EQ(RunCli("--version", &out), 0) << out;
  EXPECT_EQ(out, std::string("wort ") + wort::Version() + "\n");
  EXPECT_EQ(std::string(wort::Version()),
            std::to_string(WORT_VERSION_MAJOR) + "." + std::to_string(WORT_VERSION_MINOR) + "." +
                std::to_string(WORT_VERSION_PATCH));
}

TEST(Cli, PoolCreateNamesAMissingDirectory) {
  std::string out;
  EXPECT_NE(RunCli("pool create /dev/shm/wort-no-such-dir-h13/sub/x.pool --pool-size 64M", &out), 0);
  EXPECT_NE(out.find("directory /dev/shm/wort-no-such-dir-h13/sub does not exist"), std::string::npos) << out;
}

TEST(Cli, PoolCreateSizes) {
  wort::test::TempPath pool("cli-create");
  std::string out;
  ASSERT_EQ(RunCli("pool create " + pool.str() + " --initial-size 2M --pool-size 64MiB", &out), 0) << out;
  EXPECT_NE(out.find("may grow to"), std::string::npos) << out;
}

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

wort::PoolOptions Small() {
  wort::PoolOptions o;
  o.initial_size = 2 << 20;
  o.max_size = 64 << 20;
  return o;
}

uint64_t GenerationOf(const std::string& path) {
  wort::PoolOptions o;
  o.read_only = true;
  std::unique_ptr<wort::Pool> p;
  EXPECT_TRUE(wort::Pool::Open(path, o, &p).ok());
  return p ? p->generation() : 0;
}

// A pool with one index; `crash_image`: also a copy taken while it is open (no clean close).
void MakePool(const std::string& path, const std::string& crash_image) {
  std::unique_ptr<wort::Pool> p;
  ASSERT_TRUE(wort::Pool::Create(path, Small(), &p).ok());
  std::unique_ptr<wort::Index> idx;
  ASSERT_TRUE(wort::CreateIndex(*p, "t", "woart", {}, &idx).ok());
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(idx->Insert(std::to_string(i) + "key", i).ok());
  if (!crash_image.empty())
    std::filesystem::copy_file(path, crash_image, std::filesystem::copy_options::overwrite_existing);
  idx.reset();
  ASSERT_TRUE(p->Close().ok());
}

TEST(PoolCheck, ReadOnlyByDefaultRepairWrites) {
  wort::test::TempPath pool("check-clean");
  MakePool(pool, "");
  const std::string bytes = ReadAll(pool);
  const uint64_t gen = GenerationOf(pool);
  std::string out;
  ASSERT_EQ(RunCli("pool check " + pool.str(), &out), 0) << out;
  EXPECT_NE(out.find("check passed"), std::string::npos) << out;
  EXPECT_TRUE(ReadAll(pool) == bytes) << "pool check wrote to the pool";
  EXPECT_EQ(GenerationOf(pool), gen);
  out.clear();
  ASSERT_EQ(RunCli("pool check --repair " + pool.str(), &out), 0) << out;
  EXPECT_EQ(GenerationOf(pool), gen + 1) << "--repair opens for writing";
}

TEST(PoolCheck, CrashedPoolGetsTheTrueVerdictWithoutBeingChanged) {
  wort::test::TempPath pool("check-live"), image("check-crashed");
  MakePool(pool, image);
  const std::string bytes = ReadAll(image);
  std::string out;
  ASSERT_EQ(RunCli("pool check " + image.str(), &out), 0) << out;
  EXPECT_NE(out.find("not closed cleanly"), std::string::npos) << out;
  EXPECT_NE(out.find("private copy"), std::string::npos) << out;
  EXPECT_NE(out.find("300 keys"), std::string::npos) << out;
  EXPECT_NE(out.find("0 leaked"), std::string::npos) << out;
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  EXPECT_TRUE(ReadAll(image) == bytes) << "a read-only check of a crashed pool wrote to it";
  out.clear();
  ASSERT_EQ(RunCli("pool check --repair " + image.str(), &out), 0) << out;
  EXPECT_FALSE(ReadAll(image) == bytes);
  out.clear();
  ASSERT_EQ(RunCli("pool info " + image.str(), &out), 0) << out;
  EXPECT_NE(out.find("last shutdown:  clean"), std::string::npos) << out;
}

TEST(PoolInfo, SaysHowDurableThePoolIs) {
  wort::test::TempPath pool("info-dur");
  MakePool(pool, "");
  std::string out;
  ASSERT_EQ(RunCli("pool info " + pool.str(), &out), 0) << out;
  EXPECT_NE(out.find("durability:     tmpfs"), std::string::npos) << out;
  EXPECT_NE(out.find("lost at reboot"), std::string::npos) << out;
}

std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> v;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

TEST(BenchCli, JsonSaysVersionAndDurabilityAndTheSummarySaysWhatRowsMean) {
  wort::test::TempPath json("bench-json");
  std::string out;
  ASSERT_EQ(RunCli("bench --index woart --keys 2000 --ops insert,restart --json " + json.str(), &out), 0) << out;
  EXPECT_EQ(out.find("<index>"), std::string::npos) << "a placeholder instead of the pool's path\n" << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "progress written although the output is not a terminal";
  EXPECT_NE(out.find("s to the first lookup"), std::string::npos) << out;
  EXPECT_NE(out.find("pool durability: tmpfs"), std::string::npos) << out;
  const auto recs = ReadJsonLines(json);
  ASSERT_FALSE(recs.empty());
  for (const auto& r : recs) {
    EXPECT_EQ(r.value("wort_version", ""), wort::Version());
    EXPECT_EQ(r.value("durability", ""), "tmpfs");
    EXPECT_EQ(r.value("pool_sync", true), false);
  }
}

TEST(BenchCli, SyncModeOnAFileIsMeasured) {
  const std::string pool = "/var/tmp/wort-cli-sync-" + std::to_string(::getpid()) + ".pool";
  wort::test::TempPath json("bench-sync-json");
  std::filesystem::remove(pool);
  std::string out;
  ASSERT_EQ(RunCli("bench --index woart --keys 100 --ops insert --pool " + pool + " --pool-sync --json " + json.str(),
                   &out),
            0)
      << out;
  std::filesystem::remove(pool);
  const auto recs = ReadJsonLines(json);
  ASSERT_EQ(recs.size(), 1u);
  const std::string d = recs[0].value("durability", "");
  if (d == "tmpfs" || d == "power-fail") GTEST_SKIP() << "/var/tmp is " << d;
  EXPECT_EQ(d, "file-sync");
  EXPECT_GE(recs[0].value("msyncs_per_op", 0.0), 1.0) << out;
}

}  // namespace

// `pool check` verifies every value of a key-value store (its checksum) and knows the store's
// batch log root; one flipped bit of a value's bytes fails the check, naming the block.
TEST(PoolCheck, VerifiesEveryValueOfAStore) {
  for (const char* kind : {"woart", "cceh"}) {
    wort::test::TempPath pool("check-kv");
    const std::string value(200, '\xab');
    {
      wort::KvConfig c;
      c.path = pool;
      c.kind = kind;
      c.size = 8ull << 20;
      std::unique_ptr<wort::KvStore> db;
      ASSERT_TRUE(wort::KvStore::Open(c, &db).ok());
      wort::KvBatch b;
      for (int i = 0; i < 20; ++i) b.Put(std::string(1, static_cast<char>(0x80 + i)), i == 7 ? value : "v");
      ASSERT_TRUE(db->Write(b).ok());
      ASSERT_TRUE(db->Close().ok());
    }
    std::string out;
    ASSERT_EQ(RunCli("pool check " + pool.str(), &out), 0) << out;
    EXPECT_NE(out.find("20 value blocks checked: ok"), std::string::npos) << out;
    EXPECT_NE(out.find("batch log of a key-value store): ok"), std::string::npos) << out;
    EXPECT_NE(out.find("0 leaked"), std::string::npos) << out;
    std::string img = ReadAll(pool);
    const size_t at = img.find(value);
    ASSERT_NE(at, std::string::npos);
    img[at + 100] ^= 4;
    { std::ofstream(pool.str(), std::ios::binary | std::ios::trunc) << img; }
    out.clear();
    EXPECT_EQ(RunCli("pool check " + pool.str(), &out), 3) << out;
    EXPECT_NE(out.find("fails its checksum"), std::string::npos) << kind << ": " << out;
    EXPECT_NE(out.find("check FAILED"), std::string::npos) << out;
  }
}
