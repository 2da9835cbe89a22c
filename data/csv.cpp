#include "data/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace dtrain::data {
namespace {

struct Field {
  std::string text;
  int64_t line = 0, col = 0;  // where it starts, 1-based
};

// RFC 4180 records over the whole text.
class CsvReader {
 public:
  CsvReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {
    if (text_.rfind("\xEF\xBB\xBF", 0) == 0) at_ = 3, col_ = 4;  // a UTF-8 byte order mark
  }

  // The next non-blank record; false at the end of the file.
  bool next(std::vector<Field>& record) {
    record.clear();
    while (at_ < text_.size() && (text_[at_] == '\n' || text_[at_] == '\r')) newline();
    if (at_ >= text_.size()) return false;
    record_line_ = line_;
    while (true) {
      record.push_back(field());
      if (at_ >= text_.size()) return true;
      if (text_[at_] == ',') {
        advance();
        continue;
      }
      newline();  // '\n' or '\r' (field() stops at nothing else)
      return true;
    }
  }

  int64_t record_line() const { return record_line_; }
  [[noreturn]] void fail(int64_t line, int64_t col, const std::string& what) const {
    throw UsageError(fmt::format("[csv] {}:{}:{}: {}", path_, line, col, what));
  }

 private:
  void advance() { ++at_, ++col_; }
  void newline() {
    if (text_[at_] == '\r' && at_ + 1 < text_.size() && text_[at_ + 1] == '\n') ++at_;
    ++at_, ++line_, col_ = 1;
  }

  Field field() {
    Field out{"", line_, col_};
    if (at_ < text_.size() && text_[at_] == '"') {
      advance();
      while (true) {
        if (at_ >= text_.size()) fail(out.line, out.col, "a quoted field is not closed before the end of the file");
        const char c = text_[at_];
        if (c == '"') {
          if (at_ + 1 < text_.size() && text_[at_ + 1] == '"') {
            out.text += '"';
            advance(), advance();
            continue;
          }
          advance();
          break;
        }
        out.text += c;
        if (c == '\n' || (c == '\r' && !(at_ + 1 < text_.size() && text_[at_ + 1] == '\n')))
          ++at_, ++line_, col_ = 1;
        else
          advance();
      }
      if (at_ < text_.size() && text_[at_] != ',' && text_[at_] != '\n' && text_[at_] != '\r')
        fail(line_, col_, fmt::format("unexpected '{}' after a closing quote (a quote inside a quoted field is "
                                      "written \"\")", text_[at_]));
      return out;
    }
    while (at_ < text_.size() && text_[at_] != ',' && text_[at_] != '\n' && text_[at_] != '\r') {
      if (text_[at_] == '"') fail(line_, col_, "a quote inside an unquoted field (quote the whole field)");
      out.text += text_[at_];
      advance();
    }
    return out;
  }

  std::string path_, text_;
  size_t at_ = 0;
  int64_t line_ = 1, col_ = 1, record_line_ = 1;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DTRAIN_CHECK_USAGE(in.good() && !std::filesystem::is_directory(path), "[csv] cannot read '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> header_of(CsvReader& reader, const std::string& path) {
  std::vector<Field> record;
  if (!reader.next(record)) throw UsageError(fmt::format("[csv] '{}' is empty: expected a header row naming the columns", path));
  std::vector<std::string> names;
  for (const Field& field : record) {
    const std::string name = trimmed(field.text);
    if (name.empty()) reader.fail(field.line, field.col, "a column without a name in the header row");
    if (std::find(names.begin(), names.end(), name) != names.end())
      reader.fail(field.line, field.col, fmt::format("column '{}' is named twice in the header row", name));
    names.push_back(name);
  }
  return names;
}

}  // namespace

std::vector<std::string> read_csv_header(const std::string& path) {
  CsvReader reader(path, read_text(path));
  return header_of(reader, path);
}

namespace {

// What read_csv and read_csv_features share: the header, the feature columns, and every row's fields.
struct CsvTable {
  std::vector<float> values;   // the feature columns, row-major
  std::vector<int32_t> labels;  // when the label is read
  std::vector<std::string> columns;
  std::vector<int64_t> lines;
};

// `label_required`: the label column must be there and is read; else it is skipped when there.
CsvTable read_table(const std::string& path, const std::string& label, const std::vector<std::string>& features,
                    bool label_required) {
  CsvReader reader(path, read_text(path));
  const std::vector<std::string> names = header_of(reader, path);
  auto column_of = [&](const std::string& name) -> size_t {
    const auto found = std::find(names.begin(), names.end(), name);
    if (found == names.end())
      reader.fail(1, 1, fmt::format("no column '{}' in the header (columns: {})", name, fmt::join(names, ", ")));
    return size_t(found - names.begin());
  };
  const bool has_label = label_required || std::find(names.begin(), names.end(), label) != names.end();
  const size_t label_column = has_label ? column_of(label) : names.size();
  std::vector<size_t> feature_columns;
  if (features.empty()) {
    for (size_t c = 0; c < names.size(); ++c)
      if (c != label_column) feature_columns.push_back(c);
  } else {
    for (const std::string& name : features) feature_columns.push_back(column_of(name));
  }
  DTRAIN_CHECK_USAGE(!feature_columns.empty(), "[csv] '{}' has no feature column besides the label '{}'", path, label);

  CsvTable table;
  for (size_t c : feature_columns) table.columns.push_back(names[c]);
  std::vector<Field> record;
  while (reader.next(record)) {
    if (record.size() != names.size()) {
      const Field& at = record.size() > names.size() ? record[names.size()] : record.back();
      reader.fail(at.line, at.col, fmt::format("{} fields, but the header names {} columns", record.size(), names.size()));
    }
    if (label_required) {
      const Field& label_field = record[label_column];
      const std::string label_text = trimmed(label_field.text);
      int64_t id = 0;
      const auto [end, error] = std::from_chars(label_text.data(), label_text.data() + label_text.size(), id);
      if (label_text.empty() || error != std::errc() || end != label_text.data() + label_text.size() || id < 0 ||
          id > INT32_MAX)
        reader.fail(label_field.line, label_field.col,
                    fmt::format("label '{}' (column '{}') is not a class id (a whole number >= 0)", label_text, label));
      table.labels.push_back(int32_t(id));
    }
    table.lines.push_back(reader.record_line());
    for (size_t c : feature_columns) {
      const Field& field = record[c];
      const std::string text = trimmed(field.text);
      float value = 0;
      const auto [last, failed] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || failed != std::errc() || last != text.data() + text.size() || !std::isfinite(value))
        reader.fail(field.line, field.col,
                    fmt::format("'{}' (column '{}') is not a finite number", text, names[c]));
      table.values.push_back(value);
    }
  }
  return table;
}

}  // namespace

Dataset read_csv(const std::string& path, const std::string& label, const std::vector<std::string>& features,
                 std::vector<int64_t>* lines) {
  CsvTable table = read_table(path, label, features, true);
  if (lines != nullptr) *lines = std::move(table.lines);
  const int64_t width = int64_t(table.columns.size());
  return Dataset::dense(std::move(table.values), {width}, std::move(table.labels));
}

std::vector<float> read_csv_features(const std::string& path, const std::string& label,
                                     const std::vector<std::string>& features, std::vector<std::string>& columns,
                                     std::vector<int64_t>& lines) {
  CsvTable table = read_table(path, label, features, false);
  columns = std::move(table.columns);
  lines = std::move(table.lines);
  return std::move(table.values);
}

}  // namespace dtrain::data
