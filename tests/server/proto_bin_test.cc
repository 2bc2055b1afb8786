// memcached's binary protocol in `wort serve`: the parser alone, then parser + handler + store
// in-process (Handler::RunBinary), response by response. Expected packets were compared with
// memcached 1.6.18 side by side (cas values aside) unless a comment says wort differs on purpose
// (doc/server.md).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "fuzz_util.h"
#include "server_test_util.h"
#include "server/auth.h"
#include "server/handler.h"
#include "server/proto_bin.h"
#include "server/store.h"
#include "wort/index.h"
#include "wort/version.h"

namespace wort::server {
namespace {

using bin::EncodeRequest;

std::string U32(uint32_t v) {
  std::string s(4, '\0');
  bin::PutU32(s.data(), v);
  return s;
}
std::string U64(uint64_t v) {
  std::string s(8, '\0');
  bin::PutU64(s.data(), v);
  return s;
}
std::string SetExtras(uint32_t flags, uint32_t exptime) { return U32(flags) + U32(exptime); }
std::string IncrExtras(uint64_t delta, uint64_t initial, uint32_t exptime) {
  return U64(delta) + U64(initial) + U32(exptime);
}
// A request header with chosen (possibly inconsistent) lengths.
std::string RawHeader(uint8_t magic, uint8_t op, uint16_t keylen, uint8_t extlen, uint32_t bodylen) {
  std::string h(bin::kHeaderSize, '\0');
  h[0] = static_cast<char>(magic);
  h[1] = static_cast<char>(op);
  h[2] = static_cast<char>(keylen >> 8);
  h[3] = static_cast<char>(keylen & 0xff);
  h[4] = static_cast<char>(extlen);
  bin::PutU32(h.data() + 8, bodylen);
  return h;
}

// ---- parser --------------------------------------------------------------------------------

TEST(BinParse, SetWithAllFields) {
  const std::string in = EncodeRequest(bin::kSetQ, SetExtras(7, 100), "key", "value", 0x01020304, 99);
  bin::Parser p;
  bin::Request r;
  const bin::ParseResult pr = p.Parse(in, &r);
  ASSERT_EQ(pr.action, bin::Action::kRequest);
  EXPECT_EQ(pr.consumed, in.size());
  EXPECT_EQ(r.op, bin::kSet);
  EXPECT_TRUE(r.quiet);
  EXPECT_EQ(r.opaque, 0x01020304u);
  EXPECT_EQ(r.cas, 99u);
  EXPECT_EQ(r.key, "key");
  EXPECT_EQ(r.value, "value");
  EXPECT_EQ(r.ExtraU32(0), 7u);
  EXPECT_EQ(r.ExtraU32(4), 100u);
}

TEST(BinParse, EveryPrefixNeedsMore) {
  const std::string in = EncodeRequest(bin::kSet, SetExtras(0, 0), "k", "abc");
  for (size_t n = 0; n < in.size(); ++n) {
    bin::Parser p;
    bin::Request r;
    const bin::ParseResult pr = p.Parse(std::string_view(in).substr(0, n), &r);
    EXPECT_EQ(pr.action, bin::Action::kNeedMore) << n;
    EXPECT_EQ(pr.consumed, 0u);
    if (n >= bin::kHeaderSize) { EXPECT_EQ(pr.need, in.size()); }
  }
}

TEST(BinParse, MalformedHeaders) {
  auto one = [](const std::string& in) {
    bin::Parser p;
    bin::Request r;
    return p.Parse(in, &r);
  };
  // Bad magic (a response packet, or text): close without a reply.
  bin::ParseResult pr = one(RawHeader(0x81, bin::kNoop, 0, 0, 0));
  EXPECT_EQ(pr.action, bin::Action::kClose);
  EXPECT_TRUE(pr.silent);
  // Lengths that disagree: "unknown command" and close, as memcached.
  pr = one(RawHeader(0x80, bin::kGet, 5, 0, 4) + "abcd");
  EXPECT_EQ(pr.action, bin::Action::kClose);
  EXPECT_EQ(pr.status, bin::kUnknownCommand);
  pr = one(RawHeader(0x80, bin::kSet, 1, 8, 8));
  EXPECT_EQ(pr.action, bin::Action::kClose);
  EXPECT_EQ(pr.status, bin::kUnknownCommand);
  // A body past 1 GiB: memcached 1.6.18 reads it all, then answers a set "too large" and an
  // unknown opcode "unknown command", and the connection stays open; wort answers at the header
  // (the handler answers a too_large request) and skips the body as it arrives. A get with a body
  // does not fit its shape: "invalid arguments" and close, as memcached.
  for (const uint32_t body : {0x40000000u + 100, 0x80000000u, 0xffffffffu}) {
    bin::Parser p;
    bin::Request r;
    const std::string in = RawHeader(0x80, bin::kSet, 1, 8, body) + SetExtras(0, 0) + "k";
    pr = p.Parse(in, &r);
    ASSERT_EQ(pr.action, bin::Action::kRequest) << body;
    EXPECT_TRUE(r.too_large);
    EXPECT_EQ(pr.consumed, in.size());
    EXPECT_EQ(p.skipping(), body - 9u);
    bin::Parser q;
    pr = q.Parse(RawHeader(0x80, 0x50, 0, 0, body), &r);
    ASSERT_EQ(pr.action, bin::Action::kError) << body;
    EXPECT_EQ(pr.status, bin::kUnknownCommand);
    EXPECT_EQ(pr.consumed, bin::kHeaderSize);
    EXPECT_EQ(q.skipping(), body);
    pr = one(RawHeader(0x80, bin::kGet, 1, 0, body) + "k");
    EXPECT_EQ(pr.action, bin::Action::kClose);
    EXPECT_EQ(pr.status, bin::kInvalid);
  }
  // A verbosity of the wrong shape: "unknown command", its body skipped, the connection open
  // (memcached answers every verbosity so; wort executes a well-formed one).
  for (const std::string& in : {RawHeader(0x80, bin::kVerbosity, 0, 0, 0), EncodeRequest(bin::kVerbosity, U64(1), "", ""),
                                EncodeRequest(bin::kVerbosity, U32(1), "k", ""),
                                EncodeRequest(bin::kVerbosity, U32(1), "", "v")}) {
    bin::Parser p;
    bin::Request r;
    const std::string both = in + EncodeRequest(bin::kNoop, "", "", "");
    pr = p.Parse(both, &r);
    ASSERT_EQ(pr.action, bin::Action::kError) << testing::PrintToString(in);
    EXPECT_EQ(pr.status, bin::kUnknownCommand);
    size_t pos = pr.consumed;
    while (p.skipping() > 0) {
      pr = p.Parse(std::string_view(both).substr(pos), &r);
      ASSERT_EQ(pr.action, bin::Action::kSkipped);
      pos += pr.consumed;
    }
    EXPECT_EQ(pos, in.size());
    pr = p.Parse(std::string_view(both).substr(pos), &r);
    ASSERT_EQ(pr.action, bin::Action::kRequest);
    EXPECT_EQ(r.op, bin::kNoop);
  }
  // Shapes that do not fit the opcode: invalid arguments, close.
  for (const std::string& in : {
           EncodeRequest(bin::kGet, "abcd", "k", ""),                 // extras on get
           EncodeRequest(bin::kGet, "", "", ""),                      // no key
           EncodeRequest(bin::kGet, "", "k", "v"),                    // a value on get
           EncodeRequest(bin::kSet, "abcd", "k", "v"),                // 4 bytes of extras
           EncodeRequest(bin::kSet, SetExtras(0, 0), "", "v"),        // no key
           EncodeRequest(bin::kIncrement, U64(1), "k", ""),           // short extras
           EncodeRequest(bin::kNoop, "", "k", ""),                    // a key on noop
           EncodeRequest(bin::kVersion, "", "", "x"),                 // a value on version
           EncodeRequest(bin::kFlush, "ab", "", ""),                  // 2 bytes of extras
           EncodeRequest(bin::kTouch, "", "k", ""),                   // no exptime
           EncodeRequest(bin::kTouch, U32(1), "k", "v"),              // wort: memcached leaves v unread
           EncodeRequest(bin::kStat, "", "items", "x"),               // likewise
           EncodeRequest(bin::kGet, "", std::string(251, 'k'), ""),   // key > 250 bytes
       }) {
    pr = one(in);
    EXPECT_EQ(pr.action, bin::Action::kClose) << testing::PrintToString(in);
    EXPECT_EQ(pr.status, bin::kInvalid);
    EXPECT_FALSE(pr.silent);
  }
  // A key of 250 bytes is fine.
  EXPECT_EQ(one(EncodeRequest(bin::kGet, "", std::string(250, 'k'), "")).action, bin::Action::kRequest);
}

TEST(BinParse, UnknownOpcodeSkipsItsBodyInPieces) {
  std::string in = EncodeRequest(0x50, "ex", "key", std::string(1000, 'v'), 42) + EncodeRequest(bin::kNoop, "", "", "");
  bin::Parser p;
  bin::Request r;
  bin::ParseResult pr = p.Parse(in, &r);
  ASSERT_EQ(pr.action, bin::Action::kError);
  EXPECT_EQ(pr.status, bin::kUnknownCommand);
  EXPECT_EQ(pr.opaque, 42u);
  EXPECT_EQ(pr.consumed, bin::kHeaderSize);
  size_t pos = pr.consumed;
  // The body arrives 100 bytes at a time.
  while (p.skipping() > 0) {
    const std::string_view piece = std::string_view(in).substr(pos, std::min<size_t>(100, in.size() - pos));
    pr = p.Parse(piece, &r);
    ASSERT_EQ(pr.action, bin::Action::kSkipped);
    pos += pr.consumed;
  }
  pr = p.Parse(std::string_view(in).substr(pos), &r);
  ASSERT_EQ(pr.action, bin::Action::kRequest);
  EXPECT_EQ(r.op, bin::kNoop);
}

TEST(BinParse, TooLargeValueIsNeverBuffered) {
  Limits lim;
  lim.max_item_size = 100;
  const std::string value(101, 'x');
  const std::string in = EncodeRequest(bin::kSet, SetExtras(0, 0), "k", value) + EncodeRequest(bin::kNoop, "", "", "");
  bin::Parser p(lim);
  bin::Request r;
  // Only the header, extras and key are needed to answer.
  const size_t fixed = bin::kHeaderSize + 8 + 1;
  bin::ParseResult pr = p.Parse(std::string_view(in).substr(0, fixed), &r);
  ASSERT_EQ(pr.action, bin::Action::kRequest);
  EXPECT_TRUE(r.too_large);
  EXPECT_TRUE(r.value.empty());
  EXPECT_EQ(pr.consumed, fixed);
  EXPECT_EQ(p.skipping(), value.size());
  pr = p.Parse(std::string_view(in).substr(fixed), &r);
  ASSERT_EQ(pr.action, bin::Action::kSkipped);
  EXPECT_EQ(pr.consumed, value.size());
  pr = p.Parse(std::string_view(in).substr(fixed + value.size()), &r);
  ASSERT_EQ(pr.action, bin::Action::kRequest);
  EXPECT_EQ(r.op, bin::kNoop);
  // Exactly the limit is fine.
  bin::Parser q(lim);
  EXPECT_FALSE(q.Parse(EncodeRequest(bin::kSet, SetExtras(0, 0), "k", std::string(100, 'x')), &r).action !=
               bin::Action::kRequest);
  EXPECT_FALSE(r.too_large);
}

// Random edits of request sequences never crash the parser; every result stays inside the
// input; a request's views are inside the input and fit its header.
TEST(BinParse, RandomInputFuzz) {
  std::mt19937_64 rng(17);
  const std::vector<std::string> seeds = {
      EncodeRequest(bin::kSet, SetExtras(1, 2), "key", "value", 7, 5),
      EncodeRequest(bin::kGetKQ, "", "key", ""),
      EncodeRequest(bin::kIncrement, IncrExtras(1, 2, 3), "n", ""),
      EncodeRequest(bin::kAppendQ, "", "k", "abc"),
      EncodeRequest(bin::kFlush, U32(5), "", ""),
      EncodeRequest(bin::kStat, "", "settings", ""),
      EncodeRequest(bin::kTouch, U32(5), "k", ""),
      EncodeRequest(bin::kNoop, "", "", ""),
  };
  Limits lim;
  lim.max_item_size = 64;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string in;
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) in += seeds[rng() % seeds.size()];
    fuzz::MutateRequest(rng, std::string_view("\x80\x00\x01\x08\x14\xff", 6), &in);
    bin::Parser p(lim);
    bin::Request r;
    std::string_view rest = in;
    for (int steps = 0; steps < 100 && !rest.empty(); ++steps) {
      const bin::ParseResult pr = p.Parse(rest, &r);
      ASSERT_LE(pr.consumed, rest.size());
      if (pr.action == bin::Action::kNeedMore || pr.action == bin::Action::kClose) break;
      if (pr.action == bin::Action::kRequest) {
        EXPECT_LE(r.key.size(), kMaxKeyLength);
        EXPECT_TRUE(r.too_large || r.value.size() == r.value_len);
        EXPECT_LE(r.value.size(), lim.max_item_size);
        EXPECT_GE(r.key.data(), rest.data());
        EXPECT_LE(r.value.data() + r.value.size(), rest.data() + pr.consumed);
      }
      ASSERT_GT(pr.consumed, 0u);
      rest = rest.substr(pr.consumed);
    }
  }
}

