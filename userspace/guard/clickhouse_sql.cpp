// ClickHouse SQL read token by token for its verbs, tables and functions.
#include "userspace/guard/clickhouse_sql.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "userspace/net/http_request.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace clickhouse_sql_detail {

enum class Tok : uint8_t { End, Word, Quoted, String, Number, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // Word as written, Quoted unescaped, Punct its character
  size_t pos = 0;    // offset in the text
};

// ClickHouse's lexical rules, pulled one token at a time: an INSERT's data is
// never lexed. Strings and quoted names end where ClickHouse ends them (a
// backslash escapes the next character, a doubled quote is one); block
// comments do not nest, so the tokenizer never reads less than ClickHouse does.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  // The next token, or nothing with error() set.
  Token next() {
    skip_space();
    Token t;
    t.pos = i_;
    if (!error_.empty() || i_ >= s_.size()) return t;
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (std::isalpha(c) || c == '_' || c >= 0x80) {
      t.kind = Tok::Word;
      while (i_ < s_.size() && word_char(static_cast<unsigned char>(s_[i_]))) t.text += s_[i_++];
    } else if (std::isdigit(c)) {
      t.kind = Tok::Number;
      while (i_ < s_.size() && (word_char(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.')) t.text += s_[i_++];
    } else if (c == '\'' || c == '`' || c == '"') {
      t.kind = c == '\'' ? Tok::String : Tok::Quoted;
      if (!quoted(static_cast<char>(c), t.text)) return Token{Tok::End, "", t.pos};
    } else {
      t.kind = Tok::Punct;
      t.text = std::string(1, static_cast<char>(c));
      ++i_;
    }
    return t;
  }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] size_t offset() const { return i_; }

 private:
  static bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

  void skip_space() {
    while (i_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (std::isspace(c)) {
        ++i_;
      } else if (s_.substr(i_, 2) == "--") {
        const size_t nl = s_.find('\n', i_);
        i_ = nl == std::string_view::npos ? s_.size() : nl + 1;
      } else if (s_.substr(i_, 2) == "/*") {
        const size_t end = s_.find("*/", i_ + 2);
        if (end == std::string_view::npos) {
          error_ = "an unterminated comment at position " + std::to_string(i_ + 1);
          i_ = s_.size();
          return;
        }
        i_ = end + 2;
      } else {
        return;
      }
    }
  }

  bool quoted(char q, std::string& out) {
    const size_t start = i_++;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        out += s_[i_++];
      } else if (c == q && i_ < s_.size() && s_[i_] == q) {
        out += q;
        ++i_;
      } else if (c == q) {
        return true;
      } else {
        out += c;
      }
    }
    error_ = std::string(q == '\'' ? "an unterminated string" : "an unterminated quoted name") + " at position " +
             std::to_string(start + 1);
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void add_once(std::vector<std::string>& to, const std::string& v) {
  if (!v.empty() && std::find(to.begin(), to.end(), v) == to.end()) to.push_back(v);
}

bool one_of(std::string_view word, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), word) != set.end();
}

// Words that may precede '(' without being a call.
bool keyword_before_paren(std::string_view w) {
  return one_of(w, {"IN",     "NOT",      "AND",       "OR",     "AS",     "ON",       "USING",    "VALUES",  "EXISTS",
                    "ANY",    "ALL",      "FROM",      "SELECT", "WHERE",  "JOIN",     "PREWHERE", "HAVING",  "BY",
                    "WITH",   "UNION",    "THEN",      "ELSE",   "WHEN",   "CASE",     "IS",       "LIKE",    "ILIKE",
                    "GLOBAL", "BETWEEN",  "DISTINCT",  "LIMIT",  "OFFSET", "INTERVAL", "ORDER",    "GROUP",   "INTO",
                    "TABLE",  "SETTINGS", "PARTITION", "FINAL",  "SAMPLE", "TO",       "KEY",      "PRIMARY", "TTL"});
}

// The statement kinds read, as their verb.
std::string verb_for(const std::string& first) {
  if (first == "WITH") return "SELECT";
  if (first == "DESC") return "DESCRIBE";
  static constexpr std::array<std::string_view, 20> kKinds = {
      "SELECT", "INSERT", "DROP", "TRUNCATE", "ALTER",  "CREATE", "ATTACH", "DETACH", "RENAME",   "OPTIMIZE",
      "SYSTEM", "KILL",   "SET",  "SHOW",     "EXISTS", "USE",    "CHECK",  "DELETE", "DESCRIBE", "EXPLAIN"};
  return std::find(kKinds.begin(), kKinds.end(), first) != kKinds.end() ? first : "";
}

// One statement after another, read from the lexer.
class Reader {
 public:
  Reader(std::string_view text, bool whole) : lx_(text), whole_(whole) { advance(); }

