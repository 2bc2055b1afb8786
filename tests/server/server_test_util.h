// Shared by the in-process server tests (parser + handler + store without the network).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "server/handler.h"
#include "server/protocol.h"
#include "server/store.h"
#include "wort/index.h"

namespace wort::server::testing_util {

// The index kind of the in-process tests: an ordered one when the build has one.
inline std::string Kind() {
  for (const char* k : {"wort", "woart", "artcow"})
    if (FindIndexKind(k)) return k;
  return DefaultIndexKind();
}

// A text connection without the network: whole requests in, reply bytes out (a close shows as
// the error line then "<close>"; a retrieval in pieces is resumed to its end).
inline std::string RunText(Handler& h, const Limits& limits, std::string_view in) {
  Parser p(limits);
  Request r;
  std::string out;
  while (!in.empty()) {
    const ParseResult pr = p.Parse(in, &r);
    switch (pr.outcome) {
      case Outcome::kNeedMore:
        ADD_FAILURE() << "incomplete input: " << in;
        return out;
      case Outcome::kClose:
        return out + std::string(pr.error) + (pr.error.empty() ? "" : "\r\n") + "<close>";
      case Outcome::kError:
        if (!pr.noreply) out += std::string(pr.error) + "\r\n";
        break;
      case Outcome::kSkipped:
        break;
      case Outcome::kRequest: {
        Handler::Step s = h.Execute(r, &out);
        while (s == Handler::Step::kMore) s = h.Resume(&out);
        break;
      }
    }
    in.remove_prefix(pr.consumed);
  }
  return out;
}

}  // namespace wort::server::testing_util
