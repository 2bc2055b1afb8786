// server/auth.h alone: the password file's format and errors, the constant-time comparison, the
// text protocol's authentication exchange (every reply memcached gives, input cut at every byte)
// and SASL PLAIN.
#include "server/auth.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "common/test_util.h"

namespace wort::server {
namespace {

std::unique_ptr<AuthFile> Make(std::string_view text) {
  std::unique_ptr<AuthFile> a;
  Status s = AuthFile::Parse(text, "test", &a);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return a;
}

TEST(Auth, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secreT", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secre", "secret"));   // prefix
  EXPECT_FALSE(ConstantTimeEquals("secrets", "secret"));  // longer
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals("x", ""));
  // Every byte value, 0x00 and >= 0x80 included.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_TRUE(ConstantTimeEquals(all, all));
  for (size_t i = 0; i < all.size(); ++i) {
    std::string other = all;
    other[i] = static_cast<char>(other[i] ^ 1);
    EXPECT_FALSE(ConstantTimeEquals(other, all)) << i;
    // A secret with a NUL must not be matched by a shorter string ending before it.
    EXPECT_FALSE(ConstantTimeEquals(std::string_view(all).substr(0, i), all)) << i;
  }
}

TEST(Auth, FileFormat) {
  auto a = Make("alice:pw1\nbob:with:colons and spaces\r\n\ncarol:\n  dave:x");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->size(), 4u);
  EXPECT_TRUE(a->Check("alice", "pw1"));
  EXPECT_FALSE(a->Check("alice", "pw1\r"));
  EXPECT_FALSE(a->Check("alice", "pw"));
  EXPECT_FALSE(a->Check("alice", "pw12"));
  EXPECT_FALSE(a->Check("bob", "pw1"));
  EXPECT_TRUE(a->Check("bob", "with:colons and spaces"));
  EXPECT_TRUE(a->Check("carol", ""));  // empty password, as memcached allows
  EXPECT_TRUE(a->Check("  dave", "x"));
  EXPECT_FALSE(a->Check("dave", "x"));
  EXPECT_FALSE(a->Check("", ""));
  EXPECT_FALSE(a->Check("mallory", "pw1"));
  // More than memcached's 8 entries: none dropped.
  std::string many;
  for (int i = 0; i < 20; ++i) many += test::Cat("u", std::to_string(i), ":p", std::to_string(i), "\n");
  auto m = Make(many);
  EXPECT_EQ(m->size(), 20u);
  EXPECT_TRUE(m->Check("u19", "p19"));
}

TEST(Auth, MalformedFilesAreRefused) {
  std::unique_ptr<AuthFile> a;
  Status s = AuthFile::Parse("alice:pw\nbob\n", "f", &a);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("line 2"), std::string::npos) << s.ToString();
  EXPECT_FALSE(AuthFile::Parse(":pw\n", "f", &a).ok());
  EXPECT_FALSE(AuthFile::Parse("", "f", &a).ok());
  EXPECT_FALSE(AuthFile::Parse("\n\n", "f", &a).ok());
  EXPECT_FALSE(AuthFile::Load("/nonexistent/wort-auth", &a).ok());
  test::TempPath p("auth");
  { std::ofstream(p.str()) << "u:p\n"; }
  ASSERT_TRUE(AuthFile::Load(p.str(), &a).ok());
  EXPECT_TRUE(a->Check("u", "p"));
  EXPECT_EQ(a->path(), p.str());
}

// Runs the whole exchange on `input` fed in one piece; returns the replies joined by '|' and
// "<close>" for a close.
std::string Exchange(const AuthFile& a, std::string input, bool* authed = nullptr) {
  std::string out;
  size_t pending = 0;
  while (!input.empty()) {
    TextAuthStep st = TextAuth(a, input, &pending);
    input.erase(0, st.consumed);
    if (st.outcome == TextAuthStep::Outcome::kClose) return out + "<close>";
    if (st.outcome == TextAuthStep::Outcome::kNeedMore) return out + "<more>";
    out += std::string(st.reply) + "|";
    if (st.authenticated) {
      if (authed) *authed = true;
      return out;
    }
  }
  return out;
}