// ---- parser + handler + store --------------------------------------------------------------

using testing_util::Kind;

struct Bin : ::testing::Test {
  test::TempPath path{"bin"};
  std::unique_ptr<Store> st;
  ServerStats stats;
  ServerConfig config;
  std::unique_ptr<Handler> h;
  bool closed = false;

  void SetUp() override {
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = Kind();
    o.pool_size = 64ull << 20;
    o.crawler = false;
    config.limits.max_item_size = 1000;
    o.max_item_size = config.limits.max_item_size;
    ASSERT_TRUE(Store::Open(o, &st).ok());
    h = std::make_unique<Handler>(*st, stats, config);
  }
  void TearDown() override {
    Store::SetClockOffsetForTest(0);
    h.reset();
    if (st) {
      EXPECT_TRUE(st->Close().ok());
    }
  }
  // Feeds `in` (whole requests) to a fresh connection's handler; returns the decoded responses.
  std::vector<bin::Response> Run(std::string_view in) {
    h = std::make_unique<Handler>(*st, stats, config);
    std::string out;
    const Handler::BinProgress p = h->RunBinary(in, &out);
    closed = p.next == Handler::BinProgress::Next::kClose;
    EXPECT_TRUE(closed || p.consumed == in.size()) << "unconsumed input";
    std::vector<bin::Response> rs;
    std::string_view rest = out;
    while (!rest.empty()) {
      bin::Response r;
      if (!bin::DecodeResponse(rest, &r)) {
        ADD_FAILURE() << "partial response packet";
        break;
      }
      EXPECT_EQ(r.magic, bin::kResponseMagic);
      rs.push_back(r);
      rest.remove_prefix(r.size);
    }
    return rs;
  }
  bin::Response One(std::string_view in) {
    auto rs = Run(in);
    EXPECT_EQ(rs.size(), 1u);
    return rs.empty() ? bin::Response() : rs[0];
  }
  std::string Set(std::string_view key, std::string_view value, uint32_t flags = 0, uint32_t exptime = 0,
                  uint64_t cas = 0, uint8_t op = bin::kSet) {
    return EncodeRequest(op, SetExtras(flags, exptime), key, value, 0, cas);
  }
  std::string Get(std::string_view key, uint8_t op = bin::kGet) { return EncodeRequest(op, "", key, ""); }
  static std::string Noop() { return EncodeRequest(bin::kNoop, "", "", ""); }
};

