// Commit catalogs as history graphs: a catalog entry's parents
// (CatalogCommit.parents) as positions in the list, ancestry over them, and
// the model state a commit inherits from its ancestors.
//
// A catalog whose entries carry no parents is a linear list: every entry's
// parent is the one before it. One imported from a merge-based history
// (farmctl catalog import-git) names each commit's parents; the list is in
// topological order (parents first), and a parent outside the catalog is
// before its history, so it is left out of the graph.
//
// Pure functions over values; thread-safe.
#ifndef PROTO_CATALOG_DAG_H_
#define PROTO_CATALOG_DAG_H_

#include <map>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::proto {

// Per entry, the positions of its parents in the list, from each entry's
// parent ids (empty: the previous entry, none for the first). Ids not in
// `ids` are left out; so is a parent at or after its child's position (a
// list that is not topological), which would make a cycle.
std::vector<std::vector<int>> ParentPositions(const std::vector<std::string>& ids,
                                              const std::vector<std::vector<std::string>>& parents);
std::vector<std::vector<int>> ParentPositions(const ::iommufarm::v1::Catalog& catalog);

// True when every entry but the first has exactly the previous entry as its
// one parent: the list is its own first-parent line.
bool IsLinear(const std::vector<std::vector<int>>& parents);

// The ancestors of position `of`, itself included, as a mask over positions.
// REQUIRES: 0 <= of < parents.size().
std::vector<bool> Ancestors(const std::vector<std::vector<int>>& parents, int of);

// The model state of position `at`: every `set` of its ancestors applied in
// list order (for a linear list, entries 0..at).
std::map<std::string, std::string> SettingsAt(const ::iommufarm::v1::Catalog& catalog,
                                              const std::vector<std::vector<int>>& parents, int at);

}  // namespace farm::proto

#endif  // PROTO_CATALOG_DAG_H_
