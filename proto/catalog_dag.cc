#include "proto/catalog_dag.h"

#include <unordered_map>

namespace farm::proto {

std::vector<std::vector<int>> ParentPositions(
    const std::vector<std::string>& ids, const std::vector<std::vector<std::string>>& parents) {
  std::unordered_map<std::string, int> at;
  for (size_t i = 0; i < ids.size(); ++i) at.emplace(ids[i], static_cast<int>(i));
  std::vector<std::vector<int>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int self = static_cast<int>(i);
    if (i >= parents.size() || parents[i].empty()) {
      if (i > 0) out[i].push_back(self - 1);
      continue;
    }
    for (const std::string& p : parents[i]) {
      auto it = at.find(p);
      if (it != at.end() && it->second < self) out[i].push_back(it->second);
    }
  }
  return out;
}

std::vector<std::vector<int>> ParentPositions(const ::iommufarm::v1::Catalog& catalog) {
  std::vector<std::string> ids;
  std::vector<std::vector<std::string>> parents;
  for (const auto& c : catalog.commits()) {
    ids.push_back(c.id());
    parents.emplace_back(c.parents().begin(), c.parents().end());
  }
  return ParentPositions(ids, parents);
}

bool IsLinear(const std::vector<std::vector<int>>& parents) {
  for (size_t i = 1; i < parents.size(); ++i) {
    if (parents[i].size() != 1 || parents[i][0] != static_cast<int>(i) - 1) return false;
  }
  return parents.empty() || parents[0].empty();
}

std::vector<bool> Ancestors(const std::vector<std::vector<int>>& parents, int of) {
  std::vector<bool> seen(parents.size(), false);
  std::vector<int> todo = {of};
  seen[of] = true;
  while (!todo.empty()) {
    const int c = todo.back();
    todo.pop_back();
    for (int p : parents[c]) {
      if (!seen[p]) {
        seen[p] = true;
        todo.push_back(p);
      }
    }
  }
  return seen;
}

std::map<std::string, std::string> SettingsAt(const ::iommufarm::v1::Catalog& catalog,
                                              const std::vector<std::vector<int>>& parents,
                                              int at) {
  const std::vector<bool> mine = Ancestors(parents, at);
  std::map<std::string, std::string> state;
  for (int i = 0; i <= at && i < catalog.commits_size(); ++i) {
    if (!mine[i]) continue;
    for (const auto& [k, v] : catalog.commits(i).set()) state[k] = v;
  }
  return state;
}

}  // namespace farm::proto