TEST_F(Bin, SetGetFlagsCasOpaque) {
  const bin::Response s = One(EncodeRequest(bin::kSet, SetExtras(0xdeadbeef, 0), "a", "hello", 0x11223344));
  EXPECT_EQ(s.opcode, bin::kSet);
  EXPECT_EQ(s.status, bin::kOk);
  EXPECT_EQ(s.opaque, 0x11223344u);
  EXPECT_NE(s.cas, 0u);
  EXPECT_TRUE(s.extras.empty() && s.key.empty() && s.value.empty());
  const bin::Response g = One(EncodeRequest(bin::kGet, "", "a", "", 5));
  EXPECT_EQ(g.status, bin::kOk);
  EXPECT_EQ(g.opaque, 5u);
  EXPECT_EQ(g.cas, s.cas);
  EXPECT_EQ(g.extras, U32(0xdeadbeef));
  EXPECT_EQ(g.key, "");
  EXPECT_EQ(g.value, "hello");
  const bin::Response k = One(Get("a", bin::kGetK));
  EXPECT_EQ(k.key, "a");
  EXPECT_EQ(k.value, "hello");
  // The same item through the text protocol.
  std::string out;
  Parser tp;
  Request tr;
  ASSERT_EQ(tp.Parse("get a\r\n", &tr).outcome, Outcome::kRequest);
  h->Execute(tr, &out);
  EXPECT_EQ(out, "VALUE a 3735928559 5\r\nhello\r\nEND\r\n");
}

