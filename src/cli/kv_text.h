// Internal: the text form of a store's contents that `wort kv dump` writes and `wort kv load`
// reads (and the escaped form of keys and values on `wort kv`'s command line). Modelled on
// `mdb_dump -p` / `mdb_load -T`: any byte string round-trips.
//
//   VERSION=1                  the format's version (a later one is refused by this reader)
//   format=print
//   kind=woart                 the store's index kind (load creates a new store of it)
//   key_type=bytes             bytes or u64 (keys are then exactly 8 bytes)
//   HEADER=END
//    <key>                     one line per key and one per value, each starting with a space;
//    <value>                   bytes 0x20..0x7e stand for themselves except '\', which is
//    ...                       written "\\"; every other byte is '\' and two lowercase hex
//   DATA=END                   digits ("\00", "\0a", "\ff"). An empty value is a line of one space.
//
// Lines end with '\n'. A reader accepts upper- or lowercase hex and refuses everything else:
// a raw byte outside 0x20..0x7e, a '\' not followed by '\' or two hex digits, a missing or
// unknown header line, a key line without its value line, anything after DATA=END, no
// DATA=END (a truncated file). Its errors name the line number.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wort/key.h"
#include "wort/status.h"

namespace wort::cli {

// Appends the escaped form of `bytes` to *out.
void EscapeBytes(std::string_view bytes, std::string* out);
std::string Escape(std::string_view bytes);
// Decodes the escaped form. InvalidArgument naming the column (1-based) of the first bad byte.
Status Unescape(std::string_view text, std::string* out);

struct DumpHeader {
  int version = 1;
  std::string kind;
  KeyType key_type = KeyType::kBytes;
};

// The header lines (through HEADER=END, each ending '\n').
std::string DumpHeaderText(const DumpHeader& h);

// Reads a whole dump: the header and every pair, checking each key against the key type and the
// limits (kMaxKeyLen, kMaxValueLen). InvalidArgument "line N: ..." on the first problem; *pairs
// is only meaningful when OK.
Status ReadDump(std::istream& in, DumpHeader* header, std::vector<std::pair<std::string, std::string>>* pairs);

}  // namespace wort::cli
