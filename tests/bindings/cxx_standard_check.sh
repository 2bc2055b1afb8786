#!/bin/sh
# C++17 consumers of wort's headers (ctest cxx17_consumer):   cxx_standard_check.sh CXX INCLUDE_DIR...
#   - a C++ header of wort (wort/kv.h, wort/index.h, wort/pm.h) compiled as C++17 fails with the
#     #error that names C++20, and with no other message before it;
#   - the C API (wort.h) compiles as C++17 without a warning (-Wall -Wextra -Werror).
set -u
CXX=$1
shift
INC=""
for d in "$@"; do INC="$INC -I$d"; done
fail=0
for h in wort/kv.h wort/index.h wort/pm.h wort/key.h; do
  out=$(printf '#include <%s>\nint main() { return 0; }\n' "$h" | $CXX -std=c++17 -fsyntax-only $INC -x c++ - 2>&1)
  if [ $? -eq 0 ]; then
    echo "FAIL: $h compiled as C++17"; fail=1
  elif ! printf '%s\n' "$out" | grep -m1 'error' | grep -q "need C++20"; then
    echo "FAIL: $h as C++17: the first error does not name C++20:"; printf '%s\n' "$out" | head -5; fail=1
  else
    echo "ok: $h as C++17: $(printf '%s\n' "$out" | grep -m1 'need C++20')"
  fi
done
if ! out=$(printf '#include <wort.h>\nint main() { return wort_open(nullptr, nullptr) == 0; }\n' |
           $CXX -std=c++17 -Wall -Wextra -Werror -fsyntax-only $INC -x c++ - 2>&1); then
  echo "FAIL: wort.h as C++17:"; printf '%s\n' "$out" | head -5; fail=1
else
  echo "ok: wort.h compiles as C++17"
fi
exit $fail