TEST_F(Bin, MissesAndQuietGets) {
  bin::Response r = One(Get("nope"));
  EXPECT_EQ(r.status, bin::kKeyNotFound);
  EXPECT_EQ(r.value, "Not found");
  r = One(Get("nope", bin::kGetK));
  EXPECT_EQ(r.status, bin::kKeyNotFound);
  EXPECT_EQ(r.key, "nope");
  EXPECT_EQ(r.value, "");
  Run(Set("hit", "v"));
  // getq/getkq: misses silent, hits answered; noop ends the pipeline.
  auto rs = Run(Get("nope", bin::kGetQ) + Get("hit", bin::kGetQ) + Get("nope", bin::kGetKQ) + Get("hit", bin::kGetKQ) +
                Noop());
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].opcode, bin::kGetQ);
  EXPECT_EQ(rs[0].value, "v");
  EXPECT_EQ(rs[1].opcode, bin::kGetKQ);
  EXPECT_EQ(rs[1].key, "hit");
  EXPECT_EQ(rs[2].opcode, bin::kNoop);
}

TEST_F(Bin, AddReplaceCasAndQuietErrors) {
  const uint64_t cas = One(Set("a", "x")).cas;
  EXPECT_EQ(One(Set("a", "y", 0, 0, 0, bin::kAdd)).status, bin::kKeyExists);
  EXPECT_EQ(One(Set("b", "y", 0, 0, 0, bin::kReplace)).status, bin::kKeyNotFound);
  EXPECT_EQ(One(Set("a", "y", 0, 0, cas + 1000)).status, bin::kKeyExists);
  EXPECT_EQ(One(Set("zz", "y", 0, 0, 5)).status, bin::kKeyNotFound);
  const bin::Response ok = One(Set("a", "y", 0, 0, cas));
  EXPECT_EQ(ok.status, bin::kOk);
  EXPECT_GT(ok.cas, cas);
  // Quiet: success silent, errors sent.
  auto rs = Run(Set("q", "1", 0, 0, 0, bin::kSetQ) + Set("q", "2", 0, 0, 0, bin::kAddQ) +
                Set("q", "3", 0, 0, 0, bin::kReplaceQ) + Set("nokey", "3", 0, 0, 0, bin::kReplaceQ) + Noop());
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].opcode, bin::kAddQ);
  EXPECT_EQ(rs[0].status, bin::kKeyExists);
  EXPECT_EQ(rs[1].opcode, bin::kReplaceQ);
  EXPECT_EQ(rs[1].status, bin::kKeyNotFound);
  EXPECT_EQ(One(Get("q")).value, "3");
}

