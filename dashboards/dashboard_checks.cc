#include "dashboards/dashboard_checks.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace farm::dashboards {
namespace {

using json = nlohmann::json;

bool IdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IdentChar(char c) { return IdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Index just past the bracket matching the one at `open` (or the end).
size_t SkipBalanced(const std::string& s, size_t open) {
  const char o = s[open];
  const char c = o == '(' ? ')' : o == '{' ? '}' : ']';
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '"' || s[i] == '\'' || s[i] == '`') {
      const char q = s[i];
      for (++i; i < s.size() && s[i] != q; ++i)
        if (s[i] == '\\') ++i;
      continue;
    }
    if (s[i] == o) ++depth;
    if (s[i] == c && --depth == 0) return i + 1;
  }
  return s.size();
}

size_t SkipSpace(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

const std::set<std::string>& Keywords() {
  static const auto* k = new std::set<std::string>{
      "and", "or",       "unless",     "bool",        "offset", "by",  "without",
      "on",  "ignoring", "group_left", "group_right", "inf",    "nan", "atan2"};
  return *k;
}

// Aggregation operators; they may be followed by `by (...)` before their
// parenthesis, so they are not recognised by the '(' alone.
const std::set<std::string>& Aggregations() {
  static const auto* k = new std::set<std::string>{
      "sum",   "min",  "max",     "avg",          "group",    "stddev", "stdvar",
      "count", "topk", "bottomk", "count_values", "quantile", "limitk", "limit_ratio"};
  return *k;
}

const std::set<std::string>& Groupers() {
  static const auto* k =
      new std::set<std::string>{"by", "without", "on", "ignoring", "group_left", "group_right"};
  return *k;
}

// Calls f(name, begin_of_name, index_after_name) for every metric name.
template <typename F>
void ForEachSelector(const std::string& e, F f) {
  size_t i = 0;
  while (i < e.size()) {
    const char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      size_t j = i + 1;
      for (; j < e.size() && e[j] != c; ++j)
        if (e[j] == '\\') ++j;
      i = j + 1;
      continue;
    }
    if (c == '{' || c == '[') {  // label matchers without a name, ranges
      i = SkipBalanced(e, i);
      continue;
    }
    if (c == '$') {  // Grafana variable: $name or ${name}
      ++i;
      if (i < e.size() && e[i] == '{') {
        i = SkipBalanced(e, i);
      } else {
        while (i < e.size() && IdentChar(e[i])) ++i;
      }
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {  // 0.95, 5m, 1e3
      while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '.')) ++i;
      continue;
    }
    if (!IdentStart(c)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < e.size() && IdentChar(e[j])) ++j;
    const std::string word = e.substr(i, j - i);
    const size_t next = SkipSpace(e, j);
    if (Groupers().count(word) && next < e.size() && e[next] == '(') {
      i = SkipBalanced(e, next);  // label names, not metrics
      continue;
    }
    if (Keywords().count(word) || Aggregations().count(word) ||
        (next < e.size() && e[next] == '(')) {
      i = j;  // keyword, or a function / aggregation call
      continue;
    }
    f(word, i, j);
    i = j;
  }
}

std::string PanelWhere(const std::string& name, const json& panel) {
  return absl::StrCat(name, " panel ", panel.value("id", json(-1)).dump(), " \"",
                      panel.value("title", std::string()), "\"");
}

void CollectPanels(const json& panels, std::vector<const json*>* out) {
  if (!panels.is_array()) return;
  for (const json& p : panels) {
    out->push_back(&p);
    if (p.contains("panels")) CollectPanels(p["panels"], out);
  }
}

}  // namespace

absl::StatusOr<json> LoadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