  ClickHouseSqlFacts read() {
    ClickHouseSqlFacts out;
    while (error_.empty() && !out.data_begun) {
      while (punct(";")) advance();
      if (tok_.kind == Tok::End) break;
      SqlStatementFacts st;
      statement(st);
      if (!error_.empty()) break;
      out.facts.statements.push_back(std::move(st));
      out.data_begun = data_begun_;
    }
    // A cut text may hold more statements past its end, whatever was read.
    if (!out.data_begun) at_end();
    if (!lx_.error().empty()) error_ = lx_.error();  // what made the text end early
    out.facts.parsed = error_.empty();
    out.facts.error = error_;
    if (!out.facts.parsed) out.facts.statements.clear();
    return out;
  }

 private:
  void advance() {
    prev_word_ = tok_.kind == Tok::Word ? upper(tok_.text) : "";
    tok_ = lx_.next();
  }
  [[nodiscard]] bool punct(std::string_view p) const { return tok_.kind == Tok::Punct && tok_.text == p; }
  [[nodiscard]] bool word(std::string_view w) const { return tok_.kind == Tok::Word && upper(tok_.text) == w; }
  [[nodiscard]] bool name_token() const { return tok_.kind == Tok::Word || tok_.kind == Tok::Quoted; }

  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  // The statement is still open where the text ends: whole, it simply ends;
  // cut, what follows is unknown.
  void at_end() {
    if (!lx_.error().empty()) return fail(lx_.error());
    if (!whole_)
      fail("the SQL goes on past the first " + std::to_string(kClickHouseSqlBodyBytes / 1024) +
           " KiB of the body, which is all the guard reads");
  }

  // name or db.name, as written; "" when the token is not a name.
  std::string qualified_name() {
    if (!name_token()) return "";
    std::string name = tok_.text;
    advance();
    while (punct(".")) {
      advance();
      if (!name_token()) {
        fail("a name ending in '.' at position " + std::to_string(tok_.pos + 1));
        return "";
      }
      name += "." + tok_.text;
      advance();
    }
    return name;
  }

  void statement(SqlStatementFacts& st) {
    depth_.clear();
    from_list_ = false;
    while (punct("(")) {  // (SELECT ...) UNION ALL ...
      depth_.push_back(false);
      advance();
    }
    if (tok_.kind != Tok::Word) {
      fail("a statement that does not begin with a keyword at position " + std::to_string(tok_.pos + 1));
      return;
    }
    const std::string first = upper(tok_.text);
    const std::string verb = verb_for(first);
    if (verb.empty()) {
      fail("a statement of a kind the guard does not read: " + first + " at position " + std::to_string(tok_.pos + 1));
      return;
    }
    st.verbs.push_back(verb);
    advance();
    if (verb == "INSERT") return insert(st);
    if (one_of(verb, {"DROP", "TRUNCATE", "OPTIMIZE", "CHECK", "EXISTS", "DETACH", "ATTACH"})) object(st, verb);
    if ((verb == "DESCRIBE" || verb == "SHOW") && !punct("(")) {
      if (verb == "SHOW" && word("CREATE")) advance();
      if (verb == "DESCRIBE" || prev_word_ == "CREATE") object(st, verb);
    }
    if (verb == "ALTER") object(st, verb);
    if (verb == "CREATE") return create(st);
    if (verb == "RENAME") return rename(st);
    scan(st, verb == "ALTER");
  }

  // The object a statement acts on: [TEMPORARY] [TABLE|VIEW|DICTIONARY|DATABASE] [IF [NOT] EXISTS] name.
  void object(SqlStatementFacts& st, const std::string& verb) {
    bool database = false;
    while (tok_.kind == Tok::Word) {
      const std::string w = upper(tok_.text);
      if (one_of(w, {"USER", "ROLE", "QUOTA", "PROFILE", "POLICY", "ROW", "SETTINGS", "FUNCTION", "INDEX"}))
        return;  // not a table: the statement's other words are read as any
      if (!one_of(w, {"TEMPORARY", "TABLE", "VIEW", "DICTIONARY", "DATABASE", "IF", "NOT", "EXISTS", "OR", "REPLACE",
                      "MATERIALIZED", "LIVE"}))
        break;
      database |= w == "DATABASE";
      advance();
    }
    const size_t pos = tok_.pos;
    const std::string name = qualified_name();
    if (name.empty()) {
      if (tok_.kind == Tok::End && error_.empty() && !whole_) return at_end();
      fail(verb + " without the name of what it acts on at position " + std::to_string(pos + 1));
      return;
    }
    add_once(st.tables, database ? name + ".*" : name);
  }

