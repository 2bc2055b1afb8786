// The memcached text-protocol parser (src/server/protocol.h): every command, noreply, malformed
// input, oversized values, input arriving in pieces. Expected replies were checked against
// memcached 1.6.18.
#include "server/protocol.h"

#include <gtest/gtest.h>

#include "fuzz_util.h"

#include <memory>
#include <random>
#include <string>

namespace wort::server {
namespace {

// The result of parsing a copy of the input (kept alive here, since the views point into it).
struct Parsed {
  std::shared_ptr<std::string> input;
  Outcome outcome;
  size_t consumed;
  std::string error;
  bool noreply;
  Request req;
};

Parsed ParseOne(std::string_view in, const Limits& limits = Limits()) {
  auto copy = std::make_shared<std::string>(in);
  Parser p(limits);
  Request r;
  ParseResult pr = p.Parse(*copy, &r);
  return {copy, pr.outcome, pr.consumed, std::string(pr.error), pr.noreply, r};
}

TEST(Protocol, GetAndGets) {
  auto p = ParseOne("get a\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kGet);
  EXPECT_EQ(p.consumed, 7u);
  ASSERT_EQ(p.req.keys.size(), 1u);
  EXPECT_EQ(p.req.keys[0], "a");

  p = ParseOne("gets k1 k2  k3\r\nrest");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kGets);
  EXPECT_EQ(p.consumed, 16u);
  ASSERT_EQ(p.req.keys.size(), 3u);
  EXPECT_EQ(p.req.keys[2], "k3");

  // A bare "\n" ends a line too.
  p = ParseOne("get a\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.consumed, 6u);

  EXPECT_EQ(ParseOne("get\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("get \r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("GET a\r\n").error, "ERROR");  // case-sensitive
}

TEST(Protocol, GatAndGats) {
  auto p = ParseOne("gat 100 a b\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kGat);
  EXPECT_EQ(p.req.exptime, 100);
  EXPECT_EQ(p.req.keys.size(), 2u);
  p = ParseOne("gats -1 a\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kGats);
  EXPECT_EQ(p.req.exptime, -1);
  EXPECT_EQ(ParseOne("gat 10\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("gat x a\r\n").error, "CLIENT_ERROR invalid exptime argument");
}

TEST(Protocol, Keys) {
  const std::string k250(250, 'k'), k251(251, 'k');
  EXPECT_EQ(ParseOne("get " + k250 + "\r\n").outcome, Outcome::kRequest);
  EXPECT_EQ(ParseOne("get " + k251 + "\r\n").error, "CLIENT_ERROR bad command line format");
  // As memcached 1.6.18: every byte but space, "\n" and 0x00 is a key byte - control bytes
  // (0x10 as memaslap sends), tab, "\r" inside the line, DEL; bytes >= 0x80.
  for (int c = 1; c < 256; ++c) {
    if (c == ' ' || c == '\n') continue;
    const std::string key = std::string("a") + static_cast<char>(c) + "b";
    auto q = ParseOne("get " + key + "\r\n");
    ASSERT_EQ(q.outcome, Outcome::kRequest) << c;
    ASSERT_EQ(q.req.keys.size(), 1u);
    EXPECT_EQ(q.req.keys[0], key) << c;
    EXPECT_EQ(ParseOne("set " + key + " 0 0 1\r\nv\r\n").outcome, Outcome::kRequest) << c;
  }
  // A 0x00 ends the line, as in memcached (which reads it as a C string).
  auto z = ParseOne(std::string("get a\0b c\r\n", 11));
  ASSERT_EQ(z.outcome, Outcome::kRequest);
  ASSERT_EQ(z.req.keys.size(), 1u);
  EXPECT_EQ(z.req.keys[0], "a");
  EXPECT_EQ(z.consumed, 11u);
  EXPECT_EQ(ParseOne(std::string("set a\0b 0 0 1\r\n", 16)).error, "ERROR");
  EXPECT_EQ(ParseOne(std::string("get \0\r\n", 7)).error, "ERROR");
  // Only the last "\r" of a line is its terminator.
  z = ParseOne("get a\r\r\n");
  ASSERT_EQ(z.outcome, Outcome::kRequest);
  EXPECT_EQ(z.req.keys[0], "a\r");
  auto p = ParseOne("get \xc3\xa9t\xc3\xa9 \xff\x80\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.keys[0], "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(p.req.keys[1], "\xff\x80");
  // Prefixes of each other are distinct keys.
  p = ParseOne("get a ab abc\r\n");
  ASSERT_EQ(p.req.keys.size(), 3u);
  EXPECT_TRUE(ValidKey("a"));
  EXPECT_FALSE(ValidKey(""));
  EXPECT_FALSE(ValidKey("a b"));
  EXPECT_FALSE(ValidKey(std::string_view("a\0b", 3)));
  EXPECT_FALSE(ValidKey("a\nb"));
  EXPECT_TRUE(ValidKey("a\x10\t\x7f\r"));
}

TEST(Protocol, StorageCommands) {
  const std::pair<const char*, Command> cmds[] = {{"set", Command::kSet},         {"add", Command::kAdd},
                                                  {"replace", Command::kReplace}, {"append", Command::kAppend},
                                                  {"prepend", Command::kPrepend}};
  for (auto [name, cmd] : cmds) {
    const std::string in = std::string(name) + " key 42 100 5\r\nhello\r\nget key\r\n";
    auto p = ParseOne(in);
    ASSERT_EQ(p.outcome, Outcome::kRequest) << name;
    EXPECT_EQ(p.req.cmd, cmd);
    EXPECT_TRUE(p.req.is_storage());
    EXPECT_EQ(p.req.keys[0], "key");
    EXPECT_EQ(p.req.flags, 42u);
    EXPECT_EQ(p.req.exptime, 100);
    EXPECT_EQ(p.req.bytes, 5u);
    EXPECT_EQ(p.req.data, "hello");
    EXPECT_FALSE(p.req.noreply);
    EXPECT_EQ(p.consumed, in.size() - std::string("get key\r\n").size());
  }
  auto p = ParseOne("cas key 1 0 3 18446744073709551615 noreply\r\nabc\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kCas);
  EXPECT_EQ(p.req.cas_unique, 18446744073709551615ull);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(p.req.data, "abc");

  // Binary data, including "\r\n" inside the value and 0x00 / 0xff bytes.
  const std::string bin("a\r\nb\0\xff", 6);
  p = ParseOne("set k 0 0 6\r\n" + bin + "\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.data, bin);
  // Empty value.
  p = ParseOne("set k 0 0 0\r\n\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.data, "");
  // Max flags, negative and absolute exptimes.
  p = ParseOne("set k 4294967295 -1 1\r\nx\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.flags, 4294967295u);
  EXPECT_EQ(p.req.exptime, -1);
  // memcached ignores an unknown last token where noreply would be.
  p = ParseOne("set k 0 0 1 norepl\r\nx\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_FALSE(p.req.noreply);
}

TEST(Protocol, StorageErrors) {
  EXPECT_EQ(ParseOne("set k 0 0\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("set k 0 0 1 noreply extra\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("cas k 0 0 1\r\nx\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("set k 0 0 -1\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("set k abc 0 1\r\nx\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("set k 4294967296 0 1\r\nx\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("set k 0 zz 1\r\nx\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("cas k 0 0 1 -5\r\nx\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("set " + std::string(251, 'k') + " 0 0 1\r\nx\r\n").error,
            "CLIENT_ERROR bad command line format");
  // Bad data chunk: the value is not followed by "\r\n". The request's bytes are consumed.
  auto p = ParseOne("set k 0 0 2\r\nxyz\r\n");
  EXPECT_EQ(p.outcome, Outcome::kError);
  EXPECT_EQ(p.error, "CLIENT_ERROR bad data chunk");
  EXPECT_EQ(p.consumed, 13u + 4u);
  EXPECT_FALSE(p.noreply);
  p = ParseOne("set k 0 0 2 noreply\r\nxyz\r\n");
  EXPECT_EQ(p.error, "CLIENT_ERROR bad data chunk");
  EXPECT_TRUE(p.noreply);  // suppressed, as memcached does
}

TEST(Protocol, MalformedLineWithValidLengthSwallowsTheData) {
  Parser p;
  Request r;
  const std::string in = "set " + std::string(300, 'k') + " 0 0 5\r\nhello\r\nget a\r\n";
  ParseResult pr = p.Parse(in, &r);
  ASSERT_EQ(pr.outcome, Outcome::kError);
  EXPECT_EQ(pr.error, "CLIENT_ERROR bad command line format");
  std::string_view rest = std::string_view(in).substr(pr.consumed);
  pr = p.Parse(rest, &r);
  ASSERT_EQ(pr.outcome, Outcome::kSkipped);
  EXPECT_EQ(pr.consumed, 7u);
  rest = rest.substr(pr.consumed);
  pr = p.Parse(rest, &r);
  ASSERT_EQ(pr.outcome, Outcome::kRequest);
  EXPECT_EQ(r.cmd, Command::kGet);
}

TEST(Protocol, TooLargeValueIsSwallowedInPieces) {
  Limits lim;
  lim.max_item_size = 1000;
  Parser p(lim);
  Request r;
  const std::string line = "set big 7 0 5000\r\n";
  ParseResult pr = p.Parse(line, &r);
  ASSERT_EQ(pr.outcome, Outcome::kRequest);
  EXPECT_TRUE(r.too_large);
  EXPECT_EQ(r.keys[0], "big");
  EXPECT_EQ(pr.consumed, line.size());
  EXPECT_EQ(p.swallowing(), 5002u);
  // The data arrives in pieces; each is dropped without being buffered.
  std::string chunk(1500, 'x');
  uint64_t dropped = 0;
  for (int i = 0; i < 3; ++i) {
    pr = p.Parse(chunk, &r);
    ASSERT_EQ(pr.outcome, Outcome::kSkipped);
    dropped += pr.consumed;
  }
  const std::string tail = std::string(500, 'x') + "\r\nget big\r\n";
  pr = p.Parse(tail, &r);
  ASSERT_EQ(pr.outcome, Outcome::kSkipped);
  dropped += pr.consumed;
  EXPECT_EQ(dropped, 5002u);
  EXPECT_EQ(p.swallowing(), 0u);
  pr = p.Parse(std::string_view(tail).substr(502), &r);
  ASSERT_EQ(pr.outcome, Outcome::kRequest);
  EXPECT_EQ(r.cmd, Command::kGet);
  // Exactly the limit is fine.
  pr = p.Parse("set k 0 0 1000\r\n" + std::string(1000, 'v') + "\r\n", &r);
  ASSERT_EQ(pr.outcome, Outcome::kRequest);
  EXPECT_FALSE(r.too_large);
}

TEST(Protocol, PartialInputInEveryPiece) {
  const std::string in =
      "set alpha 1 0 10\r\n0123456789\r\nget alpha beta\r\ndelete alpha noreply\r\nincr n 5\r\n"
      "cas x 0 0 2 77\r\nab\r\ntouch t 10\r\nflush_all 5\r\nversion\r\nrange a z 10 values\r\n";
  const Command want[] = {Command::kSet, Command::kGet, Command::kDelete, Command::kIncr,
                          Command::kCas, Command::kTouch, Command::kFlushAll, Command::kVersion, Command::kRange};
  // Feed the stream cut at every position into two pieces, then byte by byte.
  for (size_t cut = 0; cut <= in.size(); ++cut) {
    Parser p;
    Request r;
    std::string buf;
    std::vector<Command> got;
    auto drain = [&] {
      for (;;) {
        ParseResult pr = p.Parse(buf, &r);
        if (pr.outcome == Outcome::kNeedMore) {
          if (pr.need) {
            EXPECT_GT(pr.need, buf.size());
          }
          return;
        }
        ASSERT_EQ(pr.outcome, Outcome::kRequest) << "cut " << cut;
        got.push_back(r.cmd);
        if (r.cmd == Command::kSet) {
          EXPECT_EQ(r.data, "0123456789");
        }
        buf.erase(0, pr.consumed);
      }
    };
    buf.append(in.substr(0, cut));
    drain();
    buf.append(in.substr(cut));
    drain();
    ASSERT_EQ(got.size(), std::size(want)) << "cut " << cut;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]);
  }
}

TEST(Protocol, DeleteIncrDecrTouch) {
  auto p = ParseOne("delete k\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kDelete);
  EXPECT_FALSE(p.req.noreply);
  p = ParseOne("delete k 0 noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(ParseOne("delete k 5\r\n").error, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
  EXPECT_EQ(ParseOne("delete\r\n").error, "ERROR");

  p = ParseOne("incr k 18446744073709551615\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kIncr);
  EXPECT_EQ(p.req.delta, 18446744073709551615ull);
  p = ParseOne("decr k 3 noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kDecr);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(ParseOne("incr k abc\r\n").error, "CLIENT_ERROR invalid numeric delta argument");
  EXPECT_EQ(ParseOne("incr k -1\r\n").error, "CLIENT_ERROR invalid numeric delta argument");
  EXPECT_EQ(ParseOne("incr k 18446744073709551616\r\n").error, "CLIENT_ERROR invalid numeric delta argument");
  EXPECT_EQ(ParseOne("incr k\r\n").error, "ERROR");

  p = ParseOne("touch k 10 noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kTouch);
  EXPECT_EQ(p.req.exptime, 10);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(ParseOne("touch k\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("touch k soon\r\n").error, "CLIENT_ERROR invalid exptime argument");
}

TEST(Protocol, AdminCommands) {
  auto p = ParseOne("flush_all\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kFlushAll);
  EXPECT_EQ(p.req.delay, 0);
  p = ParseOne("flush_all 30 noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.delay, 30);
  EXPECT_TRUE(p.req.noreply);
  p = ParseOne("flush_all noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(ParseOne("flush_all abc\r\n").error, "CLIENT_ERROR invalid exptime argument");

  EXPECT_EQ(ParseOne("version\r\n").req.cmd, Command::kVersion);
  EXPECT_EQ(ParseOne("version foo bar\r\n").req.cmd, Command::kVersion);  // as memcached
  p = ParseOne("verbosity 1 noreply\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.verbosity, 1u);
  EXPECT_TRUE(p.req.noreply);
  EXPECT_EQ(ParseOne("verbosity\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("verbosity abc\r\n").error, "CLIENT_ERROR bad command line format");
  p = ParseOne("stats\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.arg, "");
  EXPECT_EQ(ParseOne("stats settings\r\n").req.arg, "settings");
  EXPECT_EQ(ParseOne("quit\r\n").req.cmd, Command::kQuit);
  EXPECT_EQ(ParseOne("bogus\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("\r\n").error, "ERROR");
  // Meta commands are parsed (tests/server/meta_test.cc); other two-letter m-commands are not.
  EXPECT_EQ(ParseOne("mg foo v\r\n").req.cmd, Command::kMetaGet);
  EXPECT_EQ(ParseOne("mz foo v\r\n").error, "ERROR");
}

TEST(Protocol, Range) {
  auto p = ParseOne("range a z 10\r\n");
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req.cmd, Command::kRange);
  EXPECT_EQ(p.req.keys[0], "a");
  EXPECT_EQ(p.req.keys[1], "z");
  EXPECT_EQ(p.req.limit, 10u);
  EXPECT_FALSE(p.req.with_values);
  EXPECT_TRUE(ParseOne("range a z 10 values\r\n").req.with_values);
  EXPECT_EQ(ParseOne("range a z 0\r\n").outcome, Outcome::kError);
  EXPECT_EQ(ParseOne("range a z 10 junk\r\n").outcome, Outcome::kError);
  EXPECT_EQ(ParseOne("range a\r\n").outcome, Outcome::kError);
  EXPECT_EQ(ParseOne("range a " + std::string(251, 'z') + " 1\r\n").error, "CLIENT_ERROR bad command line format");
}

TEST(Protocol, LineTooLongClosesTheConnection) {
  Limits lim;
  // A non-retrieval line without "\n" past max_line.
  auto p = ParseOne(std::string(lim.max_line, 'a'), lim);
  EXPECT_EQ(p.outcome, Outcome::kClose);
  EXPECT_EQ(p.error, "CLIENT_ERROR line too long");
  // Shorter: wait for more.
  EXPECT_EQ(ParseOne(std::string(lim.max_line - 1, 'a'), lim).outcome, Outcome::kNeedMore);
  // A get line may be longer (many keys).
  std::string get = "get";
  while (get.size() < 10000) get += " key" + std::to_string(get.size());
  EXPECT_EQ(ParseOne(get, lim).outcome, Outcome::kNeedMore);
  p = ParseOne(get + "\r\n", lim);
  ASSERT_EQ(p.outcome, Outcome::kRequest);
  EXPECT_GT(p.req.keys.size(), 1000u);
  EXPECT_EQ(ParseOne("get " + std::string(lim.max_retrieval_line, 'k'), lim).outcome, Outcome::kClose);
}

TEST(Protocol, Numbers) {
  uint64_t u = 0;
  int64_t i = 0;
  EXPECT_TRUE(ParseU64("0", &u));
  EXPECT_TRUE(ParseU64("18446744073709551615", &u));
  EXPECT_EQ(u, 18446744073709551615ull);
  EXPECT_FALSE(ParseU64("18446744073709551616", &u));
  EXPECT_FALSE(ParseU64("", &u));
  EXPECT_FALSE(ParseU64("+1", &u));
  EXPECT_FALSE(ParseU64("1 ", &u));
  EXPECT_TRUE(ParseI64("-9223372036854775808", &i));
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_FALSE(ParseI64("9223372036854775808", &i));
  EXPECT_FALSE(ParseI64("-", &i));
  // exptime rules
  EXPECT_EQ(ToAbsoluteExptime(0, 1000), 0);
  EXPECT_EQ(ToAbsoluteExptime(-5, 1000), -1);
  EXPECT_EQ(ToAbsoluteExptime(10, 1000), 1010);
  EXPECT_EQ(ToAbsoluteExptime(kMaxRelativeExptime, 1000), 1000 + kMaxRelativeExptime);
  EXPECT_EQ(ToAbsoluteExptime(kMaxRelativeExptime + 1, 1000), kMaxRelativeExptime + 1);
}

// memcached 1.6.18's conventions for requests that are not data commands (replies compared
// side by side).
TEST(Protocol, HttpSlabsLruCrawlerCachedump) {
  // An HTTP request line closes the connection without a reply; a get whose key looks like a
  // path is still a get, and an unknown command without "HTTP/" is still ERROR.
  for (const char* line : {"GET / HTTP/1.1\r\n", "POST /x HTTP/1.0\r\n", "HEAD / HTTP/2\r\n"}) {
    auto p = ParseOne(line);
    EXPECT_EQ(p.outcome, Outcome::kClose) << line;
    EXPECT_EQ(p.error, "") << line;
  }
  EXPECT_EQ(ParseOne("get / HTTP/1.1\r\n").outcome, Outcome::kRequest);
  EXPECT_EQ(ParseOne("GET /foo\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("HTTP/1.1\r\n").error, "ERROR");
  // slabs automove <0|1|2>; reassign parsed (the handler refuses it).
  for (const char* line : {"slabs automove 0\r\n", "slabs automove 2\r\n"}) {
    EXPECT_EQ(ParseOne(line).req.cmd, Command::kSlabsAutomove) << line;
  }
  EXPECT_TRUE(ParseOne("slabs automove 1 noreply\r\n").req.noreply);
  EXPECT_EQ(ParseOne("slabs automove 3\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("slabs automove x\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("slabs automove\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("slabs\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("slabs reassign 1 2\r\n").req.cmd, Command::kSlabsReassign);
  EXPECT_EQ(ParseOne("slabs reassign x 2\r\n").error, "CLIENT_ERROR bad command line format");
  // lru_crawler metadump <all|hash|ids>
  EXPECT_EQ(ParseOne("lru_crawler metadump all\r\n").req.class_id, 1u);
  EXPECT_EQ(ParseOne("lru_crawler metadump hash\r\n").req.class_id, 1u);
  EXPECT_EQ(ParseOne("lru_crawler metadump 2,1\r\n").req.class_id, 1u);
  auto m = ParseOne("lru_crawler metadump 2\r\n");
  EXPECT_EQ(m.req.cmd, Command::kLruMetadump);
  EXPECT_EQ(m.req.class_id, 0u);
  for (const char* bad : {"lru_crawler metadump foo\r\n", "lru_crawler metadump 64\r\n", "lru_crawler metadump 1,\r\n"})
    EXPECT_EQ(ParseOne(bad).error, "BADCLASS invalid class id") << bad;
  EXPECT_EQ(ParseOne("lru_crawler metadump\r\n").error, "ERROR");
  EXPECT_EQ(ParseOne("lru_crawler metadump all extra\r\n").error, "ERROR");
  // stats cachedump <class> <limit>
  auto c = ParseOne("stats cachedump 1 10\r\n");
  ASSERT_EQ(c.outcome, Outcome::kRequest);
  EXPECT_EQ(c.req.arg, "cachedump");
  EXPECT_EQ(c.req.class_id, 1u);
  EXPECT_EQ(c.req.limit, 10u);
  EXPECT_EQ(ParseOne("stats cachedump 64 0\r\n").error, "CLIENT_ERROR Illegal slab id");
  EXPECT_EQ(ParseOne("stats cachedump\r\n").error, "CLIENT_ERROR bad command line");
  EXPECT_EQ(ParseOne("stats cachedump x 1\r\n").error, "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne("stats cachedump 1 -1\r\n").error, "CLIENT_ERROR bad command line format");
}

// Random bytes never crash the parser, and every result consumes within the input.
TEST(Protocol, RandomInputFuzz) {
  std::mt19937_64 rng(7);
  const char* seeds[] = {"get a\r\n", "set k 0 0 3\r\nabc\r\n", "cas k 0 0 1 5\r\nx\r\n", "incr k 1\r\n",
                         "range a b 3 values\r\n", "flush_all 1 noreply\r\n"};
  Limits lim;
  lim.max_item_size = 64;
  lim.max_line = 128;
  lim.max_retrieval_line = 256;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string in = seeds[rng() % std::size(seeds)];
    fuzz::MutateRequest(rng, " \r\n0123456789-", &in);
    Parser p(lim);
    Request r;
    std::string_view rest = in;
    for (int steps = 0; steps < 100 && !rest.empty(); ++steps) {
      ParseResult pr = p.Parse(rest, &r);
      ASSERT_LE(pr.consumed, rest.size());
      if (pr.outcome == Outcome::kNeedMore || pr.outcome == Outcome::kClose) break;
      if (pr.outcome == Outcome::kRequest) {
        for (std::string_view k : r.keys) EXPECT_TRUE(ValidKey(k));
        if (r.is_storage() && !r.too_large) {
          EXPECT_EQ(r.data.size(), r.bytes);
        }
      }
      ASSERT_GT(pr.consumed, 0u);
      rest = rest.substr(pr.consumed);
    }
  }
}

}  // namespace
}  // namespace wort::server