TEST_F(Bin, AppendPrependDelete) {
  Run(Set("a", "mid", 9));
  auto rs = Run(EncodeRequest(bin::kAppend, "", "a", "++") + EncodeRequest(bin::kPrependQ, "", "a", "--") +
                EncodeRequest(bin::kAppend, "", "none", "x") + EncodeRequest(bin::kAppendQ, "", "none", "x"));
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].status, bin::kOk);
  EXPECT_EQ(rs[1].status, bin::kNotStored);
  EXPECT_EQ(rs[2].opcode, bin::kAppendQ);
  EXPECT_EQ(rs[2].status, bin::kNotStored);
  const bin::Response g = One(Get("a"));
  EXPECT_EQ(g.value, "--mid++");
  EXPECT_EQ(g.extras, U32(9));  // append keeps the flags
  EXPECT_EQ(One(EncodeRequest(bin::kAppend, "", "a", "x", 0, g.cas + 1)).status, bin::kKeyExists);
  EXPECT_EQ(One(EncodeRequest(bin::kDelete, "", "a", "", 0, g.cas + 1)).status, bin::kKeyExists);
  EXPECT_EQ(One(EncodeRequest(bin::kDelete, "", "a", "", 0, g.cas)).status, bin::kOk);
  EXPECT_EQ(One(EncodeRequest(bin::kDelete, "", "a", "")).status, bin::kKeyNotFound);
  Run(Set("b", "x"));
  rs = Run(EncodeRequest(bin::kDeleteQ, "", "b", "") + EncodeRequest(bin::kDeleteQ, "", "b", "") + Noop());
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].status, bin::kKeyNotFound);
}

TEST_F(Bin, IncrDecr) {
  auto incr = [&](std::string_view key, uint64_t delta, uint64_t initial, uint32_t exp, uint8_t op = bin::kIncrement,
                  uint64_t cas = 0) { return EncodeRequest(op, IncrExtras(delta, initial, exp), key, "", 0, cas); };
  bin::Response r = One(incr("n", 5, 100, 0));  // created with the initial value, delta not applied
  EXPECT_EQ(r.status, bin::kOk);
  EXPECT_EQ(r.value, U64(100));
  EXPECT_NE(r.cas, 0u);
  EXPECT_EQ(One(incr("n", 5, 100, 0)).value, U64(105));
  EXPECT_EQ(One(incr("n", 500, 0, 0, bin::kDecrement)).value, U64(0));
  EXPECT_EQ(One(incr("m", 1, 0, 0xffffffffu)).status, bin::kKeyNotFound);
  Run(Set("t", "abc"));
  r = One(incr("t", 1, 0, 0));
  EXPECT_EQ(r.status, bin::kNonNumeric);
  EXPECT_EQ(r.value, "Non-numeric server-side value for incr or decr");
  Run(Set("big", "18446744073709551615"));
  EXPECT_EQ(One(incr("big", 2, 0, 0)).value, U64(1));  // wraps at 2^64
  const uint64_t cas = One(Get("n")).cas;
  EXPECT_EQ(One(incr("n", 1, 0, 0, bin::kIncrement, cas + 1)).status, bin::kKeyExists);
  EXPECT_EQ(One(incr("n", 1, 0, 0, bin::kIncrement, cas)).value, U64(1));
  EXPECT_EQ(One(Get("n")).value, "1");
  auto rs = Run(incr("n", 1, 0, 0, bin::kIncrementQ) + incr("t", 1, 0, 0, bin::kDecrementQ) + Noop());
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].status, bin::kNonNumeric);
}

