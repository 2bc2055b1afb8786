// Per-kind exploration plans and the coverage and mutation gates (crash/plans.h).
#include "crash/plans.h"

#include <fmt/core.h>

#include <chrono>
#include <cstring>

#include "crash/server_explorer.h"
#include "index/kind_ids.h"
#include "wort/index.h"

namespace wort::crash {
namespace {

using bench::Dist;

bool IsHash(const std::string& k) {
  for (const char* h : {"cceh", "cceh-cow", "linp", "cuck", "bch", "levl", "path"})
    if (k == h) return true;
  return false;
}

// The kinds whose plans run in the torn-line model. Every kind that passes it could
// (doc/crash-model.md: WORT, WOART, ART+CoW, B3-tree, FPTree, NV-Tree, wB+Tree, wB+Tree-slot);
// only those whose persists it alone catches do, because it multiplies the images of the
// mutation gate's focus pass (no two word subsets of a dirty line are the same image): wB+Tree's
// full gate went from under a minute to over ten.
bool TornSafe(const std::string& k) { return k == "woart" || k == "fptree"; }

struct Shape {
  Dist dist;
  int key_type;  // 0: from the distribution, 1: bytes (an integer distribution as 8-byte strings)
};

}  // namespace

std::vector<std::string> GateKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id)) v.push_back(k->name);
  v.push_back(kServerGateKind);
  return v;
}

namespace {
// The server store's plan as gate steps: each runs RunServerExplorer with the step's settings and
// the ExplorerConfig the gate hands it (the drop, the operations explored, the images).
std::vector<PlanStep> ServerGatePlan(const std::string& dir) {
  std::vector<PlanStep> plan;
  for (const ServerExplorerConfig& sc : ServerPlan(dir)) {
    PlanStep st;
    st.what = sc.evict ? "server store: sets that evict (LRU) in a small pool"
              : sc.explore.novel_only ? "server store: every command's write path, values 1 byte to the item limit"
                                      : "server store: every operation explored";
    st.cfg = sc.explore;
    st.run = [sc](const ExplorerConfig& c, ExplorerResult* r) {
      ServerExplorerConfig s = sc;
      s.explore = c;
      return RunServerExplorer(s, r);
    };
    plan.push_back(std::move(st));
  }
  return plan;
}
}  // namespace