  // INSERT INTO [TABLE] name | INSERT INTO [TABLE] FUNCTION f(...), [(columns)],
  // then VALUES or FORMAT name (the data begins), or SELECT.
  void insert(SqlStatementFacts& st) {
    if (word("INTO")) advance();
    if (word("TABLE")) advance();
    if (word("FUNCTION")) {
      advance();
      if (!name_token())
        return fail("INSERT INTO FUNCTION without its name at position " + std::to_string(tok_.pos + 1));
      add_once(st.functions, tok_.text);
      advance();
      skip_group(nullptr);
    } else {
      const size_t pos = tok_.pos;
      const std::string name = qualified_name();
      if (name.empty()) {
        if (tok_.kind == Tok::End && !whole_) return at_end();
        return fail("INSERT without the table it inserts into at position " + std::to_string(pos + 1));
      }
      add_once(st.tables, name);
    }
    if (punct("(")) skip_group(nullptr);  // the column list
    while (error_.empty()) {
      if (word("VALUES") || word("FORMAT")) {
        // The data: after VALUES at once; after FORMAT, past the format's name.
        const bool format = word("FORMAT");
        data_begun_ = true;
        if (format) (void)lx_.next();
        return;
      }
      if (word("SELECT") || word("WITH")) {
        add_once(st.verbs, "SELECT");
        return scan(st, false);
      }
      if (tok_.kind == Tok::End) return at_end();
      if (punct(";")) return;
      advance();  // SETTINGS name = value, ...
    }
  }

  // CREATE ... name [(columns)] [TO t] [AS t | AS SELECT ...] ...: the column
  // list holds types, not calls; AS and TO name tables until the SELECT.
  void create(SqlStatementFacts& st) {
    object(st, "CREATE");
    if (!error_.empty()) return;
    if (punct("(")) skip_group(nullptr);
    while (error_.empty() && tok_.kind != Tok::End && !punct(";")) {
      if (word("SELECT") || word("WITH")) return scan(st, false);
      if (word("AS") || word("TO")) {
        advance();
        if (name_token() && !word("SELECT") && !word("WITH")) {
          std::string name = qualified_name();
          if (punct("(")) {  // AS a table function: CREATE TABLE t AS url(...)
            add_once(st.functions, name);
            skip_group(&st);
          } else {
            add_once(st.tables, name);
          }
        }
        continue;
      }
      step(st, false);
    }
    if (tok_.kind == Tok::End) at_end();
  }

  // RENAME TABLE a TO b, c TO d [ON CLUSTER x]: every name a table.
  void rename(SqlStatementFacts& st) {
    while (error_.empty() && tok_.kind != Tok::End && !punct(";")) {
      if (word("TABLE") || word("DICTIONARY") || word("DATABASE") || word("TO") || punct(",")) {
        advance();
      } else if (word("ON")) {
        advance();
        if (word("CLUSTER")) advance();
        if (name_token()) advance();
      } else if (name_token()) {
        add_once(st.tables, qualified_name());
      } else {
        return fail("RENAME: an unexpected '" + tok_.text + "' at position " + std::to_string(tok_.pos + 1));
      }
    }
    if (tok_.kind == Tok::End) at_end();
  }

  // Past a balanced group whose '(' is the current token, reading its calls
  // into `st` when set.
  void skip_group(SqlStatementFacts* st) {
    if (!punct("(")) return;
    const size_t base = depth_.size();
    depth_.push_back(false);
    advance();
    while (error_.empty() && depth_.size() > base && tok_.kind != Tok::End) {
      if (st != nullptr) {
        step(*st, false);
      } else {
        if (punct("(")) depth_.push_back(false);
        if (punct(")")) depth_.pop_back();
        advance();
      }
    }
    if (depth_.size() > base) at_end();
    if (tok_.kind == Tok::End && whole_ && depth_.size() > base) fail("an unclosed '(' at the end of the SQL");
  }

  // The rest of a statement: tables after FROM and JOIN, calls, and (ALTER)
  // each action's verb.
  void scan(SqlStatementFacts& st, bool alter) {
    bool action_start = alter;
    while (error_.empty() && tok_.kind != Tok::End && !(punct(";") && depth_.empty())) {
      if (action_start && tok_.kind == Tok::Word) {
        const std::string w = upper(tok_.text);
        if (w == "ON") {  // ON CLUSTER name, before the actions
          advance();
          if (word("CLUSTER")) advance();
          if (name_token()) advance();
          continue;
        }
        if (one_of(w, {"DELETE", "UPDATE", "DROP", "DETACH", "ATTACH", "CLEAR", "REPLACE", "FREEZE", "ADD", "MODIFY",
                       "COMMENT", "MOVE", "FETCH", "MATERIALIZE", "RENAME", "REMOVE", "UNFREEZE"}))
          add_once(st.verbs, w);
        action_start = false;
      }
      if (alter && depth_.empty() && punct(",")) action_start = true;
      step(st, true);
    }
    if (tok_.kind == Tok::End) {
      if (!lx_.error().empty()) return;
      if (!whole_) return at_end();
      if (!depth_.empty()) fail("an unclosed '(' at the end of the SQL");
    }
  }

