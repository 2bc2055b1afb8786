// server/auth.h - authentication for `wort serve`: memcached's password file (`-Y authfile`), the
// text protocol's authentication exchange, and SASL PLAIN for the binary protocol.
//
// The password file holds one `user:password` line per user, as memcached's `-Y` file: the user
// ends at the first ':', the password at the end of the line ('\r' or '\n'); the password may
// contain ':' and spaces. Empty lines are skipped; a non-empty line without ':' or with an empty
// user makes Load fail with the line number (memcached refuses such a file too). Unlike memcached
// (which reads 8 entries and silently drops the rest) there is no limit on the number of users.
//
// Text protocol (memcached 1.6's "ascii auth"): while a connection is not authenticated, its
// input is read by TextAuthStep instead of the command parser. The only accepted request is
//     set <any key> <any flags> <any exptime> <bytes>\r\n<user> <password>\r\n
// answered `STORED` (the connection is now authenticated) or `CLIENT_ERROR authentication
// failure`. Anything else gets memcached's replies: a line that is not such a `set` gets
// `CLIENT_ERROR unauthenticated` (the connection stays open); <bytes> above 16384 gets
// `CLIENT_ERROR auth token too long` (memcached 1.6.18 waits for that many bytes; newer versions
// refuse, as here); a payload without its "\r\n" `CLIENT_ERROR bad command line termination`;
// one without a space `CLIENT_ERROR bad authentication token format`; 2048 bytes without a
// newline close the connection. (Checked side by side with memcached 1.6.18 -Y.)
//
// SASL PLAIN (RFC 4616) for the binary protocol: the payload is `[authzid] NUL user NUL password`;
// CheckSaslPlain accepts it when user and password match an entry (an authzid, if given, must
// equal the user).
//
// Timing: Check compares the offered user and password with every entry, each comparison in time
// that depends only on the stored entry's length (never on where the bytes first differ, nor on
// whether or which entry matched), so response times do not reveal a password byte by byte.
//
// Thread safety: an AuthFile is immutable after Load/Parse; Check may run on any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wort/status.h"

namespace wort::server {

// true iff a == b. Runs in time that depends on b.size() only (b is the secret): every byte of
// b is read whatever a holds, and a length mismatch is folded into the result, not returned early.
bool ConstantTimeEquals(std::string_view a, std::string_view secret);

class AuthFile {
 public:
  // Reads a password file. IOError if it cannot be read, InvalidArgument (naming the file and
  // line) if a line is malformed or the file holds no entry.
  static Status Load(const std::string& path, std::unique_ptr<AuthFile>* out);
  // The same from the file's text (`origin` names it in errors).
  static Status Parse(std::string_view text, std::string_view origin, std::unique_ptr<AuthFile>* out);

  // true iff (user, password) is an entry. Constant time as described above.
  bool Check(std::string_view user, std::string_view password) const;
  size_t size() const { return entries_.size(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::pair<std::string, std::string>> entries_;
};

// SASL PLAIN: "[authzid]\0user\0password". false when malformed or not an entry.
bool CheckSaslPlain(const AuthFile& auth, std::string_view payload);

// One step of the text protocol's authentication on the unparsed input of a connection.
struct TextAuthStep {
  enum class Outcome {
    kNeedMore,  // drop `consumed` bytes (possibly 0: the `set` line once seen), then read more
    kReply,     // consumed `consumed` bytes; send `reply` + "\r\n"; authenticated tells the result
    kClose,     // close the connection without a reply
  };
  Outcome outcome = Outcome::kNeedMore;
  size_t consumed = 0;
  std::string_view reply;
  bool authenticated = false;
};

// Largest <bytes> of the auth `set` (memcached's MAX_AUTH_REQ_LEN).
inline constexpr size_t kMaxAuthPayload = 16384;

// Reads one authentication request from `input` (the connection's unparsed bytes). `*pending`
// carries state between calls: after a valid `set` line was consumed it holds the payload size
// + 2 still expected (0 otherwise); start each connection with 0.
TextAuthStep TextAuth(const AuthFile& auth, std::string_view input, size_t* pending);

}  // namespace wort::server
