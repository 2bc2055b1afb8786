// Execution of memcached binary-protocol requests (see proto_bin.h for the wire format and
// handler.h for RunBinary). Semantics follow memcached 1.6's proto_bin.c:
//  * quiet opcodes suppress the success response only; errors are always sent, except the
//    miss of getq/getkq/gatq/gatkq, which is silent;
//  * every response echoes opcode and opaque; set/add/replace/append/prepend/incr/decr and hits
//    carry the item's cas; a hit carries the flags as 4 bytes of extras (touch: flags only;
//    getk/gatk: the key too);
//  * a cas other than 0 in a storage request makes it a compare-and-swap (add included, as in
//    memcached); in delete, append, prepend, incr and decr it is compared too;
//  * a failed add answers "key exists", a failed replace "not found", a failed append/prepend
//    "not stored";
//  * incr/decr on a missing key creates it with `initial` (the delta is not applied) unless the
//    exptime is 0xffffffff, which answers "not found";
//  * stat answers one packet per statistic (key = name, value = value) and an empty packet; an
//    unknown group answers "not found".
//  * authentication (ServerConfig::auth, `-Y authfile`): SASL PLAIN with the password file's
//    users ("sasl list mechs" answers "PLAIN"; "sasl auth" with mechanism PLAIN and the payload
//    "[authzid] NUL user NUL password" answers "Authenticated" or "auth error"; "sasl step"
//    always fails: PLAIN has one step). Until it succeeds, any other request but version and
//    the SASL ones is answered "auth error" and the connection is closed, as memcached -S does.
//    Without an authfile the SASL opcodes are "unknown command", as memcached without -S.
#include <charconv>

#include "server/auth.h"
#include "server/handler.h"