  // What follows FROM or JOIN: a table, a table function, or a subquery.
  void table_ref(SqlStatementFacts& st) {
    from_list_ = true;
    from_depth_ = depth_.size();
    if (!name_token()) return;  // a subquery's '(' is read as any group
    std::string name = qualified_name();
    if (punct("(")) {
      add_once(st.functions, name);
      depth_.push_back(true);
      advance();
    } else {
      add_once(st.tables, name);
    }
  }

  // One token of a statement's body.
  void step(SqlStatementFacts& st, bool tables) {
    if (punct("(")) {
      depth_.push_back(false);
      advance();
      return;
    }
    if (punct(")")) {
      if (!depth_.empty()) depth_.pop_back();
      advance();
      return;
    }
    if (from_list_ && depth_.size() < from_depth_) from_list_ = false;
    if (from_list_ && depth_.size() == from_depth_ && tok_.kind == Tok::Word &&
        one_of(upper(tok_.text), {"WHERE", "PREWHERE", "GROUP", "ORDER", "LIMIT", "HAVING", "UNION", "SETTINGS",
                                  "FORMAT", "JOIN", "ON", "USING", "ARRAY", "INTO", "SAMPLE", "FINAL", "WITH"}))
      from_list_ = false;
    const bool next_in_list = from_list_ && depth_.size() == from_depth_ && punct(",");  // FROM a, b
    if (tables && (word("FROM") || word("JOIN") || next_in_list)) {
      const bool in_call = !depth_.empty() && depth_.back();
      const bool array_join = word("JOIN") && prev_word_ == "ARRAY";
      advance();
      if (!in_call && !array_join) table_ref(st);
      return;
    }
    if (name_token()) {
      const bool is_word = tok_.kind == Tok::Word;
      std::string name = tok_.text;
      advance();
      if (punct("(") && !(is_word && keyword_before_paren(upper(name)))) {
        add_once(st.functions, name);
        depth_.push_back(true);
        advance();
      }
      return;
    }
    advance();
  }

  Lexer lx_;
  bool whole_;
  Token tok_;
  std::string prev_word_;  // the token before the current one, uppercase, when a word
  std::string error_;
  bool data_begun_ = false;
  std::vector<bool> depth_;  // the open parentheses: true for a call's
  bool from_list_ = false;   // in a FROM's list of tables, at from_depth_
  size_t from_depth_ = 0;
};

}  // namespace clickhouse_sql_detail

ClickHouseSqlFacts clickhouse_sql_facts(std::string_view sql, bool whole) {
  return clickhouse_sql_detail::Reader(sql, whole).read();
}

ClickHouseRequestSql::ClickHouseRequestSql(std::string_view target, bool body_encoded) : body_encoded_(body_encoded) {
  const size_t q = target.find('?');
  if (q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    query = query.substr(0, query.find('#'));
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      const size_t eq = pair.find('=');
      const std::string_view key = pair.substr(0, eq);
      const std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      if (key == "decompress" && value != "0" && !value.empty()) body_encoded_ = true;
      if (key != "query" || !query_.empty() || !bad_query_.empty()) continue;
      if (auto decoded = percent_decode(value, true)) {
        query_ = std::move(*decoded);
      } else {
        bad_query_ = "the query parameter has a malformed percent escape";
      }
    }
  }
  settled_ = !bad_query_.empty() || clickhouse_sql_facts(query_, false).data_begun;
}

bool ClickHouseRequestSql::feed(std::string_view body) {
  if (settled_) return true;
  const size_t room = kClickHouseSqlBodyBytes - body_.size();
  body_.append(body.substr(0, room));
  if (body_encoded_ && !body_.empty()) settled_ = true;  // unreadable whatever follows
  if (body_.size() >= kClickHouseSqlBodyBytes || clickhouse_sql_facts(text(), false).data_begun) settled_ = true;
  return settled_;
}

std::string ClickHouseRequestSql::text() const { return query_.empty() ? body_ : query_ + "\n" + body_; }

SqlFacts ClickHouseRequestSql::facts(bool body_end) const {
  SqlFacts f;
  if (!bad_query_.empty()) {
    f.error = bad_query_;
    return f;
  }
  ClickHouseSqlFacts ch = clickhouse_sql_facts(query_, false);
  if (ch.data_begun) return ch.facts;  // the body is the INSERT's data
  if (body_encoded_ && !body_.empty()) {
    f.error = "the body is compressed, so the SQL in it cannot be read";
    return f;
  }
  const bool whole = body_end && body_.size() < kClickHouseSqlBodyBytes;
  return clickhouse_sql_facts(text(), whole).facts;
}

}  // namespace faultline
