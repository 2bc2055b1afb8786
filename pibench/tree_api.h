// The interface PiBench (the persistent-index benchmark harness) loads from a tree library:
// `extern "C" tree_api* create_tree(const tree_options_t&)`. Declared here in the layout and
// virtual-function order of PiBench's default branch (include/tree_api.hpp on master): the
// virtual destructor, find, insert, update, remove, scan - and no bulk_load (that slot exists
// only on PiBench's bulk-loading branch; a plugin built with it first would be one slot off in
// the default branch, every call landing on the wrong function). tests/pibench/pibench_abi_test.cc
// calls the plugin through a tree_api declared independently of this file, in the default
// branch's order, and fails if the two differ. Semantics as PiBench documents them:
//   find     copies the value into value_out; false if absent
//   insert   false if the key exists
//   update   false if the key does not exist
//   remove   false if the key does not exist
//   scan     points values_out at a buffer the library owns (per thread, valid until the next
//            scan of that thread) holding up to scan_sz contiguous <key><value> records in
//            ascending key order, from the first key not below `key`; returns how many
#pragma once

#include <cstddef>
#include <string>

struct tree_options_t {
  size_t key_size = 8;
  size_t value_size = 8;
  std::string pool_path = "";
  size_t pool_size = 0;
  size_t num_threads = 1;
};

class tree_api {
 public:
  virtual ~tree_api() {}
  virtual bool find(const char* key, size_t sz, char* value_out) = 0;
  virtual bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool remove(const char* key, size_t key_sz) = 0;
  virtual int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) = 0;
};

extern "C" tree_api* create_tree(const tree_options_t& opt);