TEST_F(Bin, TouchGatAndExpiry) {
  Run(Set("a", "v", 3, 100));
  bin::Response r = One(EncodeRequest(bin::kTouch, U32(0), "a", ""));
  EXPECT_EQ(r.status, bin::kOk);
  EXPECT_EQ(r.extras, U32(3));  // flags, no value
  EXPECT_EQ(r.value, "");
  r = One(EncodeRequest(bin::kGatK, U32(10), "a", ""));
  EXPECT_EQ(r.key, "a");
  EXPECT_EQ(r.value, "v");
  EXPECT_EQ(One(EncodeRequest(bin::kTouch, U32(0), "none", "")).status, bin::kKeyNotFound);
  auto rs = Run(EncodeRequest(bin::kGatQ, U32(10), "none", "") + EncodeRequest(bin::kGatQ, U32(10), "a", "") + Noop());
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].value, "v");
  Store::SetClockOffsetForTest(11);
  EXPECT_EQ(One(Get("a")).status, bin::kKeyNotFound);
  Store::SetClockOffsetForTest(0);
  Run(Set("e", "v", 0, 5));
  Store::SetClockOffsetForTest(6);
  EXPECT_EQ(One(Get("e")).status, bin::kKeyNotFound);
}

TEST_F(Bin, FlushNoopVersionVerbosityQuit) {
  Run(Set("a", "v"));
  auto rs = Run(EncodeRequest(bin::kFlushQ, "", "", "") + Get("a") + EncodeRequest(bin::kFlush, U32(0), "", "") +
                EncodeRequest(bin::kVersion, "", "", "") + EncodeRequest(bin::kVerbosity, U32(1), "", "") + Noop());
  ASSERT_EQ(rs.size(), 5u);
  EXPECT_EQ(rs[0].status, bin::kKeyNotFound);
  EXPECT_EQ(rs[1].opcode, bin::kFlush);
  EXPECT_EQ(rs[2].value, std::string("1.6.18-wort-") + wort::Version());
  EXPECT_EQ(rs[3].opcode, bin::kVerbosity);  // memcached 1.6 answers "unknown command"
  EXPECT_EQ(rs[3].status, bin::kOk);
  EXPECT_EQ(rs[4].opcode, bin::kNoop);
  // A malformed verbosity: "unknown command" as memcached, and the connection goes on.
  rs = Run(EncodeRequest(bin::kVerbosity, U64(1), "", "") + Noop());
  EXPECT_FALSE(closed);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].opcode, bin::kVerbosity);
  EXPECT_EQ(rs[0].status, bin::kUnknownCommand);
  EXPECT_EQ(rs[0].value, "Unknown command");
  EXPECT_EQ(rs[1].opcode, bin::kNoop);
  // Delayed flush.
  Run(Set("b", "v"));
  Run(EncodeRequest(bin::kFlush, U32(5), "", ""));
  EXPECT_EQ(One(Get("b")).status, bin::kOk);
  Store::SetClockOffsetForTest(6);
  EXPECT_EQ(One(Get("b")).status, bin::kKeyNotFound);
  Store::SetClockOffsetForTest(0);
  // quit answers then closes; quitq closes silently; nothing after it runs.
  rs = Run(EncodeRequest(bin::kQuit, "", "", "") + Set("after", "x"));
  EXPECT_TRUE(closed);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].opcode, bin::kQuit);
  rs = Run(EncodeRequest(bin::kQuitQ, "", "", "") + Set("after", "x"));
  EXPECT_TRUE(closed);
  EXPECT_TRUE(rs.empty());
  EXPECT_EQ(One(Get("after")).status, bin::kKeyNotFound);
}

