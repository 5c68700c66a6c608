// libpg_query's parse tree (JSON) walked for verbs, tables and functions.
#include "userspace/guard/sql_facts.h"

#include <pg_query.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

namespace faultline {
namespace sql_facts_detail {

void add_once(std::vector<std::string>& to, std::string v) {
  if (std::find(to.begin(), to.end(), v) == to.end()) to.push_back(std::move(v));
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The verb of a statement node ("DropStmt" -> DROP), "" for a node that is
// not a statement. The node's fields settle GRANT/REVOKE and transactions.
std::string verb_of(const std::string& node, const nlohmann::json& body) {
  // Nodes are capitalised ("SelectStmt"), fields not ("selectStmt" holds one).
  if (node.size() <= 4 || !node.ends_with("Stmt") || !std::isupper(static_cast<unsigned char>(node[0]))) return "";
  const std::string base = node.substr(0, node.size() - 4);
  if (base.starts_with("Drop")) return "DROP";
  if (base.starts_with("Alter") || base == "Rename") return "ALTER";
  if (base.starts_with("Create") || base == "View" || base == "Index" || base == "Define" || base == "CompositeType" ||
      base == "Rule")
    return "CREATE";
  if (base == "Grant" || base == "GrantRole")
    return body.is_object() && body.value("is_grant", false) ? "GRANT" : "REVOKE";
  if (base == "VariableSet") return "SET";
  if (base == "VariableShow") return "SHOW";
  if (base == "Deallocate") return "DEALLOCATE";
  if (base == "Transaction") {
    const std::string kind = body.is_object() ? body.value("kind", "") : "";
    if (kind == "TRANS_STMT_BEGIN" || kind == "TRANS_STMT_START") return "BEGIN";
    if (kind == "TRANS_STMT_COMMIT" || kind == "TRANS_STMT_COMMIT_PREPARED") return "COMMIT";
    if (kind == "TRANS_STMT_ROLLBACK" || kind == "TRANS_STMT_ROLLBACK_TO" || kind == "TRANS_STMT_ROLLBACK_PREPARED")
      return "ROLLBACK";
    if (kind == "TRANS_STMT_SAVEPOINT") return "SAVEPOINT";
    if (kind == "TRANS_STMT_RELEASE") return "RELEASE";
    if (kind == "TRANS_STMT_PREPARE") return "PREPARE";
    return "TRANSACTION";
  }
  return upper(base);  // Select, Insert, Update, Delete, Merge, Truncate, Copy, Do, Explain, Call, ...
}

// A list of String nodes ([{"String":{"sval":"s"}},{"String":{"sval":"t"}}])
// as a dotted name, "" when it is something else.
std::string dotted(const nlohmann::json& list) {
  if (!list.is_array()) return "";
  std::string out;
  for (const auto& part : list) {
    if (!part.is_object() || !part.contains("String")) return "";
    const auto& s = part["String"];
    if (!s.is_object() || !s.contains("sval") || !s["sval"].is_string()) return "";
    if (!out.empty()) out += '.';
    out += s["sval"].get<std::string>();
  }
  return out;
}

bool drops_a_relation(const std::string& remove_type) {
  return remove_type == "OBJECT_TABLE" || remove_type == "OBJECT_VIEW" || remove_type == "OBJECT_MATVIEW" ||
         remove_type == "OBJECT_SEQUENCE" || remove_type == "OBJECT_FOREIGN_TABLE" || remove_type == "OBJECT_INDEX";
}

// Every node under one top-level statement, with an explicit stack (a deep
// tree does not deepen ours).
void walk(const nlohmann::json& root, SqlStatementFacts& out) {
  std::vector<const nlohmann::json*> stack{&root};
  while (!stack.empty()) {
    const nlohmann::json& n = *stack.back();
    stack.pop_back();
    if (n.is_array()) {
      for (auto it = n.rbegin(); it != n.rend(); ++it) stack.push_back(&*it);
      continue;
    }
    if (!n.is_object()) continue;
    // A RangeVar: under its own key or bare as a statement's "relation".
    if (n.contains("relname") && n["relname"].is_string()) {
      std::string name = n["relname"].get<std::string>();
      if (n.contains("schemaname") && n["schemaname"].is_string())
        name = n["schemaname"].get<std::string>() + "." + name;
      add_once(out.tables, std::move(name));
    }
    const size_t children = stack.size();
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string& key = it.key();
      const nlohmann::json& body = it.value();
      if (std::string v = verb_of(key, body); !v.empty()) {
        add_once(out.verbs, v);
        if (key == "CopyStmt" && body.is_object() && body.value("is_program", false)) out.copy_program = true;
        if (key == "DropStmt" && body.is_object() && drops_a_relation(body.value("removeType", "")) &&
            body.contains("objects") && body["objects"].is_array()) {
          for (const auto& obj : body["objects"]) {
            std::string name = obj.is_object() && obj.contains("List") && obj["List"].is_object()
                                   ? dotted(obj["List"].value("items", nlohmann::json()))
                                   : "";
            if (!name.empty()) add_once(out.tables, std::move(name));
          }
        }
      }
      if (key == "FuncCall" && body.is_object() && body.contains("funcname")) {
        std::string name = dotted(body["funcname"]);
        if (!name.empty()) add_once(out.functions, std::move(name));
      }
      if (body.is_structured()) stack.push_back(&body);
    }
    // Visited in the order written (a stack pops the last first).
    std::reverse(stack.begin() + std::ptrdiff_t(children), stack.end());
  }
}

}  // namespace sql_facts_detail

SqlFacts sql_facts(std::string_view sql) {
  SqlFacts facts;
  // libpg_query reads a C string: a NUL inside the text would hide the rest.
  if (sql.find('\0') != std::string_view::npos) {
    facts.error = "a NUL byte inside the SQL text";
    return facts;
  }
  const std::string text(sql);
  PgQueryParseResult r = pg_query_parse(text.c_str());
  if (r.error != nullptr) {
    facts.error = std::string(r.error->message != nullptr ? r.error->message : "syntax error") + " at position " +
                  std::to_string(r.error->cursorpos);
    pg_query_free_parse_result(r);
    return facts;
  }
  nlohmann::json tree = nlohmann::json::parse(r.parse_tree != nullptr ? r.parse_tree : "{}", nullptr, false);
  pg_query_free_parse_result(r);
  if (tree.is_discarded() || !tree.is_object()) {
    facts.error = "the parse tree could not be read";
    return facts;
  }
  facts.parsed = true;
  if (!tree.contains("stmts") || !tree["stmts"].is_array()) return facts;
  for (const auto& s : tree["stmts"]) {
    if (!s.is_object() || !s.contains("stmt")) continue;
    SqlStatementFacts st;
    sql_facts_detail::walk(s["stmt"], st);
    facts.statements.push_back(std::move(st));
  }
  return facts;
}

}  // namespace faultline