std::vector<std::string> JsonFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> DashboardProblems(const json& d, const std::string& name) {
  std::vector<std::string> problems;
  if (!d.is_object() || !d.contains("panels") || !d["panels"].is_array()) {
    return {absl::StrCat(name, ": no panels array")};
  }
  // Datasource variables: name -> plugin type.
  std::map<std::string, std::string> ds_vars;
  if (d.contains("templating") && d["templating"].contains("list")) {
    for (const json& v : d["templating"]["list"]) {
      if (v.value("type", "") == "datasource") ds_vars[v.value("name", "")] = v.value("query", "");
    }
  }
  auto check_ref = [&](const json& ref, const std::string& where) {
    if (!ref.is_object()) {
      problems.push_back(absl::StrCat(where, ": datasource is not an object {type, uid}"));
      return;
    }
    const std::string type = ref.value("type", ""), uid = ref.value("uid", "");
    if (uid.size() < 4 || uid.rfind("${", 0) != 0 || uid.back() != '}') {
      problems.push_back(absl::StrCat(where, ": datasource uid \"", uid,
                                      "\" is not a ${variable} (dashboards must not pin a uid)"));
      return;
    }
    const std::string var = uid.substr(2, uid.size() - 3);
    auto it = ds_vars.find(var);
    if (it == ds_vars.end()) {
      problems.push_back(
          absl::StrCat(where, ": datasource variable \"", var, "\" is not defined in templating"));
    } else if (it->second != type) {
      problems.push_back(absl::StrCat(where, ": datasource type \"", type, "\" but variable \"",
                                      var, "\" selects \"", it->second, "\""));
    }
  };
  std::vector<const json*> panels;
  CollectPanels(d["panels"], &panels);
  std::map<int64_t, std::string> ids;
  for (const json* pp : panels) {
    const json& p = *pp;
    const std::string where = PanelWhere(name, p);
    if (!p.contains("id") || !p["id"].is_number_integer()) {
      problems.push_back(absl::StrCat(where, ": no integer id"));
    } else {
      const int64_t id = p["id"].get<int64_t>();
      auto [it, fresh] = ids.emplace(id, where);
      if (!fresh)
        problems.push_back(absl::StrCat(where, ": id ", id, " also used by ", it->second));
    }
    if (p.value("type", "") == "row") continue;
    if (!p.contains("datasource")) {
      problems.push_back(absl::StrCat(where, ": no datasource"));
      continue;
    }
    check_ref(p["datasource"], where);
    if (!p.contains("targets") || !p["targets"].is_array() || p["targets"].empty()) {
      problems.push_back(absl::StrCat(where, ": no targets"));
      continue;
    }
    for (const json& t : p["targets"]) {
      const std::string tw = absl::StrCat(where, " target ", t.value("refId", "?"));
      const json& ref = t.contains("datasource") ? t["datasource"] : p["datasource"];
      check_ref(ref, tw);
      if (ref != p["datasource"]) {
        problems.push_back(absl::StrCat(tw, ": datasource ", ref.dump(),
                                        " differs from the panel's ", p["datasource"].dump()));
      }
      const std::string type = ref.is_object() ? ref.value("type", "") : "";
      if (type == "prometheus" && t.value("expr", "").empty())
        problems.push_back(absl::StrCat(tw, ": Prometheus target without expr"));
      if (type.find("postgres") != std::string::npos && t.value("rawSql", "").empty())
        problems.push_back(absl::StrCat(tw, ": SQL target without rawSql"));
    }
  }
  // Every $variable a query names is defined (or one of Grafana's $__ ones);
  // a series over results' samples never averages job kinds or phases.
  std::set<std::string> vars;
  if (d.contains("templating") && d["templating"].contains("list")) {
    for (const json& v : d["templating"]["list"]) vars.insert(v.value("name", ""));
  }
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const Query& q : DashboardQueries(d, name)) {
    const std::string& t = q.text;
    for (size_t i = t.find('$'); i != std::string::npos; i = t.find('$', i + 1)) {
      size_t b = i + 1;
      if (b < t.size() && t[b] == '{') ++b;
      size_t e = b;
      while (e < t.size() && ident(t[e])) ++e;
      const std::string var = t.substr(b, e - b);
      if (var.empty() || std::isdigit(static_cast<unsigned char>(var[0]))) continue;
      if (var.rfind("__", 0) != 0 && !vars.contains(var)) {
        problems.push_back(absl::StrCat(q.where, ": uses $", var, ", which is not a variable"));
      }
    }
    if (q.kind == "sql" && absl::StrContains(q.text, "samples") &&
        absl::StrContains(q.text, "avg(")) {
      if (!absl::StrContains(q.text, "j.kind"))
        problems.push_back(absl::StrCat(q.where,
                                        ": averages samples over every job kind "
                                        "(bulk, confirmation and bisect runs pooled)"));
      if (!absl::StrContains(q.text, ".phase") && !absl::StrContains(q.text, "'phase'"))
        problems.push_back(
            absl::StrCat(q.where, ": averages samples over every phase (e.g. read with write)"));
    }
  }
  if (d.contains("templating") && d["templating"].contains("list")) {
    for (const json& v : d["templating"]["list"]) {
      if (v.value("type", "") != "query") continue;
      const std::string where = absl::StrCat(name, " variable $", v.value("name", ""));
      if (!v.contains("datasource")) {
        problems.push_back(absl::StrCat(where, ": no datasource"));
      } else {
        check_ref(v["datasource"], where);
      }
    }
  }
  return problems;
}

std::vector<Query> DashboardQueries(const json& d, const std::string& name) {
  std::vector<Query> out;
  std::vector<const json*> panels;
  if (d.contains("panels")) CollectPanels(d["panels"], &panels);
  for (const json* pp : panels) {
    const json& p = *pp;
    if (!p.contains("targets") || !p["targets"].is_array()) continue;
    for (const json& t : p["targets"]) {
      const std::string where =
          absl::StrCat(PanelWhere(name, p), " target ", t.value("refId", "?"));
      if (t.contains("expr")) out.push_back({where, "promql", t["expr"].get<std::string>()});
      if (t.contains("rawSql")) out.push_back({where, "sql", t["rawSql"].get<std::string>()});
    }
  }
  if (d.contains("templating") && d["templating"].contains("list")) {
    for (const json& v : d["templating"]["list"]) {
      if (v.value("type", "") != "query" || !v.contains("query") || !v["query"].is_string())
        continue;
      const json ds = v.value("datasource", json::object());
      const bool prom = ds.is_object() && ds.value("type", "") == "prometheus";
      out.push_back({absl::StrCat(name, " variable $", v.value("name", "")),
                     prom ? "promql" : "sql", v["query"].get<std::string>()});
    }
  }
  return out;
}

