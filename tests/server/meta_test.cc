// memcached's meta commands (mg, ms, md, ma, me, mn) in `wort serve`: the parser alone, then the
// parser + handler + store in-process, byte for byte. Expected replies were checked against
// memcached 1.6.18 unless a comment says wort differs on purpose (doc/server.md).
#include <gtest/gtest.h>

#include "fuzz_util.h"
#include "server_test_util.h"

#include <memory>
#include <random>
#include <string>

#include "common/test_util.h"
#include "server/handler.h"
#include "server/protocol.h"
#include "server/store.h"
#include "wort/index.h"

namespace wort::server {
namespace {

// ---- parser --------------------------------------------------------------------------------

struct Parsed {
  std::shared_ptr<std::string> input;
  ParseResult pr;
  std::unique_ptr<Request> req;
};

Parsed ParseOne(std::string_view in) {
  Parsed p{std::make_shared<std::string>(in), {}, std::make_unique<Request>()};
  Parser parser;
  p.pr = parser.Parse(*p.input, p.req.get());
  return p;
}

std::string ErrorOf(std::string_view in) {
  Parsed p = ParseOne(in);
  if (p.pr.outcome != Outcome::kError) return "<no error>";
  EXPECT_FALSE(p.pr.noreply) << in;  // meta errors are always sent
  return std::string(p.pr.error);
}

TEST(MetaParse, FlagsAndTokens) {
  Parsed p = ParseOne("mg key s v t f c k Oab12 q T30 N60 R10 u P/x Lrouting\r\n");
  ASSERT_EQ(p.pr.outcome, Outcome::kRequest);
  const Request& r = *p.req;
  EXPECT_EQ(r.cmd, Command::kMetaGet);
  EXPECT_EQ(r.MetaKey(), "key");
  // As memcached, a flag without a token ignores what follows its character.
  EXPECT_EQ(ParseOne("mg k vx kyz\r\n").req->meta.nret, 1u);
  EXPECT_TRUE(ParseOne("mg k vx\r\n").req->meta.value);
  EXPECT_EQ(std::string(r.meta.ret, r.meta.nret), "stfckO");  // request order
  EXPECT_TRUE(r.meta.value);
  EXPECT_TRUE(r.meta.quiet);
  EXPECT_EQ(r.meta.opaque, "ab12");
  EXPECT_TRUE(r.meta.has_ttl);
  EXPECT_EQ(r.meta.ttl, 30);
  EXPECT_TRUE(r.meta.vivify);
  EXPECT_EQ(r.meta.vivify_ttl, 60);
  EXPECT_TRUE(r.meta.recache);
  EXPECT_EQ(r.meta.recache_ttl, 10);

  p = ParseOne("ms k 5 F4294967295 T-1 C18446744073709551615 I MA q\r\nhello\r\nmn\r\n");
  ASSERT_EQ(p.pr.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req->cmd, Command::kMetaSet);
  EXPECT_EQ(p.req->data, "hello");
  EXPECT_EQ(p.pr.consumed, p.input->size() - 4);
  EXPECT_EQ(p.req->meta.client_flags, 4294967295u);
  EXPECT_EQ(p.req->meta.ttl, -1);
  EXPECT_EQ(p.req->meta.cas, 18446744073709551615ull);
  EXPECT_TRUE(p.req->meta.invalidate);
  EXPECT_EQ(p.req->meta.mode, 'A');

  for (auto [m, want] : {std::pair{"MI", '+'}, {"M+", '+'}, {"Mi", '+'}, {"MD", '-'}, {"M-", '-'}}) {
    p = ParseOne(std::string("ma k ") + m + " D7 J9 N0\r\n");
    ASSERT_EQ(p.pr.outcome, Outcome::kRequest) << m;
    EXPECT_EQ(p.req->meta.mode, want);
    EXPECT_EQ(p.req->meta.delta, 7u);
    EXPECT_EQ(p.req->meta.initial, 9u);
  }
  p = ParseOne("ma k\r\n");
  EXPECT_EQ(p.req->meta.delta, 1u);  // the default delta

  p = ParseOne("md k C5 I T9 k Oz\r\n");
  ASSERT_EQ(p.pr.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req->cmd, Command::kMetaDelete);
  EXPECT_TRUE(p.req->meta.has_cas);

  EXPECT_EQ(ParseOne("mn\r\n").req->cmd, Command::kMetaNoop);
  EXPECT_EQ(ParseOne("mn extra tokens\r\n").req->cmd, Command::kMetaNoop);
  p = ParseOne("me k\r\n");
  EXPECT_EQ(p.req->cmd, Command::kMetaDebug);
  EXPECT_FALSE(p.req->meta.base64);
  p = ParseOne("me AA== b\r\n");
  EXPECT_TRUE(p.req->meta.base64);
  EXPECT_EQ(p.req->MetaKey(), std::string_view("\0", 1));
}

TEST(MetaParse, Errors) {
  EXPECT_EQ(ErrorOf("mg\r\n"), "ERROR");
  EXPECT_EQ(ErrorOf("ms\r\n"), "ERROR");
  EXPECT_EQ(ErrorOf("mx k\r\n"), "ERROR");
  EXPECT_EQ(ErrorOf("me\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("me a b c\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("ms k\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("ms k x\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("ms k -1\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("mg k v v\r\n"), "CLIENT_ERROR duplicate flag");
  EXPECT_EQ(ErrorOf("mg k zz\r\n"), "CLIENT_ERROR invalid flag");
  EXPECT_EQ(ErrorOf("mg k Z\r\n"), "CLIENT_ERROR invalid flag");
  EXPECT_EQ(ErrorOf("mg k C5\r\n"), "CLIENT_ERROR invalid flag");   // C is not a mg flag
  EXPECT_EQ(ErrorOf("md k v\r\n"), "CLIENT_ERROR invalid flag");
  EXPECT_EQ(ErrorOf("ms k 1 v\r\nx\r\n"), "CLIENT_ERROR invalid flag");
  EXPECT_EQ(ErrorOf("mg k O" + std::string(33, 'o') + "\r\n"), "CLIENT_ERROR opaque token too long");
  EXPECT_EQ(ErrorOf("mg k T\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("mg k Tx\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("mg k T99999999999\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("ma k Dx\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("ma k D-1\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("md k Cx\r\n"), "CLIENT_ERROR bad token in command line format");
  EXPECT_EQ(ErrorOf("ms k 1 Fx\r\na\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("ms k 1 F4294967296\r\na\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ErrorOf("ms k 1 MZ\r\na\r\n"), "CLIENT_ERROR invalid mode for ms M token");
  EXPECT_EQ(ErrorOf("ma k MX\r\n"), "CLIENT_ERROR invalid mode for ma M token");
  EXPECT_EQ(ErrorOf("ma k M\r\n"), "CLIENT_ERROR invalid mode for ma M token");
  // Flags the store cannot honour are refused by name, never ignored.
  EXPECT_NE(ErrorOf("mg k h\r\n").find("flag h is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("mg k l\r\n").find("flag l is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("ms k 1 E99\r\nx\r\n").find("flag E is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("mg k E5\r\n").find("flag E is not supported"), std::string::npos);
  // Keys: 250 bytes is the limit; control bytes are key bytes, as in memcached 1.6.18.
  EXPECT_EQ(ParseOne("mg " + std::string(250, 'k') + " v\r\n").pr.outcome, Outcome::kRequest);
  EXPECT_EQ(ErrorOf("mg " + std::string(251, 'k') + " v\r\n"), "CLIENT_ERROR bad command line format");
  EXPECT_EQ(ParseOne(std::string("mg a\x01z v\r\n")).req->MetaKey(), "a\x01z");
}

TEST(MetaParse, MalformedMsSwallowsItsData) {
  // A rejected ms with a valid <datalen> drops its data block: the next command parses.
  for (std::string line : {"ms " + std::string(251, 'k') + " 5", std::string("ms k 5 zz"), std::string("ms k 5 v v"),
                           std::string("ms !!!! 5 b"), std::string("ms k 5 MZ")}) {
    Parser p;
    Request r;
    const std::string in = line + "\r\nhello\r\nmn\r\n";
    ParseResult pr = p.Parse(in, &r);
    ASSERT_EQ(pr.outcome, Outcome::kError) << line;
    std::string_view rest = std::string_view(in).substr(pr.consumed);
    pr = p.Parse(rest, &r);
    ASSERT_EQ(pr.outcome, Outcome::kSkipped) << line;
    EXPECT_EQ(pr.consumed, 7u);
    pr = p.Parse(rest.substr(7), &r);
    ASSERT_EQ(pr.outcome, Outcome::kRequest) << line;
    EXPECT_EQ(r.cmd, Command::kMetaNoop);
  }
  // Bad data chunk: the line + datalen + 2 bytes are consumed.
  Parsed p = ParseOne("ms k 3\r\nabcde\r\n");
  ASSERT_EQ(p.pr.outcome, Outcome::kError);
  EXPECT_EQ(p.pr.error, "CLIENT_ERROR bad data chunk");
  EXPECT_EQ(p.pr.consumed, 13u);
  // Too large: a request with too_large, its data swallowed.
  Limits lim;
  lim.max_item_size = 10;
  Parser parser(lim);
  Request r;
  ParseResult pr = parser.Parse("ms k 11 T0\r\n", &r);
  ASSERT_EQ(pr.outcome, Outcome::kRequest);
  EXPECT_TRUE(r.too_large);
  EXPECT_EQ(parser.swallowing(), 13u);
}

TEST(MetaParse, Base64Keys) {
  std::string out;
  EXPECT_TRUE(DecodeBase64("Zm9vAP8=", &out));
  EXPECT_EQ(out, std::string("foo\0\xff", 5));
  EXPECT_TRUE(DecodeBase64("AA==", &out));
  EXPECT_EQ(out, std::string(1, '\0'));
  for (const char* bad : {"", "Zm9", "Zm9vAP8", "Zm9v=AP8", "A===", "====", "Zm9vAP!=", "AB==", "AAB="})
    EXPECT_FALSE(DecodeBase64(bad, &out)) << bad;  // AB==, AAB=: non-canonical padding bits
  // Every byte value round-trips, at every length mod 3.
  std::mt19937 rng(3);
  for (size_t len = 1; len < 200; ++len) {
    std::string raw;
    for (size_t i = 0; i < len; ++i) raw.push_back(static_cast<char>(i < 256 ? i : rng()));
    std::string enc, dec;
    EncodeBase64(raw, &enc);
    ASSERT_TRUE(DecodeBase64(enc, &dec)) << len;
    EXPECT_EQ(dec, raw);
  }
  Parsed p = ParseOne("mg Zm9vAP8= b k v\r\n");
  ASSERT_EQ(p.pr.outcome, Outcome::kRequest);
  EXPECT_EQ(p.req->MetaKey(), std::string("foo\0\xff", 5));
  EXPECT_EQ(p.req->keys[0], "Zm9vAP8=");
  EXPECT_EQ(ErrorOf("mg Zm9vAP8 b v\r\n"), "CLIENT_ERROR error decoding key");
  // The token as sent is limited to 250 bytes (memcached checks the encoded form).
  std::string enc;
  EncodeBase64(std::string(187, '\x80'), &enc);  // 252 characters
  EXPECT_EQ(ErrorOf("mg " + enc + " b\r\n"), "CLIENT_ERROR bad command line format");
  enc.clear();
  EncodeBase64(std::string(186, '\x80'), &enc);  // 248 characters
  EXPECT_EQ(ParseOne("mg " + enc + " b\r\n").pr.outcome, Outcome::kRequest);
}

TEST(MetaParse, RandomInputFuzz) {
  std::mt19937_64 rng(11);
  const char* seeds[] = {"mg k s v t f c k O1 q\r\n", "ms k 3 T5 F1 C2 MA c\r\nabc\r\n", "md AA== b C1 I T3 q\r\n",
                         "ma k N0 J5 D2 MD v t c\r\n", "me k b\r\n", "mn\r\n"};
  Limits lim;
  lim.max_item_size = 64;
  lim.max_line = 128;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string in = seeds[rng() % std::size(seeds)];
    fuzz::MutateRequest(rng, " \r\n0123456789-=bqvOTNCMDJ", &in);
    Parser p(lim);
    Request r;
    std::string_view rest = in;
    for (int steps = 0; steps < 100 && !rest.empty(); ++steps) {
      ParseResult pr = p.Parse(rest, &r);
      ASSERT_LE(pr.consumed, rest.size());
      if (pr.outcome == Outcome::kNeedMore || pr.outcome == Outcome::kClose) break;
      if (pr.outcome == Outcome::kRequest && r.cmd >= Command::kMetaGet && r.cmd != Command::kMetaNoop) {
        EXPECT_FALSE(r.MetaKey().empty());
        if (!r.meta.base64) {
          EXPECT_TRUE(ValidKey(r.MetaKey()));
        }
        EXPECT_LE(r.meta.opaque.size(), kMaxOpaqueLength);
      }
      ASSERT_GT(pr.consumed, 0u);
      rest = rest.substr(pr.consumed);
    }
  }
}

// ---- parser + handler + store --------------------------------------------------------------

using testing_util::Kind;

// A connection without the network: bytes in, reply bytes out.
std::string RunOn(Store& st, ServerStats& stats, const ServerConfig& config, std::string_view in) {
  Handler h(st, stats, config);
  return testing_util::RunText(h, config.limits, in);
}

struct Meta : ::testing::Test {
  test::TempPath path{"meta"};
  std::unique_ptr<Store> st;
  ServerStats stats;
  ServerConfig config;
  void SetUp() override { Open(); }
  void Open() {
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = Kind();
    o.pool_size = 64ull << 20;
    o.crawler = false;
    o.max_item_size = config.limits.max_item_size;
    ASSERT_TRUE(Store::Open(o, &st).ok());
  }
  void Reopen() {
    ASSERT_TRUE(st->Close().ok());
    st.reset();
    Open();
  }
  void TearDown() override {
    Store::SetClockOffsetForTest(0);
    if (st) {
      EXPECT_TRUE(st->Close().ok());
    }
  }
  std::string Run(std::string_view in) { return RunOn(*st, stats, config, in); }
  // The cas of `key` (via mg c), or 0.
  uint64_t Cas(std::string_view key) {
    const std::string r = Run("mg " + std::string(key) + " c\r\n");
    const size_t i = r.find(" c");
    return i == std::string::npos ? 0 : std::stoull(r.substr(i + 2));
  }
};

TEST_F(Meta, NoopAndGetSetBasics) {
  EXPECT_EQ(Run("mn\r\n"), "MN\r\n");
  EXPECT_EQ(Run("mg foo v\r\n"), "EN\r\n");
  EXPECT_EQ(Run("mg foo v q\r\nmg foo k O123 v\r\nmg foo q k Oab\r\nmn\r\n"), "EN kfoo O123\r\nMN\r\n");
  EXPECT_EQ(Run("ms foo 3\r\nbar\r\n"), "HD\r\n");
  EXPECT_EQ(Run("mg foo\r\nmg foo v\r\n"), "HD\r\nVA 3\r\nbar\r\n");
  const uint64_t cas = Cas("foo");
  ASSERT_NE(cas, 0u);
  EXPECT_EQ(Run("mg foo s v t f c k Oxx q\r\n"), "VA 3 s3 t-1 f0 c" + std::to_string(cas) + " kfoo Oxx\r\nbar\r\n");
  EXPECT_EQ(Run("mg foo q\r\n"), "HD\r\n");  // q hides only EN for mg (memcached 1.6.18)
  EXPECT_EQ(Run("mg foo u v\r\n"), "VA 3\r\nbar\r\n");  // u: no LRU to bump: nothing to skip
  EXPECT_EQ(Run("mg foo P/proxy Lhint v\r\n"), "VA 3\r\nbar\r\n");
  // ms flags and the reply tokens; F and T are stored.
  const std::string r = Run("ms foo 3 T100 F5 c k O1\r\nbaz\r\n");
  EXPECT_EQ(r.substr(0, 4), "HD c");
  EXPECT_EQ(r.substr(r.size() - 10), " kfoo O1\r\n");
  EXPECT_EQ(Run("mg foo t f v\r\n"), "VA 3 t100 f5\r\nbaz\r\n");
  // The classic protocol sees the same item.
  EXPECT_EQ(Run("get foo\r\n"), "VALUE foo 5 3\r\nbaz\r\nEND\r\n");
  // Empty value.
  EXPECT_EQ(Run("ms emp 0\r\n\r\nmg emp v s\r\n"), "HD\r\nVA 0 s0\r\n\r\n");
}

TEST_F(Meta, QuietPipelineEndsWithMn) {
  // Quiet sets answer nothing; quiet gets answer only hits; mn marks the end.
  std::string in;
  for (int i = 0; i < 20; ++i) in += "ms k" + std::to_string(i) + " 2 q\r\nv" + std::to_string(i % 10) + "\r\n";
  in += "mn\r\n";
  EXPECT_EQ(Run(in), "MN\r\n");
  in.clear();
  for (int i = 0; i < 25; i += 5) in += "mg k" + std::to_string(i) + " v q k\r\n";
  in += "mg missing v q\r\nmd k0 q\r\nmd k0 q\r\nma k1 q\r\nms k1 1 ME q\r\nx\r\nmn\r\n";
  EXPECT_EQ(Run(in),
            "VA 2 kk0\r\nv0\r\nVA 2 kk5\r\nv5\r\nVA 2 kk10\r\nv0\r\nVA 2 kk15\r\nv5\r\n"
            // k20 and missing: EN hidden by q. md k0 q: HD hidden; the second: NF is not
            // hidden (memcached 1.6.18). ma k1 q on "v1": not a number. ms ME (add) on an existing
            // key: NS is never hidden.
            "NF\r\n"
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
            "NS\r\n"
            "MN\r\n");
}

TEST_F(Meta, EveryReplyCode) {
  // HD VA EN NF NS EX MN ME, each in its context.
  EXPECT_EQ(Run("ms a 1\r\n1\r\n"), "HD\r\n");
  EXPECT_EQ(Run("mg a v\r\n"), "VA 1\r\n1\r\n");
  EXPECT_EQ(Run("mg nope\r\n"), "EN\r\n");
  EXPECT_EQ(Run("md nope\r\n"), "NF\r\n");
  EXPECT_EQ(Run("ms nope 1 MR\r\nx\r\n"), "NS\r\n");
  EXPECT_EQ(Run("ms a 1 C1\r\nx\r\n"), "EX\r\n");
  EXPECT_EQ(Run("mn\r\n"), "MN\r\n");
  EXPECT_EQ(Run("me a\r\n").substr(0, 11), "ME a exp=-1");
  EXPECT_EQ(Run("me nope\r\n"), "EN\r\n");
  EXPECT_EQ(Run("ma nope\r\n"), "NF\r\n");
  EXPECT_EQ(Run("ms nf 1 C5\r\nx\r\n"), "NF\r\n");  // cas on a missing item
  EXPECT_EQ(Run("md a\r\n"), "HD\r\n");
  // ms failures answer c0 when c was asked, k and O always.
  EXPECT_EQ(Run("ms x1 1 ME c k O9\r\na\r\n").substr(0, 2), "HD");
  EXPECT_EQ(Run("ms x1 1 ME c k O9\r\na\r\n"), "NS c0 kx1 O9\r\n");
  EXPECT_EQ(Run("ms x1 1 C1 c k O9\r\na\r\n"), "EX c0 kx1 O9\r\n");
  EXPECT_EQ(Run("ms nx9 1 C1 k\r\na\r\n"), "NF knx9\r\n");
  EXPECT_EQ(Run("md nx9 q k O5\r\n"), "NF knx9 O5\r\n");
}

TEST_F(Meta, SetModes) {
  EXPECT_EQ(Run("ms m 1 MA\r\nx\r\n"), "NS\r\n");  // append to nothing
  EXPECT_EQ(Run("ms m 1 MP\r\nx\r\n"), "NS\r\n");
  EXPECT_EQ(Run("ms m 1 MR\r\nx\r\n"), "NS\r\n");
  EXPECT_EQ(Run("ms m 1 ME F7 T0\r\nb\r\n"), "HD\r\n");
  EXPECT_EQ(Run("ms m 1 ME\r\nz\r\n"), "NS\r\n");
  EXPECT_EQ(Run("ms m 1 MA F9\r\nc\r\nms m 1 MP\r\na\r\n"), "HD\r\nHD\r\n");
  EXPECT_EQ(Run("mg m v f\r\n"), "VA 3 f7\r\nabc\r\n");  // append/prepend keep the flags
  EXPECT_EQ(Run("ms m 1 MR\r\nr\r\nmg m v\r\n"), "HD\r\nVA 1\r\nr\r\n");
  EXPECT_EQ(Run("ms m 1 MS\r\ns\r\nmg m v f\r\n"), "HD\r\nVA 1 f0\r\ns\r\n");
  // Lower-case modes are accepted too.
  EXPECT_EQ(Run("ms m 1 Ma\r\nt\r\nmg m v\r\n"), "HD\r\nVA 2\r\nst\r\n");
}

TEST_F(Meta, CasConflictsViaC) {
  EXPECT_EQ(Run("ms c 1\r\na\r\n"), "HD\r\n");
  const uint64_t cas = Cas("c");
  const std::string C = std::to_string(cas);
  EXPECT_EQ(Run("ms c 1 C" + std::to_string(cas + 1) + "\r\nb\r\n"), "EX\r\n");
  const std::string r = Run("ms c 1 c C" + C + "\r\nb\r\n");
  ASSERT_EQ(r.substr(0, 4), "HD c");
  const uint64_t cas2 = std::stoull(r.substr(4));
  EXPECT_GT(cas2, cas);
  EXPECT_EQ(Run("ms c 1 C" + C + "\r\nz\r\n"), "EX\r\n");  // the old cas no longer matches
  EXPECT_EQ(Run("mg c v\r\n"), "VA 1\r\nb\r\n");
  // Append/replace respect C; add ignores it.
  EXPECT_EQ(Run("ms c 1 MA C" + C + "\r\nz\r\n"), "EX\r\n");
  EXPECT_EQ(Run("ms c 1 MR C" + C + "\r\nz\r\n"), "EX\r\n");
  EXPECT_EQ(Run("ms c 1 MA C" + std::to_string(cas2) + "\r\nz\r\n"), "HD\r\n");
  EXPECT_EQ(Run("ms new 1 ME C1\r\nn\r\n"), "HD\r\n");
  // md and ma with C.
  const uint64_t cas3 = Cas("c");
  EXPECT_EQ(Run("md c C" + std::to_string(cas3 + 7) + " k\r\n"), "EX kc\r\n");
  EXPECT_EQ(Run("ma c C1\r\n"), "EX\r\n");
  EXPECT_EQ(Run("md c C" + std::to_string(cas3) + "\r\nmg c\r\n"), "HD\r\nEN\r\n");
  // gets/cas interplay: the classic cas command accepts the meta cas.
  Run("ms g 1\r\n1\r\n");
  EXPECT_EQ(Run("cas g 0 0 1 " + std::to_string(Cas("g")) + "\r\n2\r\n"), "STORED\r\n");
}

TEST_F(Meta, Arithmetic) {
  EXPECT_EQ(Run("ma n\r\nma n q\r\n"), "NF\r\nNF\r\n");
  EXPECT_EQ(Run("ma n N0 J10 v\r\n"), "VA 2\r\n10\r\n");
  EXPECT_EQ(Run("ma n v\r\n"), "VA 2\r\n11\r\n");
  const std::string r = Run("ma n MD D3 v t c\r\n");
  EXPECT_EQ(r.substr(0, 10), "VA 1 t-1 c");
  EXPECT_NE(r.find("\r\n8\r\n"), std::string::npos) << r;
  EXPECT_EQ(Run("ma n M- D100 v\r\n"), "VA 1\r\n0\r\n");  // decrement stops at 0
  EXPECT_EQ(Run("ma n MI D5\r\n"), "HD\r\n");
  EXPECT_EQ(Run("ma n M+ v q\r\nma n v q\r\nmn\r\n"), "MN\r\n");  // q hides HD and VA
  EXPECT_EQ(Run("mg n v\r\n"), "VA 1\r\n7\r\n");
  // Wraps at 2^64 like incr.
  Run("ms big 20\r\n18446744073709551615\r\n");
  EXPECT_EQ(Run("ma big v\r\n"), "VA 1\r\n0\r\n");
  // T sets the ttl, t shows it.
  EXPECT_EQ(Run("ma n T100 v t\r\n"), "VA 1 t100\r\n8\r\n");
  EXPECT_EQ(Run("ma n2 N50 J3 t v\r\n"), "VA 1 t50\r\n3\r\n");
  // Non-numeric value.
  Run("ms t 3\r\nabc\r\n");
  EXPECT_EQ(Run("ma t\r\nma t v\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
                                             "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
  EXPECT_EQ(Run("mg t v\r\n"), "VA 3\r\nabc\r\n");  // unchanged
  // The classic decr sees the meta value.
  EXPECT_EQ(Run("decr n 1\r\n"), "7\r\n");
  EXPECT_EQ(Run("ma nope k O3 c t v\r\n"), "NF knope O3\r\n");
}

TEST_F(Meta, TouchAndTtl) {
  Run("ms t 1 T0\r\nx\r\n");
  EXPECT_EQ(Run("mg t t\r\n"), "HD t-1\r\n");
  EXPECT_EQ(Run("mg t T30 t\r\n"), "HD t30\r\n");
  EXPECT_EQ(Run("mg t t v\r\n"), "VA 1 t30\r\nx\r\n");
  // Expiry with a shifted clock.
  Store::SetClockOffsetForTest(31);
  EXPECT_EQ(Run("mg t v\r\n"), "EN\r\n");
  Store::SetClockOffsetForTest(0);
  // T-1: returned this once, then gone (as gat -1).
  Run("ms t 1\r\nx\r\n");
  EXPECT_EQ(Run("mg t T-1 v\r\n"), "VA 1\r\nx\r\n");
  EXPECT_EQ(Run("mg t v\r\n"), "EN\r\n");
  // ms T-1 stores an already expired item.
  EXPECT_EQ(Run("ms t 1 T-1\r\nx\r\nmg t\r\n"), "HD\r\nEN\r\n");
}

TEST_F(Meta, VivifyAndRecacheWinTokens) {
  const std::string r1 = Run("mg viv N30 v c t\r\n");
  EXPECT_EQ(r1.substr(0, 6), "VA 0 c");
  EXPECT_EQ(r1.substr(r1.size() - 10), " t30 W\r\n\r\n");
  EXPECT_EQ(Run("mg viv N30 v t\r\n"), "VA 0 t30 Z\r\n\r\n");
  EXPECT_EQ(Run("mg viv v\r\n"), "VA 0 Z\r\n\r\n");
  EXPECT_EQ(Run("ms viv 3 T60\r\nnew\r\nmg viv v\r\n"), "HD\r\nVA 3\r\nnew\r\n");
  // R: win when the remaining ttl is below the token, once.
  Run("ms rc 1 T10\r\nx\r\n");
  EXPECT_EQ(Run("mg rc R5 v\r\n"), "VA 1\r\nx\r\n");
  EXPECT_EQ(Run("mg rc R30 v\r\n"), "VA 1 W\r\nx\r\n");
  EXPECT_EQ(Run("mg rc R30 v\r\n"), "VA 1 Z\r\nx\r\n");
  Run("ms rc0 1\r\nx\r\n");
  EXPECT_EQ(Run("mg rc0 R30 v\r\n"), "VA 1\r\nx\r\n");  // never expires: no recache
}

TEST_F(Meta, InvalidateMarksStale) {
  Run("ms st 3\r\nold\r\n");
  const uint64_t cas = Cas("st");
  EXPECT_EQ(Run("md st I T30\r\n"), "HD\r\n");
  // Stale: the first reader wins the recache (W). md I bumped the cas.
  const std::string r = Run("mg st v t c\r\n");
  ASSERT_EQ(r.substr(0, 10), "VA 3 t30 c") << r;
  EXPECT_EQ(r.substr(r.size() - 11), " X W\r\nold\r\n");
  EXPECT_GT(std::stoull(r.substr(10)), cas);
  EXPECT_EQ(Run("mg st v\r\n"), "VA 3 Z X\r\nold\r\n");
  EXPECT_NE(Run("me st\r\n").find("stale=yes"), std::string::npos);
  // ms I with a lower cas: stored but still stale; a higher one: EX.
  EXPECT_EQ(Run("ms st 3 C" + std::to_string(cas) + " I\r\nzzz\r\n"), "HD\r\n");
  EXPECT_EQ(Run("mg st v\r\n"), "VA 3 Z X\r\nzzz\r\n");
  EXPECT_EQ(Run("ms st 3 C" + std::to_string(Cas("st") + 100) + " I\r\nyyy\r\n"), "EX\r\n");
  // A plain set makes it fresh again.
  EXPECT_EQ(Run("ms st 3\r\nnew\r\nmg st v\r\n"), "HD\r\nVA 3\r\nnew\r\n");
  // md I q: hidden; the state and cas survive a reopen of the pool.
  EXPECT_EQ(Run("md st I q\r\nmn\r\n"), "MN\r\n");
  Reopen();
  EXPECT_EQ(Run("mg st v\r\n"), "VA 3 X W\r\nnew\r\n");
  EXPECT_EQ(Run("mg st v\r\n"), "VA 3 Z X\r\nnew\r\n");
  // A delayed flush_all still works on flagged items (the state bits are masked off the time).
  Run("flush_all 2\r\n");
  Store::SetClockOffsetForTest(3);
  EXPECT_EQ(Run("mg st v\r\n"), "EN\r\n");
}

TEST_F(Meta, BinaryKeysViaBase64) {
  // Keys with 0x00, 0xff, a space, a newline; prefix keys of each other; a long key.
  const std::string keys[] = {std::string("\0", 1), std::string("\0\0", 2), std::string("foo\0\xff", 5),
                              std::string("\x80 \n", 3), std::string(186, '\xfe'), std::string("a")};
  int i = 0;
  for (const std::string& k : keys) {
    std::string enc;
    EncodeBase64(k, &enc);
    EXPECT_EQ(Run("ms " + enc + " 2 b\r\nv" + std::to_string(i) + "\r\n"), "HD\r\n") << enc;
    ++i;
  }
  i = 0;
  for (const std::string& k : keys) {
    std::string enc;
    EncodeBase64(k, &enc);
    EXPECT_EQ(Run("mg " + enc + " b k v\r\n"), "VA 2 k" + enc + " b\r\nv" + std::to_string(i) + "\r\n");
    EXPECT_EQ(Run("me " + enc + " b\r\n").substr(0, 4 + enc.size()), "ME " + enc + " ");
    ++i;
  }
  // "a" stored as base64 is the text key "a".
  EXPECT_EQ(Run("get a\r\n"), "VALUE a 0 2\r\nv5\r\nEND\r\n");
  std::string enc;
  EncodeBase64(keys[2], &enc);
  EXPECT_EQ(Run("ma " + enc + " b k\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
  EXPECT_EQ(Run("md " + enc + " b k q\r\nmg " + enc + " b k v\r\n"), "EN k" + enc + " b\r\n");
  EXPECT_EQ(Run("mg Zm9vAP8 b v\r\n"), "CLIENT_ERROR error decoding key\r\n");
  // The store's own metadata key cannot be reached through b.
  std::string meta;
  EncodeBase64(kMetaKey, &meta);
  EXPECT_EQ(Run("mg " + meta + " b v\r\nms " + meta + " 1 b\r\nx\r\nmd " + meta + " b\r\n"),
            "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n"
            "CLIENT_ERROR bad command line format\r\n");
  EXPECT_EQ(Run("set x 0 0 1\r\ny\r\n"), "STORED\r\n");  // the store still works
}

TEST_F(Meta, MalformedRequestsKeepTheConnectionUsable) {
  const std::string in = "mg k v v\r\nms k 5 zz\r\nhello\r\nmg k O" + std::string(40, 'o') +
                         "\r\nma k MX\r\nms k 3\r\nabcXYmg " + std::string(251, 'k') +
                         " v\r\nmg k h\r\nms k 2 E5\r\nhi\r\nms ok 2\r\nhi\r\nmg ok v\r\nmn\r\n";
  const std::string out = Run(in);
  EXPECT_EQ(out,
            "CLIENT_ERROR duplicate flag\r\n"
            "CLIENT_ERROR invalid flag\r\n"
            "CLIENT_ERROR opaque token too long\r\n"
            "CLIENT_ERROR invalid mode for ma M token\r\n"
            "CLIENT_ERROR bad data chunk\r\n"
            "CLIENT_ERROR bad command line format\r\n"
            "CLIENT_ERROR flag h is not supported: wort serve keeps no hit-before data\r\n"
            "CLIENT_ERROR flag E is not supported: wort serve assigns cas values itself (they mark flush_all)\r\n"
            "HD\r\nVA 2\r\nhi\r\nMN\r\n");
}

TEST_F(Meta, TooLargeValue) {
  config.limits.max_item_size = 16;
  Run("ms big 1\r\nx\r\n");
  EXPECT_EQ(Run("ms big 17 q\r\n" + std::string(17, 'y') + "\r\nmg big\r\nmn\r\n"),
            "SERVER_ERROR object too large for cache\r\nEN\r\nMN\r\n");  // the old value is gone, as set
}

// Binary keys, the stale/won state and a quiet pipeline on every index kind the store opens
// (radix trees, B-trees, hash tables): keys with 0x00 and >= 0x80, prefix keys, a long key.
TEST(MetaAllKinds, BinaryKeysAndStateOnEveryKind) {
  int kinds = 0;
  for (const IndexKind* kind : IndexKinds()) {
    if (!kind->create || !kind->open) continue;
    test::TempPath path(std::string("meta-kind-") + kind->name);
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = kind->name;
    o.pool_size = 64ull << 20;
    o.crawler = false;
    std::unique_ptr<Store> st;
    if (!Store::Open(o, &st).ok()) continue;  // a kind without byte keys
    ++kinds;
    ServerStats stats;
    ServerConfig config;
    auto run = [&](std::string_view in) { return RunOn(*st, stats, config, in); };
    const std::string keys[] = {std::string("\0", 1), std::string("\0\0", 2), std::string("\0\x80", 2),
                                std::string("\xff", 1), std::string("\xff\xff\x00", 3), std::string(180, '\x81'),
                                std::string(180, '\x81') + '\0'};
    std::string sets, gets, want;
    for (size_t i = 0; i < std::size(keys); ++i) {
      std::string e;
      EncodeBase64(keys[i], &e);
      if (e.size() > kMaxKeyLength) continue;
      sets += "ms " + e + " 2 b q\r\nv" + std::to_string(i) + "\r\n";
      gets += "mg " + e + " b k v q\r\n";
      want += "VA 2 k" + e + " b\r\nv" + std::to_string(i) + "\r\n";
    }
    EXPECT_EQ(run(sets + "mn\r\n"), "MN\r\n") << kind->name;
    EXPECT_EQ(run(gets + "mg AQ== b v q\r\nmn\r\n"), want + "MN\r\n") << kind->name;
    EXPECT_EQ(run("ms s 1\r\nx\r\nmd s I\r\nmg s v\r\nmg s v\r\n"), "HD\r\nHD\r\nVA 1 X W\r\nx\r\nVA 1 Z X\r\nx\r\n")
        << kind->name;
    EXPECT_EQ(run("ma AA== b N0 J7 v\r\n"), "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
        << kind->name;
    EXPECT_EQ(run("md AA== b q\r\nma AA== b N0 J7 v\r\nma AA== b v\r\n"), "VA 1\r\n7\r\nVA 1\r\n8\r\n") << kind->name;
    EXPECT_EQ(st->curr_items(), std::size(keys) + 1) << kind->name;
    EXPECT_TRUE(st->Close().ok());
  }
  EXPECT_GE(kinds, 1);
  std::printf("meta commands checked on %d index kinds\n", kinds);
}

}  // namespace
}  // namespace wort::server