TEST_F(Bin, Stats) {
  Run(Set("a", "v") + Get("a"));
  auto rs = Run(EncodeRequest(bin::kStat, "", "", "", 77));
  ASSERT_GT(rs.size(), 10u);
  EXPECT_TRUE(rs.back().key.empty() && rs.back().value.empty());
  bool saw = false;
  for (const auto& r : rs) {
    EXPECT_EQ(r.opaque, 77u);
    if (r.key == "curr_items") saw = r.value == "1";
  }
  EXPECT_TRUE(saw);
  rs = Run(EncodeRequest(bin::kStat, "", "settings", ""));
  ASSERT_GT(rs.size(), 2u);
  EXPECT_EQ(rs[0].key, "maxbytes");
  rs = Run(EncodeRequest(bin::kStat, "", "reset", ""));
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(One(EncodeRequest(bin::kStat, "", "nosuch", "")).status, bin::kKeyNotFound);
}

TEST_F(Bin, KeysOfAnyByteAndTheReservedKey) {
  // Binary keys are not tokens: every byte value, prefixes of each other.
  std::vector<std::string> keys = {std::string(1, '\0'), std::string("\0\x01", 2), " ", "a b\r\n", "\xff",
                                   "\xff\x80", std::string(250, '\x10')};
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(One(Set(keys[i], std::to_string(i))).status, bin::kOk);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(One(Get(keys[i])).value, std::to_string(i));
  // The store's metadata entry is not a client key.
  EXPECT_EQ(One(Set(kMetaKey, "x")).status, bin::kInvalid);
  EXPECT_EQ(One(Get(kMetaKey)).status, bin::kInvalid);
}

TEST_F(Bin, TooLargeAndMalformedNeverWriteTheStore) {
  Run(Set("a", "old"));
  const std::string big(config.limits.max_item_size + 1, 'x');
  auto rs = Run(Set("a", big) + Get("b") + Noop());
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].status, bin::kTooLarge);
  EXPECT_EQ(rs[0].value, "Too large.");
  EXPECT_EQ(rs[1].status, bin::kKeyNotFound);
  EXPECT_EQ(One(Get("a")).status, bin::kKeyNotFound);  // as memcached: a failed set drops the old value
  Run(Set("c", "keep"));
  EXPECT_EQ(One(EncodeRequest(bin::kAppend, "", "c", big)).status, bin::kTooLarge);
  EXPECT_EQ(One(Get("c")).value, "keep");
  // A set whose lengths disagree: closed, nothing stored, nothing after it runs.
  std::string bad = Set("d", "value");
  bin::PutU32(bad.data() + 8, 4);  // bodylen < extlen + keylen
  rs = Run(bad + Set("e", "v"));
  EXPECT_TRUE(closed);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].status, bin::kUnknownCommand);
  EXPECT_EQ(One(Get("d")).status, bin::kKeyNotFound);
  EXPECT_EQ(One(Get("e")).status, bin::kKeyNotFound);
  // Bad magic: closed without a reply.
  std::string text_after = Noop();
  text_after[0] = 'g';
  rs = Run(Set("f", "v") + text_after + Set("g", "v"));
  EXPECT_TRUE(closed);
  EXPECT_EQ(rs.size(), 1u);
  EXPECT_EQ(One(Get("g")).status, bin::kKeyNotFound);
  // SASL without authentication configured: unknown command, as memcached without -S.
  EXPECT_EQ(One(EncodeRequest(bin::kSaslListMechs, "", "", "")).status, bin::kUnknownCommand);
}

