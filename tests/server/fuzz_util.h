// Shared by the protocol parser fuzz tests: random edits of a request.
#pragma once

#include <random>
#include <string>
#include <string_view>

namespace wort::server::fuzz {

// Applies 0-3 random edits to `in`: overwrite a byte with any value, insert a byte from
// `alphabet`, or erase a byte.
inline void MutateRequest(std::mt19937_64& rng, std::string_view alphabet, std::string* in) {
  const int muts = static_cast<int>(rng() % 4);
  for (int m = 0; m < muts; ++m) {
    const size_t pos = in->empty() ? 0 : rng() % in->size();
    switch (rng() % 3) {
      case 0:
        if (!in->empty()) (*in)[pos] = static_cast<char>(rng());
        break;
      case 1: in->insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      default:
        if (!in->empty()) in->erase(pos, 1);
        break;
    }
  }
}

}  // namespace wort::server::fuzz