namespace wort::server {

namespace {

using bin::Status;

// An exptime of the binary protocol is an unsigned 32-bit number (never negative).
int64_t BinExptime(uint32_t e) { return ToAbsoluteExptime(static_cast<int64_t>(e), Store::Now()); }

}  // namespace

Handler::BinProgress Handler::RunBinary(std::string_view in, std::string* out) {
  BinProgress p;
  if (registered_) last_cmd_.store(CoarseNow(), std::memory_order_relaxed);
  for (;;) {
    if (out->size() >= kHighWater) {
      p.next = BinProgress::Next::kFlush;
      return p;
    }
    const bin::ParseResult r = bin_parser_.Parse(in.substr(p.consumed), &bin_req_);
    p.consumed += r.consumed;
    switch (r.action) {
      case bin::Action::kNeedMore:
        p.need = r.need;
        p.next = BinProgress::Next::kRead;
        return p;
      case bin::Action::kSkipped: continue;
      case bin::Action::kError: bin::AppendError(out, r.opcode, r.status, r.opaque); continue;
      case bin::Action::kClose:
        if (!r.silent) bin::AppendError(out, r.opcode, r.status, r.opaque);
        p.next = BinProgress::Next::kClose;
        return p;
      case bin::Action::kRequest:
        if (ExecuteBinary(bin_req_, out) == Step::kClose) {
          p.next = BinProgress::Next::kClose;
          return p;
        }
        continue;
    }
  }
}

namespace {
constexpr size_t kMaxSaslMechanism = 32;  // memcached's MAX_SASL_MECH_LEN
}  // namespace

Handler::Step Handler::ExecuteBinary(const bin::Request& req, std::string* out) {
  const auto relaxed = std::memory_order_relaxed;
  const uint8_t opcode = req.opcode;
  const uint32_t opaque = req.opaque;
  auto error = [&](Status s) { bin::AppendError(out, opcode, s, opaque); };
  auto ok = [&](uint64_t cas, std::string_view extras = {}, std::string_view value = {}) {
    if (!req.quiet) bin::AppendResponse(out, opcode, bin::kOk, opaque, cas, extras, {}, value);
  };
  const std::string_view key = req.key;
  const bool sasl_op = req.op == bin::kSaslListMechs || req.op == bin::kSaslAuth || req.op == bin::kSaslStep;
  if (config_.auth != nullptr && !sasl_done_ && !sasl_op && req.op != bin::kVersion) {
    error(bin::kAuthError);
    return Step::kClose;
  }
  if (!key.empty() && key == kMetaKey) {  // the store's own metadata entry
    error(bin::kInvalid);
    return Step::kDone;
  }
  switch (req.op) {
    case bin::kGet:
    case bin::kGetK:
    case bin::kTouch:
    case bin::kGat:
    case bin::kGatK: {
      const bool touch = req.op == bin::kTouch || req.op == bin::kGat || req.op == bin::kGatK;
      const bool with_key = req.op == bin::kGetK || req.op == bin::kGatK;
      const bool with_value = req.op != bin::kTouch;
      auto emit = [&](const ItemView& it) {
        char flags[4];
        bin::PutU32(flags, it.flags);
        bin::AppendResponse(out, opcode, bin::kOk, opaque, it.cas, std::string_view(flags, 4), with_key ? key : "",
                            with_value ? it.data : "");
      };
      bool hit;
      if (touch) {
        stats_.Local().cmd_touch.fetch_add(1, relaxed);
        hit = store_.GetAndTouch(key, BinExptime(req.ExtraU32(0)), emit);
        (hit ? stats_.Local().touch_hits : stats_.Local().touch_misses).fetch_add(1, relaxed);
      } else {
        stats_.Local().cmd_get.fetch_add(1, relaxed);
        bool expired = false;
        hit = store_.Get(key, emit, &expired);
        if (!hit && expired) stats_.Local().get_expired.fetch_add(1, relaxed);
        (hit ? stats_.Local().get_hits : stats_.Local().get_misses).fetch_add(1, relaxed);
      }
      if (!hit && !req.quiet) {
        if (with_key) bin::AppendResponse(out, opcode, bin::kKeyNotFound, opaque, 0, {}, key, {});
        else error(bin::kKeyNotFound);
      }
      return Step::kDone;
    }

    case bin::kSet:
    case bin::kAdd:
    case bin::kReplace:
    case bin::kAppend:
    case bin::kPrepend: {
      const bool append = req.op == bin::kAppend || req.op == bin::kPrepend;
      StoreMode mode = StoreMode::kSet;
      switch (req.op) {
        case bin::kAdd: mode = StoreMode::kAdd; break;
        case bin::kReplace: mode = StoreMode::kReplace; break;
        case bin::kAppend: mode = StoreMode::kAppend; break;
        case bin::kPrepend: mode = StoreMode::kPrepend; break;
        default: break;
      }
      uint64_t cas = 0;
      // A cas other than 0 makes set/add/replace a compare-and-swap (counted as one); append
      // and prepend compare it without being one.
      const Result r = StoreCommand(key, req.op == bin::kSet, !append && req.cas != 0, req.too_large, [&] {
        if (append) {
          const Result a = req.cas == 0 ? store_.StoreItem(mode, key, 0, 0, req.value, 0, &cas)
                                        : store_.MetaSet(mode, key, 0, 0, req.value, true, req.cas, false, &cas);
          return a == Result::kNotFound ? Result::kNotStored : a;
        }
        return store_.StoreItem(req.cas != 0 ? StoreMode::kCas : mode, key, req.ExtraU32(0),
                                BinExptime(req.ExtraU32(4)), req.value, req.cas, &cas);
      });
      switch (r) {
        case Result::kStored: ok(cas); break;
        case Result::kExists: error(bin::kKeyExists); break;
        case Result::kNotFound: error(bin::kKeyNotFound); break;
        case Result::kNotStored:
          error(req.op == bin::kAdd ? bin::kKeyExists : req.op == bin::kReplace ? bin::kKeyNotFound : bin::kNotStored);
          break;
        case Result::kTooLarge: error(bin::kTooLarge); break;
        case Result::kNoMemory: error(bin::kNoMemory); break;
        default: error(bin::kNotStored); break;
      }
      return Step::kDone;
    }

    case bin::kDelete: {
      const Result r = DeleteCommand(key, req.cas);
      if (r == Result::kDeleted) ok(0);
      else if (r == Result::kExists) error(bin::kKeyExists);
      else if (r == Result::kNoMemory) error(bin::kNoMemory);
      else error(bin::kKeyNotFound);
      return Step::kDone;
    }

    case bin::kIncrement:
    case bin::kDecrement: {
      Store::ArithArgs a;
      a.incr = req.op == bin::kIncrement;
      a.delta = req.ExtraU64(0);
      a.initial = req.ExtraU64(8);
      const uint32_t exp = req.ExtraU32(16);
      a.vivify = exp != 0xffffffffu;
      a.vivify_exptime = a.vivify ? BinExptime(exp) : 0;
      a.compare = req.cas != 0;
      a.cas = req.cas;
      Store::ArithOut res;
      const Result r = store_.MetaArith(key, a, &res);
      CountArith(a.incr, r);
      switch (r) {
        case Result::kStored: {
          char v[8];
          bin::PutU64(v, res.value);
          ok(res.cas, {}, std::string_view(v, 8));
          break;
        }
        case Result::kNotFound: error(bin::kKeyNotFound); break;
        case Result::kExists: error(bin::kKeyExists); break;
        case Result::kNonNumeric: error(bin::kNonNumeric); break;
        case Result::kNoMemory: error(bin::kNoMemory); break;
        default: error(bin::kNotStored); break;
      }
      return Step::kDone;
    }

    case bin::kFlush: {
      stats_.Local().cmd_flush.fetch_add(1, relaxed);
      const uint32_t delay = req.extras.size() == 4 ? req.ExtraU32(0) : 0;
      store_.FlushAll(delay > 0 ? BinExptime(delay) : 0);
      ok(0);
      return Step::kDone;
    }

    case bin::kNoop:
      ok(0);
      return Step::kDone;

    case bin::kVersion:
      ok(0, {}, kVersionString);
      return Step::kDone;

    case bin::kVerbosity:
      stats_.verbosity.store(req.ExtraU32(0), relaxed);
      ok(0);
      return Step::kDone;

    case bin::kQuit:
      ok(0);  // quitq: nothing
      return Step::kClose;

    case bin::kStat: {
      // The text protocol's reply, one packet per "STAT <name> <value>" line.
      std::string text;
      Stats(key, &text);
      if (text == "ERROR\r\n") {
        error(bin::kKeyNotFound);
        return Step::kDone;
      }
      std::string_view rest = text;
      while (!rest.empty()) {
        const size_t eol = rest.find("\r\n");
        std::string_view line = rest.substr(0, eol);
        rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 2);
        if (line.substr(0, 5) != "STAT ") continue;  // END, RESET
        line.remove_prefix(5);
        const size_t sp = line.find(' ');
        bin::AppendResponse(out, opcode, bin::kOk, opaque, 0, {}, line.substr(0, sp),
                            sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1));
      }
      bin::AppendResponse(out, opcode, bin::kOk, opaque, 0, {}, {}, {});
      return Step::kDone;
    }

