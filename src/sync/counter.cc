// sync/counter.cc - the shard assignment of ShardedCounter (counter.h).
#include "sync/counter.h"

namespace wort::sync::detail {
std::atomic<unsigned> g_counter_shard_next{0};
constinit __attribute__((tls_model("initial-exec"))) thread_local unsigned t_counter_shard = 0;
}  // namespace wort::sync::detail