std::vector<PlanStep> KindPlan(const std::string& kind, const std::string& dir) {
  if (kind == kServerGateKind) return ServerGatePlan(dir);
  ExplorerConfig base;
  base.index = kind;
  base.dir = dir;
  base.novel_only = true;
  base.explore_recovery = true;
  base.explore_lifecycle = true;
  base.pool_initial_size = 1;  // one chunk: every new chunk grows the pool (Pool::Grow)
  base.subsets = 1;
  base.max_points = 32;
  base.max_violations = 3;
  base.seed = 15;
  // A recovery must persist what it writes before it returns (ExplorerConfig::recovery_persists),
  // for every kind: the operations after it build on its writes and may reuse what it freed, and
  // the explorer does not crash after those operations. It catches FPTree's clear of its split
  // log, the rebuild's unlink of an empty leaf (FPTree, NV-Tree), the B3-tree's and FAST&FAIR's
  // repaired root word, CCEH's last repaired directory line.
  base.recovery_persists = true;
  // An operation, too, returns with what it wrote persistent (ExplorerConfig::op_persists): a
  // word left dirty that still names a valid old block reads correctly until that block is
  // freed and reused, maybe many operations later, which the crash points seldom draw (the
  // B3-tree's merge word in Replace). Every kind but ROART, whose nodes hold their version lock
  // word (include/wort/sync.h): every write changes it, and it is never persisted by design (a
  // restart resets it by the pool generation).
  base.op_persists = kind != "roart";
  // WOART and FPTree rely only on 8-byte atomic stores and persist ordering (not on two stores to
  // one cache line reaching memory together): their plans run in the torn-line model
  // (ExplorerConfig::torn_lines), where a persist whose line a later persist of the same
  // operation writes back is still needed, and caught (FPTree's split-log and split-commit words,
  // WOART's W16 key byte).
  base.torn_lines = TornSafe(kind);
  if (IsHash(kind)) {
    // Small tables: resizes, segment splits and directory doubling within a few dozen inserts.
    base.index_options.hash_capacity = 16;
    if (kind == "cceh" || kind == "cceh-cow") base.index_options.cceh_segment_bytes = 256;
  }
  // Sizes: enough inserts from a near-empty index for the deepest structural change of the
  // kind (B-trees: splits of inner nodes and a root growth above them need a few thousand keys
  // at fanouts of 27..64); then deletes down to a handful (shrink, merge, chunk release).
  const bool btree = kind == "fastfair" || kind == "b3tree" || kind == "fptree" || kind == "nvtree" ||
                     kind == "wbtree" || kind == "wbtree-slot";
  const size_t grow = btree ? 2500 : 1000;

  std::vector<PlanStep> plan;
  // The targeted steps below: dense keys, `keys` loaded first, `explore` operations of one type.
  auto dense = [&base](uint64_t seed, size_t keys, size_t explore, OpType op) {
    ExplorerConfig c = base;
    c.dist = Dist::kDense;
    c.seed = seed;
    c.keys = keys;
    c.explore_ops = explore;
    c.ops = {op};
    return c;
  };
  // Creation over reused space (ExplorerConfig::dirty_free_space): the first blocks of each size
  // class up to 1 KiB (and of 2 and 4 KiB) were another index's, persistently non-zero, so a
  // creation that relies on fresh pool space being zero (an AllocZeroed block is zeroed in the
  // cache only) is caught: wB+Tree's first leaf, CCEH's segments, FPTree's and NV-Tree's first
  // leaf. First in the plan, because the mutation gate reruns the step that first met a site;
  // the creation, 8 inserts and the close are explored (a site a creation shares with the
  // inserts, as ROART's one flush site, is judged on those inserts), no more: that space holds a
  // chunk of every class (an 18 MiB pool), which makes every crash image of a longer step slow
  // (and the pool then seldom grows: Pool::Grow is met by the other steps).
  {
    ExplorerConfig c = dense(1, 2, 8, OpType::kInsert);
    c.dirty_free_space = true;
    plan.push_back({"creation over reused (non-zero) free space, 8 inserts", c});
  }
  // 0. B3-tree: a two-leaf tree deleted to empty - the merge of the level's first leaf (no left
  // neighbour) with its sibling, both direct children of the root's one BST node, whose single
  // word names the merged page with no persist before it (only the merge's fence orders the
  // new page first). First in the plan: the mutation gate reruns the step that first met a site.
  if (kind == "b3tree") {
    // 0a. A 150-key tree (a root over ~8 leaves) deleted to empty, with --read-only-first (the
    // readers' view of each crash state, before recovery): a merge's or a redistribution's COMMIT
    // word that never reaches memory leaves its parent naming freed pages, which the next page
    // allocation reuses; the readers then see another page's contents (b3tree.cc Replace).
    // Before the two-leaf step, which meets those words first otherwise and does not catch them.
    ExplorerConfig r = dense(1, 150, 187, OpType::kDelete);
    r.read_only_first = true;
    plan.push_back({"dense, 150 keys deleted to empty, read-only view first: merge and redistribution COMMIT words", r});
    plan.push_back({"dense, two leaves deleted to empty: the first leaf's merge (no left neighbour)",
                    dense(1, 40, 40, OpType::kDelete)});
    // 0c. The dense deletes of step 3 below (seed 15, a three-level tree), up to its operation
    // #854, with the read-only view first; the mutation gate's focused pass explores every
    // meeting of the site up to there (judge_focus_ops). The redistribution's word naming the
    // new left page (Replace: SetRef(w[0], h[0]) when the left page heads its level, l absent)
    // is left dirty at each meeting when dropped, and keeps naming an old left page that is
    // freed and reused: at #854 the readers of the "nothing" image lose most keys. The steps
    // before this one meet that site first and do not draw the case.
    ExplorerConfig d = dense(base.seed, grow / 2, 855, OpType::kDelete);
    d.read_only_first = true;
    d.insert_keys = grow / 2 + grow / 8 + 8;  // step 3's key universe (its default: explore + 8)
    plan.push_back({"dense, 1250 keys, 855 deletes, read-only view first: a redistribution's left word left dirty "
                    "across meetings (Replace, l absent)",
                    d, /*judge_focus_ops=*/100});
    // 0d. A merge's COMMIT word whose old page is handed out again within a few operations: the
    // merge of a level's first page with a deeper right sibling (Replace: w[1] = h[0], l absent)
    // meets its site at operation #165 of these sparse deletes (a 200-key tree, seed 4), and the
    // next page allocation (#166's merge or redistribution) reuses the old first page while w[1]'s
    // line, when dropped, is still dirty: the readers of the "nothing" image follow the level's
    // leftmost path into that page. Every operation from #160 on is explored (not only those that
    // meet a new site), so the gate's first pass, which explores the meeting and the 3 operations
    // after it, sees the reuse. The first step to meet the site.
    // A delete run whose operations from..to-1 are all explored, read-only view first;
    // insert_keys: the universe of the longer run (explore + 8) that drew the case.
    auto delete_window = [&](Dist dist, uint64_t seed, size_t keys, size_t insert_keys, size_t from, size_t to) {
      ExplorerConfig c = base;
      c.dist = dist;
      c.seed = seed;
      c.keys = keys;
      c.insert_keys = insert_keys;
      c.ops = {OpType::kDelete};
      c.explore_from = from;
      c.explore_ops = to;
      c.novel_only = false;
      c.read_only_first = true;
      return c;
    };
    const ExplorerConfig m = delete_window(Dist::kSparse, 4, 200, 233, 160, 175);
    plan.push_back({"sparse, 200 keys deleted, operations #160-174 all explored, read-only view first: a merge's "
                    "first-page word (l absent) whose old page the next merge reuses",
                    m});
    // 0e. The same for a merge whose right page is x's direct child: lca_word (Replace:
    // SetRef(lca_word, x.left)) meets its site at operation #399 of these word deletes (a
    // 400-key tree, seed 3); dropped, it leaves the parent naming x, whose right word names l, a
    // page the merge at #404 replaces and frees and hands out again while that line is still
    // dirty: a reader of the "nothing" image at #404 misses its key. The gate's first pass here
    // explores 8 operations from the meeting (PlanStep::judge_first_ops).
    const ExplorerConfig e = delete_window(Dist::kWords, 3, 400, 458, 395, 410);
    plan.push_back({"words, 400 keys deleted, operations #395-409 all explored, read-only view first: a merge's "
                    "LCA word (right page x's child) whose old page l a later merge reuses",
                    e, /*judge_focus_ops=*/0, /*judge_first_ops=*/8});
  }
  // 0. FAST&FAIR: a small tree (100 dense keys, a root over a few leaves) deleted to empty, so
  // that among the first redistributions some move entries from the right node into an
  // underflowing left one (j >= L's count): then no later persist of the operation writes L's
  // line 0 back, and only the persist of L's new sibling word orders R' into the chain before R
  // is retired. First in the plan, for the same reason as B3-tree's step 0.
  if (kind == "fastfair") {
    plan.push_back({"dense, a small tree deleted to empty: redistributions into an underflowing left node",
                    dense(1, 100, 125, OpType::kDelete)});
  }
  // 0. FPTree: dense inserts from empty into a small universe (158 keys), where the head leaf
  // splits twice in a row: the second split's log then first holds the previous split's log_new,
  // still the leaf's next, and a torn write-back of the root block's line (log_leaf new, log_new
  // old) makes recovery roll a split forward that never began. Seed 4: the torn subsets of the
  // mutation gate's focus pass draw that image within its first meetings of the split.
  if (kind == "fptree") {
    plan.push_back({"dense inserts from empty, small universe: a leaf split twice in a row (the split log's stale log_new)",
                    dense(4, 2, 150, OpType::kInsert)});
  }
  const Shape shapes[] = {{Dist::kDense, 0},   {Dist::kSparse, 0}, {Dist::kClustered, 0},
                          {Dist::kStrings, 0}, {Dist::kWords, 0},  {Dist::kSparse, 1}};
  uint64_t seed = base.seed;
  for (const Shape& sh : shapes) {
    ExplorerConfig c = base;
    c.dist = sh.dist;
    c.seed = seed++;
    if (sh.key_type == 1) {
      c.key_type_from_dist = false;
      c.index_options.key_type = KeyType::kBytes;
    }
    const std::string name = fmt::format("{}{}", bench::DistName(sh.dist), sh.key_type == 1 ? "/bytes" : "");
    // 1. Growth: inserts only, from a near-empty index.
    c.keys = 2;
    c.explore_ops = grow;
    c.ops = {OpType::kInsert};
    plan.push_back({name + " inserts from empty: node growth, splits at every level, root growth, resize, new chunks", c});
    // 2. A mix on a full index: upserts (copy-on-write, in-place updates), misses, deletes.
    c.keys = grow / 2;
    c.explore_ops = 300;
    c.ops = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
    plan.push_back({name + " mixed: updates, copy-on-write, misses", c});
    // 3. Shrink: deletes down to a few keys (node shrink, path merge, emptied nodes, chunk release).
    c.keys = grow / 2;
    c.explore_ops = grow / 2 + grow / 8;  // past empty: about one in ten deletes is a miss
    c.ops = {OpType::kDelete};
    plan.push_back({name + " deletes to empty: shrink, merge, frees, chunk release", c});
    // 4. Churn on a tiny index (two shapes): tombstones and their clean-up (defragmentation of a
    // root leaf, tombstone reuse), repeated grow/shrink of one node.
    if (sh.dist == Dist::kDense || sh.dist == Dist::kStrings) {
      c.keys = 12;
      c.explore_ops = 400;
      c.ops = {OpType::kInsert, OpType::kDelete};
      plan.push_back({name + " churn on a tiny index: tombstones, defragmentation, grow/shrink of one node", c});
    }
  }
  // 5. Hash tables, u64 keys chosen by their hash word (ExplorerConfig::hash_special_keys,
  // hash_skew_keys): the keys whose mixed words are the reserved words 0 and 1 (the root's
  // special slots: insert, upsert, remove) in a tiny universe where they come up often.
  if (IsHash(kind)) {
    ExplorerConfig c = base;
    c.dist = Dist::kSparse;
    c.seed = seed++;
    c.keys = 2;
    c.insert_keys = 2;
    c.hash_special_keys = true;
    c.explore_ops = 120;
    c.ops = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
    plan.push_back({"sparse, special-slot keys (mixed word 0 and 1): insert, upsert, remove in the root block", c});
  }
  // 6. CCEH: a directory grown deep in one region (skewed keys at setup) while the rest stays
  // shallow; then random inserts split the shallow segments, whose directory runs span several
  // cache lines (persisted right to left, line by line: a crash cuts the run, recovery repairs it).
  if (kind == "cceh" || kind == "cceh-cow") {
    ExplorerConfig c = base;
    c.dist = Dist::kSparse;
    c.seed = seed++;
    c.keys = 2;
    c.hash_skew_keys = 200;
    c.explore_ops = 300;
    c.ops = {OpType::kInsert};
    plan.push_back({"sparse, skewed directory: multi-line directory runs, cut by a crash and repaired", c});
  }
  // 7. Static hash tables: a table created large enough to be a multi-chunk (large) allocation,
  // then resized: the allocator's large-run paths.
  if (IsHash(kind) && kind != "cceh" && kind != "cceh-cow") {
    ExplorerConfig c = base;
    c.dist = Dist::kSparse;
    c.seed = seed++;
    c.index_options.hash_capacity = 40000;
    c.keys = 8;
    c.explore_ops = 40;
    c.ops = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
    plan.push_back({"sparse, large table: a multi-chunk allocation at creation", c});
  }
  // 7b. CCEH's directory variants (ExplorerConfig::cceh_variant, index/hash/cceh.h "Variants"):
  // CCEH(LSB) and EXTH(LSB) grown from one 256-byte segment/bucket by byte-string keys (the full
  // byte range: edge keys) with removes and upserts among the inserts - splits whose directory
  // runs are spread over the directory (one line per entry), doublings by copy, EXTH's clear of
  // the moved records; then a directory grown deep in one region by skewed u64 keys, whose
  // shallow segments' runs span many lines when they split (cut, then repaired by recovery).
  if (kind == "cceh") {
    for (const char* v : {"lsb", "exth"}) {
      ExplorerConfig c = base;
      c.cceh_variant = v;
      c.dist = Dist::kStrings;
      c.seed = seed++;
      c.keys = 2;
      c.explore_ops = 250;
      c.ops = {OpType::kInsert, OpType::kInsert, OpType::kDelete, OpType::kUpsert};
      plan.push_back({fmt::format("{}: strings from one segment: spread-run splits, doublings by copy", v), c});
      c.dist = Dist::kSparse;
      c.seed = seed++;
      c.hash_skew_keys = 200;
      c.explore_ops = 200;
      c.ops = {OpType::kInsert};
      plan.push_back({fmt::format("{}: sparse, skewed directory: spread runs over many lines, cut and repaired", v), c});
    }
  }
  // 8. B3-tree without rebalancing (IndexOptions::b3_no_rebalance, b3tree.h kRootNoRebalance):
  // the same persist sites and order, rebuilt pages holding ascending chains; inserts that split
  // leaves and inner pages, then deletes that merge and redistribute them.
  if (kind == "b3tree") {
    ExplorerConfig c = dense(seed++, 600, 120, OpType::kInsert);
    c.index_options.b3_no_rebalance = true;
    c.ops = {OpType::kInsert, OpType::kDelete};
    plan.push_back({"dense, no rebalancing: chains in rebuilt pages, splits, merges", c});
  }
  // 9. B3-tree with the smallest pages (IndexOptions::b3_page_bytes = 256: 6 BST nodes, the root
  // block's sized format): a split every few inserts, inner pages of a few separators, merges
  // and redistributions on deletes; the root block's page-size word persisted at create.
  if (kind == "b3tree") {
    ExplorerConfig c = dense(seed++, 300, 80, OpType::kInsert);
    c.index_options.b3_page_bytes = 256;
    c.ops = {OpType::kInsert, OpType::kDelete};
    plan.push_back({"dense, 256-byte pages: frequent splits and merges, sized root block", c});
  }
  return plan;
}

