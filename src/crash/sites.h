// crash/sites.h - the inventory of persist sites: every pm::flush / pm::fence / pm::persist call
// site (file:line) in src/, extracted from the sources at build time (scripts/pm_sites.py), so
// that the crash explorer's coverage is a number: sites met / sites present, per index kind.
//
// Why a build-time extraction (not a registration inside pm.h): every site reports itself
// through std::source_location when it runs, but a site that never runs cannot register itself
// at run time, and a link-time registration (a static object per call site, or a section entry)
// needs a macro at every call site. Reading the sources needs no change to any of the ~200 call
// sites. Its blind spot - a call the extractor's pattern misses - is closed by the coverage test,
// which fails when the explorer meets a site the inventory does not hold.
//
// Notes beside a site. A comment on the site's line or on the line just above it, starting with
//   crash-site: redundant: REASON   (the mutation gate does not expect dropping it to be caught)
//   crash-site: outside: REASON     (no index operation reaches it: not counted in coverage)
//   crash-site: uncaught: REASON    (a known gap: the explorer cannot catch its removal, and why)
//   crash-site: unreachable: REASON (no crash image can lead there: a defensive path; the
//                                    coverage gate accepts it unmet, and fails if a plan meets it)
// is carried into the inventory with the site.
//
// Ownership: each source file with sites belongs to the kinds whose operations can reach it
// (kSiteOwners in sites.cc). A site of a file shared by several kinds (the allocator, the ART
// core of WOART and ART+CoW, the hash tables' common code) is met when any owner's plan meets
// it. A file with sites and no owner entry fails the coverage test.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wort::crash {

struct PmSite {
  const char* file;   // "src/index/radix/wort.cc"
  uint32_t line;
  const char* call;   // "flush", "fence", "persist"
  const char* note;   // "", "redundant", "outside", "uncaught", "unreachable"
  const char* reason; // the note's reason
  const char* func;   // the function the site is in ("B3Tree::Replace"; "" before any), by a
                      // heuristic of scripts/pm_sites.py: only for the stable id below
  const char* code;   // the call's code text, whitespace collapsed, comment dropped
  std::string Name() const { return std::string(file) + ":" + std::to_string(line); }
};

// A site's stable id: "file|function|code#k", k the site's ordinal among the sites of `sites` with
// the same file, function and code text, in line order (0 for most). Unlike file:line it does
// not move when lines are added or removed elsewhere in the file (nor elsewhere in the function,
// unless they hold an identical call): the mutation gate chooses its per-kind subset by it.
// Returned in the order of `sites`.
std::vector<std::string> StableSiteIds(const std::vector<PmSite>& sites);
// The stable id of an inventory site (StableSiteIds over the whole inventory).
std::string SiteStableId(const PmSite& s);

// The inventory, in file and line order.
const std::vector<PmSite>& PmSites();

// The kinds that own `file`'s sites ("*" = every crash-tested kind). Empty when the file has no
// owner entry; *outside (if non-null) is then the reason the file is outside every index
// operation, or empty when the file is unknown (a gap the coverage test reports).
std::vector<std::string> SiteOwners(const std::string& file, std::string* outside = nullptr);

// The inventory's sites a kind owns (its files, and the shared files).
std::vector<PmSite> SitesOfKind(const std::string& kind);

// Whether a site counts in the coverage gate (an owned file, no "outside" note).
bool SiteGated(const PmSite& s);

// The kind whose mutation gate drops `s`: the first of its file's owners (kSiteOwners order;
// "*": the registry's order, WORT first). A shared site is judged once, by the owner whose plan
// exercises it most (the allocator's and the pool's sites by WORT, whose leaves are blocks).
bool SiteMutatedBy(const PmSite& s, const std::string& kind);

// Whether a site carries the "unreachable" note (gated: it must stay unmet).
bool SiteNotedUnreachable(const PmSite& s);

// The inventory entry of "file:line", or nullptr.
const PmSite* FindSite(const std::string& name);

}  // namespace wort::crash