    case bin::kSaslListMechs:
    case bin::kSaslAuth:
    case bin::kSaslStep: {
      if (config_.auth == nullptr) {  // no authentication configured: as memcached without -S
        error(bin::kUnknownCommand);
        return Step::kDone;
      }
      if (req.op == bin::kSaslListMechs) {
        bin::AppendResponse(out, opcode, bin::kOk, opaque, 0, {}, {}, "PLAIN");
        return Step::kDone;
      }
      if (key.size() > kMaxSaslMechanism) {  // memcached: invalid arguments (0x04)
        error(bin::kInvalid);
        return Step::kDone;
      }
      stats_.Local().auth_cmds.fetch_add(1, relaxed);
      const bool ok = req.op == bin::kSaslAuth && key == "PLAIN" && !req.too_large &&
                      CheckSaslPlain(*config_.auth, req.value);
      if (!ok) {
        stats_.Local().auth_errors.fetch_add(1, relaxed);
        error(bin::kAuthError);
        return Step::kDone;
      }
      sasl_done_ = true;
      bin::AppendResponse(out, opcode, bin::kOk, opaque, 0, {}, {}, "Authenticated");
      return Step::kDone;
    }

    default:
      error(bin::kUnknownCommand);
      return Step::kDone;
  }
}

}  // namespace wort::server