TEST(Auth, TextExchangeAsMemcached) {
  auto a = Make("alice:s3cret\n");
  bool ok = false;
  EXPECT_EQ(Exchange(*a, "set x 0 0 12\r\nalice s3cret\r\n", &ok), "STORED|");
  EXPECT_TRUE(ok);
  EXPECT_EQ(Exchange(*a, "set anykey 5 100 12\r\nalice s3cret\r\n"), "STORED|");  // key, flags, exptime ignored
  EXPECT_EQ(Exchange(*a, "set x 0 0 12\r\nalice s3creT\r\n"), "CLIENT_ERROR authentication failure|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 11\r\nalice s3cre\r\n"), "CLIENT_ERROR authentication failure|");
  EXPECT_EQ(Exchange(*a, "get foo\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "delete foo\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "set x 0 0\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 abc\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 -1\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 16385\r\n"), "CLIENT_ERROR auth token too long|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 12\r\nalice s3cretXX"), "CLIENT_ERROR bad command line termination|");
  EXPECT_EQ(Exchange(*a, "set x 0 0 12\r\nalice_s3cret\r\n"), "CLIENT_ERROR bad authentication token format|");
  EXPECT_EQ(Exchange(*a, "get\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "setx a 0 0 12\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, "\r\n"), "CLIENT_ERROR unauthenticated|");
  EXPECT_EQ(Exchange(*a, std::string(3000, 'x')), "<close>");
  EXPECT_EQ(Exchange(*a, std::string(2000, 'x')), "<more>");
  // A failed attempt leaves the connection usable for the next one.
  ok = false;
  EXPECT_EQ(Exchange(*a, "get foo\r\nset x 0 0 5\r\na b c\r\nset x 0 0 12\r\nalice s3cret\r\n", &ok),
            "CLIENT_ERROR unauthenticated|CLIENT_ERROR authentication failure|STORED|");
  EXPECT_TRUE(ok);
}

// The request cut at every byte: each prefix asks for more, the whole gives one reply.
TEST(Auth, TextExchangeCutAtEveryByte) {
  auto a = Make("alice:s3cret\n");
  const std::string req = "set x 0 0 12\r\nalice s3cret\r\n";
  for (size_t cut = 1; cut < req.size(); ++cut) {
    size_t pending = 0;
    std::string buf = req.substr(0, cut);
    TextAuthStep st = TextAuth(*a, buf, &pending);
    ASSERT_EQ(st.outcome, TextAuthStep::Outcome::kNeedMore) << cut;
    buf.erase(0, st.consumed);
    buf += req.substr(cut);
    st = TextAuth(*a, buf, &pending);
    ASSERT_EQ(st.outcome, TextAuthStep::Outcome::kReply) << cut;
    EXPECT_EQ(st.reply, "STORED") << cut;
    EXPECT_TRUE(st.authenticated);
    EXPECT_EQ(st.consumed, buf.size()) << cut;
  }
}

// Random inputs (mutations of a valid request and random bytes): every step consumes at most
// its input, a kNeedMore comes only with an incomplete line or payload, a reply always makes
// progress.
TEST(Auth, TextExchangeRandomInputs) {
  auto a = Make("alice:s3cret\n");
  std::mt19937_64 rng(17);
  const std::string good = "set x 0 0 12\r\nalice s3cret\r\n";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string in = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (in.size() + 1);
      switch (rng() % 3) {
        case 0: in.insert(pos, 1, static_cast<char>(rng())); break;
        case 1: if (pos < in.size()) in.erase(pos, 1); break;
        default: if (pos < in.size()) in[pos] = static_cast<char>(rng()); break;
      }
    }
    if (iter % 10 == 0) {
      in.clear();
      for (size_t n = rng() % 64; n > 0; --n) in.push_back(static_cast<char>(rng() % 4 == 0 ? '\n' : rng()));
    }
    size_t pending = 0;
    std::string_view rest = in;
    for (int steps = 0; steps < 1000; ++steps) {
      const TextAuthStep st = TextAuth(*a, rest, &pending);
      ASSERT_LE(st.consumed, rest.size()) << iter;
      rest.remove_prefix(st.consumed);
      if (st.outcome == TextAuthStep::Outcome::kNeedMore) {
        // Waiting is right only when the input really is incomplete.
        if (pending == 0) EXPECT_EQ(rest.find('\n'), std::string_view::npos) << iter;
        else EXPECT_LT(rest.size(), pending) << iter;
      }
      if (st.outcome != TextAuthStep::Outcome::kReply) break;
      ASSERT_GT(st.consumed, 0u) << iter;  // a reply always makes progress
      ASSERT_FALSE(st.reply.empty());
      if (st.authenticated) {
        EXPECT_EQ(st.reply, "STORED");
        break;
      }
    }
  }
}

TEST(Auth, SaslPlain) {
  auto a = Make("alice:s3cret\n");
  using namespace std::string_literals;
  EXPECT_TRUE(CheckSaslPlain(*a, "\0alice\0s3cret"s));
  EXPECT_TRUE(CheckSaslPlain(*a, "alice\0alice\0s3cret"s));
  EXPECT_FALSE(CheckSaslPlain(*a, "bob\0alice\0s3cret"s));
  EXPECT_FALSE(CheckSaslPlain(*a, "\0alice\0s3cre"s));
  EXPECT_FALSE(CheckSaslPlain(*a, "\0alice\0s3cret\0"s));
  EXPECT_FALSE(CheckSaslPlain(*a, "\0alice"s));
  EXPECT_FALSE(CheckSaslPlain(*a, "alice s3cret"));
  EXPECT_FALSE(CheckSaslPlain(*a, ""));
  EXPECT_FALSE(CheckSaslPlain(*a, "\0\0s3cret"s));
}

}  // namespace
}  // namespace wort::server