Status RunCoverage(const std::string& kind, const std::vector<PlanStep>& plan, CoverageResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  CoverageResult res;
  res.kind = kind;
  for (size_t i = 0; i < plan.size(); ++i) {
    ExplorerResult r;
    WORT_RETURN_IF_ERROR(plan[i].Run(plan[i].cfg, &r));
    for (auto& [site, n] : r.sites) res.met[site] += n;
    for (auto& [site, op] : r.first_op) {
      if (!res.first.count(site)) res.first[site] = {i, op};
      res.steps[site].push_back({i, op});
    }
    res.violations += r.violation_count;
    res.images += r.images;
    for (auto& v : r.violations)
      if (res.violation_text.size() < 5) res.violation_text.push_back(v.ToString());
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(res);
  return Status::OK();
}

const char* MutantVerdictName(MutantVerdict v) {
  switch (v) {
    case MutantVerdict::kCaught: return "caught";
    case MutantVerdict::kRedundant: return "redundant";
    case MutantVerdict::kMissed: return "MISSED";
    case MutantVerdict::kNotMet: return "not met";
    case MutantVerdict::kSkipped: return "skipped (time)";
    case MutantVerdict::kKnownMiss: return "missed (known, noted)";
    case MutantVerdict::kCaughtAtReturn: return "caught at return only";
  }
  return "?";
}

std::string MutationSummary(const std::string& kind, const std::vector<MutantResult>& results) {
  size_t n[7] = {};
  for (const MutantResult& m : results) ++n[static_cast<int>(m.verdict)];
  auto count = [&](MutantVerdict v) { return n[static_cast<int>(v)]; };
  return fmt::format("{}: mutation: {} sites met, {} caught, {} redundant, {} missed, {} skipped (time), {} missed and "
                     "noted (crash-site: uncaught); {} of the caught only at return",
                     kind, results.size() - count(MutantVerdict::kNotMet),
                     count(MutantVerdict::kCaught) + count(MutantVerdict::kCaughtAtReturn), count(MutantVerdict::kRedundant),
                     count(MutantVerdict::kMissed), count(MutantVerdict::kSkipped), count(MutantVerdict::kKnownMiss),
                     count(MutantVerdict::kCaughtAtReturn));
}

// The mutation gate's second pass explores this many operations that meet the dropped site.
constexpr size_t kFocusOps = 12;

namespace {
Status JudgeOnStep(const PlanStep& step, const ExplorerConfig& step_cfg, const std::string& site_name, size_t first,
                   ExplorerResult* out);
}  // namespace

Status RunMutation(const std::string& kind, const std::vector<PlanStep>& plan, const CoverageResult& cov,
                   const std::vector<PmSite>& sites, double deadline_s, std::vector<MutantResult>* out,
                   bool rejudge_uncaught) {
  (void)kind;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  out->clear();
  for (const PmSite& site : sites) {
    MutantResult m;
    m.site = site.Name();
    auto it = cov.first.find(m.site);
    if (it == cov.first.end()) {
      m.verdict = MutantVerdict::kNotMet;
      out->push_back(m);
      continue;
    }
    if (deadline_s > 0 && elapsed() > deadline_s) {
      m.verdict = MutantVerdict::kSkipped;
      out->push_back(m);
      continue;
    }
    const auto m0 = std::chrono::steady_clock::now();
    // The steps that met the site, in plan order (the first one alone when the coverage result
    // lists no steps, or the site is noted redundant - or uncaught, unless rejudge_uncaught).
    std::vector<std::pair<size_t, size_t>> judge{it->second};
    const bool once = std::strcmp(site.note, "redundant") == 0 || (!rejudge_uncaught && std::strcmp(site.note, "uncaught") == 0);
    if (auto st = cov.steps.find(m.site); st != cov.steps.end() && !once)
      judge.assign(st->second.begin(), st->second.begin() + std::min(st->second.size(), kJudgeSteps));
    ExplorerResult r;
    size_t judged_step = judge.front().first;
    // First by the crash images alone (op_persists off), then, if none caught it, by the return
    // rule too on the steps that check it.
    bool at_return = false;
    for (const bool rule : {false, true}) {
      for (const auto& [step, first_op] : judge) {
        if (rule && !plan[step].cfg.op_persists) continue;
        if (deadline_s > 0 && elapsed() > deadline_s && step != judge.front().first) break;
        judged_step = step;
        ExplorerConfig c = plan[step].cfg;
        c.op_persists = rule;
        WORT_RETURN_IF_ERROR(JudgeOnStep(plan[step], c, m.site, first_op, &r));
        if (r.violation_count > 0) break;
      }
      if (r.violation_count > 0) {
        at_return = rule;
        break;
      }
    }
    if (r.violation_count > 0) {
      m.verdict = at_return ? MutantVerdict::kCaughtAtReturn : MutantVerdict::kCaught;
      const Violation& v = r.violations.front();
      m.detail = fmt::format("step {} op #{} {} [{}]: {}", judged_step, v.op, v.point_desc, v.image, v.what.substr(0, 120));
    } else if (std::strcmp(site.note, "redundant") == 0) {
      m.verdict = MutantVerdict::kRedundant;
      m.detail = site.reason;
    } else if (std::strcmp(site.note, "uncaught") == 0) {
      m.verdict = MutantVerdict::kKnownMiss;
      m.detail = site.reason;
    } else {
      m.verdict = MutantVerdict::kMissed;
      m.detail = fmt::format("{} step(s) from \"{}\", {} images", judge.size(), plan[judge.front().first].what, r.images);
    }
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
    out->push_back(m);
  }
  return Status::OK();
}

namespace {
// One plan step's judgement of a dropped site: the step up to a few operations past its first
// meeting of the site (a dropped persist shows in the operation that skips it, or soon after),
// then, if not caught, the focused pass.
Status JudgeOnStep(const PlanStep& step, const ExplorerConfig& step_cfg, const std::string& site_name, size_t first,
                   ExplorerResult* out) {
  const size_t focus_ops = step.judge_focus_ops, first_ops = step.judge_first_ops;
  if (step.run) {
    // Another driver (the server store's): the step from its start up to a few operations past
    // the first meeting, each operation's new sites explored with many images per point.
    ExplorerConfig c = step_cfg;
    c.drop_site = site_name;
    c.max_violations = 1;
    c.explore_ops = std::min(c.explore_ops, first + (first_ops != 0 ? first_ops : 4));
    c.subsets = 16;
    c.log = nullptr;
    return step.Run(c, out);
  }
  {
    ExplorerConfig c = step_cfg;
    c.drop_site = site_name;
    c.max_violations = 1;
    // One operation explored (or a few): every crash point of it, and more images per point.
    c.max_points = 1024;
    c.subsets = 3;
    c.log = nullptr;
    // Unexplored before the operation that first met it (its own index keeps the creation's
    // numbering: #explore_ops is the creation, #explore_ops+1 the close).
    if (first < c.explore_ops) {
      c.explore_ops = std::min(c.explore_ops, first + (first_ops != 0 ? first_ops : 4));
      c.explore_from = first;
    } else if (first == c.explore_ops) {
      c.explore_from = first;  // the creation
    } else {
      c.explore_from = c.explore_ops;  // the close: no operation explored before it
      c.explore_lifecycle = true;
    }
    ExplorerResult r;
    WORT_RETURN_IF_ERROR(step.Run(c, &r));
    if (r.violation_count == 0) {
      // Second pass: the same step from its start, every operation that meets the site explored
      // from that meeting on (the first meeting may be one where the dropped write-back happens
      // not to matter: e.g. the line shares a cache line that a later persist writes back).
      ExplorerConfig f = step_cfg;
      f.drop_site = site_name;
      f.focus_site = site_name;
      f.focus_ops = focus_ops != 0 ? focus_ops : kFocusOps;
      f.single_line_images = true;
      f.novel_only = false;
      f.max_violations = 1;
      f.max_points = 256;
      f.subsets = 3;
      f.log = nullptr;
      ExplorerResult r2;
      WORT_RETURN_IF_ERROR(step.Run(f, &r2));
      r2.images += r.images;
      r = std::move(r2);
    }
    *out = std::move(r);
  }
  return Status::OK();
}

}  // namespace

}  // namespace wort::crash