// SASL PLAIN against the password file (-Y): memcached -S's replies.
TEST_F(Bin, SaslPlain) {
  Run(Set("a", "v"));
  std::unique_ptr<AuthFile> auth;
  ASSERT_TRUE(AuthFile::Parse("alice:s3cret:x\nbob:pw\n", "test", &auth).ok());
  config.auth = auth.get();  // each Run is a new connection
  // Before authenticating: version and the SASL requests only; anything else is refused and the
  // connection closed.
  auto rs = Run(EncodeRequest(bin::kVersion, "", "", "") + EncodeRequest(bin::kSaslListMechs, "", "", "") + Get("a") +
                Noop());
  EXPECT_TRUE(closed);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[1].value, "PLAIN");
  EXPECT_EQ(rs[2].status, bin::kAuthError);
  EXPECT_EQ(rs[2].value, "Auth failure.");
  rs = Run(Set("x", "y", 0, 0, 0, bin::kSetQ));  // quiet requests are refused too
  EXPECT_TRUE(closed);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].status, bin::kAuthError);
  // Wrong password, unknown user, wrong mechanism, malformed payload, step: auth error, the
  // connection stays open; then the right password.
  const std::string ok = EncodeRequest(bin::kSaslAuth, "", "PLAIN", std::string("\0alice\0s3cret:x", 15));
  rs = Run(EncodeRequest(bin::kSaslAuth, "", "PLAIN", std::string("\0alice\0s3cret", 13)) +
           EncodeRequest(bin::kSaslAuth, "", "PLAIN", std::string("\0carol\0pw", 10)) +
           EncodeRequest(bin::kSaslAuth, "", "CRAM-MD5", std::string("\0bob\0pw", 8)) +
           EncodeRequest(bin::kSaslAuth, "", "PLAIN", "bob pw") +
           EncodeRequest(bin::kSaslStep, "", "PLAIN", std::string("\0bob\0pw", 8)) + ok + Get("a") + Noop());
  EXPECT_FALSE(closed);
  ASSERT_EQ(rs.size(), 8u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rs[i].status, bin::kAuthError) << i;
  EXPECT_EQ(rs[5].status, bin::kOk);
  EXPECT_EQ(rs[5].value, "Authenticated");
  EXPECT_EQ(rs[6].value, "v");
  // A mechanism name longer than memcached's 32 bytes: invalid arguments (0x04), as memcached
  // answers it; the connection stays open.
  rs = Run(EncodeRequest(bin::kSaslAuth, "", std::string(33, 'P'), std::string("\0alice\0s3cret:x", 15)) +
           EncodeRequest(bin::kSaslStep, "", std::string(200, '\xff'), "x") + ok + Get("a"));
  EXPECT_FALSE(closed);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].status, bin::kInvalid);
  EXPECT_EQ(rs[1].status, bin::kInvalid);
  EXPECT_EQ(rs[2].value, "Authenticated");
  EXPECT_EQ(rs[3].value, "v");
  // An authzid must name the user.
  rs = Run(EncodeRequest(bin::kSaslAuth, "", "PLAIN", std::string("bob\0bob\0pw", 10)) + Get("a"));
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].value, "v");
  EXPECT_EQ(One(EncodeRequest(bin::kSaslAuth, "", "PLAIN", std::string("alice\0bob\0pw", 12))).status, bin::kAuthError);
  EXPECT_EQ(stats.Sum(&ServerStats::Counters::auth_errors), 6u);
  config.auth = nullptr;
}

// Random edits of request pipelines through parser + handler + store: no crash, every output
// is a sequence of whole response packets, and the store keeps working.
TEST_F(Bin, RandomPipelinesFuzz) {
  std::mt19937_64 rng(23);
  const std::vector<std::string> seeds = {
      Set("key", "value1", 1, 0, 0, bin::kSetQ),
      Set("k2", "value2", 0, 0, 0, bin::kAdd),
      EncodeRequest(bin::kAppendQ, "", "key", "value3"),
      EncodeRequest(bin::kIncrement, IncrExtras(1, 2, 0), "n", ""),
      EncodeRequest(bin::kDeleteQ, "", "k2", ""),
      EncodeRequest(bin::kGatKQ, U32(100), "key", ""),
      EncodeRequest(bin::kStat, "", "settings", ""),
      Get("key", bin::kGetK),
      Noop(),
  };
  for (int iter = 0; iter < 3000; ++iter) {
    std::string in;
    for (int n = 1 + static_cast<int>(rng() % 4); n > 0; --n) in += seeds[rng() % seeds.size()];
    fuzz::MutateRequest(rng, std::string_view("\x80\x00\x01\x08\x14\xff", 6), &in);
    Handler hh(*st, stats, config);
    std::string out;
    size_t pos = 0;
    for (int steps = 0; steps < 100 && pos < in.size(); ++steps) {
      const Handler::BinProgress p = hh.RunBinary(std::string_view(in).substr(pos), &out);
      ASSERT_LE(p.consumed, in.size() - pos);
      pos += p.consumed;
      if (p.next != Handler::BinProgress::Next::kFlush) break;
    }
    std::string_view rest = out;
    while (!rest.empty()) {
      bin::Response r;
      ASSERT_TRUE(bin::DecodeResponse(rest, &r)) << "partial packet";
      ASSERT_EQ(r.magic, bin::kResponseMagic);
      rest.remove_prefix(r.size);
    }
  }
  // The store still answers, and the connection logic still works after the fuzz.
  EXPECT_EQ(One(Set("after", "fuzz")).status, bin::kOk);
  EXPECT_EQ(One(Get("after")).value, "fuzz");
}

}  // namespace
}  // namespace wort::server