absl::StatusOr<RuleFile> LoadRules(const std::string& path) {
  RuleFile out;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root["groups"] || !root["groups"].IsSequence())
      return absl::InvalidArgumentError(absl::StrCat(path, ": no groups list"));
    for (const YAML::Node& g : root["groups"]) {
      const std::string group = g["name"] ? g["name"].as<std::string>() : "?";
      if (!g["rules"]) continue;
      for (const YAML::Node& r : g["rules"]) {
        const std::string expr = r["expr"] ? r["expr"].as<std::string>() : "";
        std::string name;
        if (r["record"]) {
          name = r["record"].as<std::string>();
          out.recorded.insert(name);
        } else if (r["alert"]) {
          name = r["alert"].as<std::string>();
        }
        out.exprs.push_back({absl::StrCat(path, " group ", group, " rule ", name), "promql", expr});
      }
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  return out;
}

std::set<std::string> PromqlMetricNames(const std::string& expr) {
  std::set<std::string> out;
  ForEachSelector(expr, [&](const std::string& name, size_t, size_t) { out.insert(name); });
  return out;
}

std::vector<std::pair<std::string, std::string>> EqualityMatchers(const std::string& expr,
                                                                  const std::string& metric) {
  std::vector<std::pair<std::string, std::string>> out;
  ForEachSelector(expr, [&](const std::string& name, size_t, size_t end) {
    if (name != metric) return;
    size_t i = SkipSpace(expr, end);
    if (i >= expr.size() || expr[i] != '{') return;
    const size_t close = SkipBalanced(expr, i);
    const std::string body = expr.substr(i + 1, close - i - 2);
    // label="value" pairs (not =~, !=, !~).
    size_t k = 0;
    while (k < body.size()) {
      k = SkipSpace(body, k);
      size_t j = k;
      while (j < body.size() && IdentChar(body[j])) ++j;
      const std::string label = body.substr(k, j - k);
      j = SkipSpace(body, j);
      std::string op;
      while (j < body.size() && (body[j] == '=' || body[j] == '!' || body[j] == '~'))
        op += body[j++];
      j = SkipSpace(body, j);
      if (j >= body.size() || body[j] != '"') break;
      size_t v = j + 1;
      std::string value;
      for (; v < body.size() && body[v] != '"'; ++v) {
        if (body[v] == '\\' && v + 1 < body.size()) ++v;
        value += body[v];
      }
      if (op == "=" && !label.empty()) out.emplace_back(label, value);
      k = body.find(',', v);
      if (k == std::string::npos) break;
      ++k;
    }
  });
  return out;
}

Exposition ParseExposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream l(line);
      std::string hash, kw, name, type;
      l >> hash >> kw >> name >> type;
      if (kw == "TYPE" && !name.empty()) e.types[name] = type.empty() ? "untyped" : type;
      continue;
    }
    size_t i = 0;
    while (i < line.size() && IdentChar(line[i])) ++i;
    const std::string name = line.substr(0, i);
    if (name.empty()) continue;
    std::map<std::string, std::string> labels;
    if (i < line.size() && line[i] == '{') {
      const size_t close = SkipBalanced(line, i);
      const std::string body = line.substr(i + 1, close - i - 2);
      size_t k = 0;
      while (k < body.size()) {
        const size_t eq = body.find('=', k);
        if (eq == std::string::npos || eq + 1 >= body.size() || body[eq + 1] != '"') break;
        std::string value;
        size_t v = eq + 2;
        for (; v < body.size() && body[v] != '"'; ++v) {
          if (body[v] == '\\' && v + 1 < body.size()) ++v;
          value += body[v];
        }
        labels[body.substr(k, eq - k)] = value;
        k = v + 1;
        if (k < body.size() && body[k] == ',') ++k;
      }
    }
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        const std::string base = name.substr(0, name.size() - s.size());
        auto t = e.types.find(base);
        if (t != e.types.end() && (t->second == "histogram" || t->second == "summary"))
          family = base;
      }
    }
    if (!e.types.count(family)) e.types[family] = "untyped";
    if (family == name) e.samples[family].push_back(std::move(labels));
  }
  return e;
}

bool Exports(const Exposition& e, const std::string& name) {
  if (e.types.count(name)) return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() <= s.size() || name.compare(name.size() - s.size(), s.size(), s) != 0) continue;
    auto t = e.types.find(name.substr(0, name.size() - s.size()));
    if (t == e.types.end()) continue;
    if (t->second == "histogram") return true;
    if (t->second == "summary" && s != "_bucket") return true;
  }
  return false;
}

}  // namespace farm::dashboards
