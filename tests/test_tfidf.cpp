// TF-IDF: hand-computed corpora, the golden file written by REAL Keras (tests/golden/make_tfidf_golden.py),
// and random corpora against a plain map-based reference built on text.hpp's tokenize().
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "data/text.hpp"
#include "data/tfidf.hpp"

using namespace dtrain::data;
namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;

namespace {

std::vector<std::vector<float>> dense_rows(const SparseRows& rows) {
  std::vector<std::vector<float>> dense(size_t(rows.rows()), std::vector<float>(size_t(rows.columns), 0.0f));
  for (int64_t r = 0; r < rows.rows(); ++r) {
    for (int64_t k = rows.offsets[size_t(r)]; k < rows.offsets[size_t(r) + 1]; ++k) {
      if (k > rows.offsets[size_t(r)]) CHECK(rows.indices[size_t(k)] > rows.indices[size_t(k) - 1]);
      CHECK(rows.values[size_t(k)] != 0.0f);
      dense[size_t(r)][size_t(rows.indices[size_t(k)])] = rows.values[size_t(k)];
    }
  }
  return dense;
}

// The definition, spelled out with std::map and no shared code but tokenize().
struct Reference {
  std::vector<std::string> vocabulary;
  std::vector<float> idf;
  std::vector<std::vector<float>> rows;
};

Reference reference_tfidf(const std::vector<std::string>& docs, int64_t max_tokens) {
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // token -> (count, doc_freq)
  for (const std::string& doc : docs) {
    Tokens tokens = tokenize(doc);
    for (const std::string& token : tokens) counts[token].first += 1;
    for (const std::string& token : std::set<std::string>(tokens.begin(), tokens.end())) counts[token].second += 1;
  }
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first : a.first > b.first;
  });
  ranked.resize(std::min(ranked.size(), size_t(max_tokens - 1)));
  Reference reference{{"[UNK]"}, {0.0f}, {}};
  double sum = 0;
  for (const auto& [token, count] : ranked) {
    reference.vocabulary.push_back(token);
    reference.idf.push_back(float(std::log(1.0 + double(docs.size()) / (1.0 + double(count.second)))));
    sum += reference.idf.back();
  }
  reference.idf[0] = float(sum / double(ranked.size()));
  for (const std::string& doc : docs) {
    std::vector<float> row(reference.vocabulary.size(), 0.0f);
    for (const std::string& token : tokenize(doc)) {
      auto at = std::find(reference.vocabulary.begin() + 1, reference.vocabulary.end(), token);
      row[at == reference.vocabulary.end() ? 0 : size_t(at - reference.vocabulary.begin())] += 1.0f;
    }
    for (size_t c = 0; c < row.size(); ++c) row[c] *= reference.idf[c];
    reference.rows.push_back(row);
  }
  return reference;
}

std::string random_doc(std::mt19937_64& random) {
  // Few distinct letters so tokens repeat and tie; punctuation, all six spaces, upper case, high bytes, NUL.
  static const std::string alphabet = std::string("abcAB.,'-!<>/ \t\n\r\v\f  \xC3\xA9\xFF") + '\0';
  std::uniform_int_distribution<int> length(0, 60), pick(0, int(alphabet.size()) - 1), word(1, 30);
  std::string doc;
  int size = length(random);
  for (int i = 0; i < size; ++i) {
    if (random() % 7 == 0) {  // sometimes a long token, to cross 8- and 64-byte boundaries
      doc += std::string(size_t(word(random)), char('a' + random() % 2)) + " ";
    } else {
      doc += alphabet[size_t(pick(random))];
    }
  }
  return doc;
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

struct GoldenCase {
  std::string name;
  int64_t max_tokens = 0;
  std::vector<std::string> docs;
  std::vector<std::string> vocabulary;
  std::vector<float> idf;
  std::vector<std::vector<float>> rows;
};

std::vector<GoldenCase> read_golden(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "case") {
      GoldenCase golden;
      std::string word;
      fields >> golden.name >> word >> golden.max_tokens;
      cases.push_back(golden);
    } else if (kind == "doc") {
      std::string hex;
      fields >> hex;
      cases.back().docs.push_back(from_hex(hex));
    } else if (kind == "token") {
      std::string hex;
      float weight;
      fields >> hex >> weight;
      cases.back().vocabulary.push_back(from_hex(hex));
      cases.back().idf.push_back(weight);
    } else if (kind == "row") {
      std::vector<float> row;
      float value;
      while (fields >> value) row.push_back(value);
      cases.back().rows.push_back(row);
    }
  }
  return cases;
}

bool close(float a, float b) { return std::fabs(a - b) <= 2e-7f * std::max(1.0f, std::fabs(b)); }

fs::path source_folder() { return fs::path(__FILE__).parent_path().parent_path(); }

}  // namespace

TEST_CASE("hand-computed: counts decide the vocabulary, OOV tokens count toward [UNK]") {
  // "a" occurs 5 times in one document, "b" once in each of three: Keras ranks by total count.
  std::vector<std::string> docs = {"a a a a a", "b", "b", "B x"};
  TfidfVectorizer vectorizer = TfidfVectorizer::fit(docs, 3);
  CHECK(vectorizer.vocabulary() == Tokens{"[UNK]", "a", "b"});
  float idf_a = float(std::log(1.0 + 4.0 / 2.0));  // in 1 of 4 docs
  float idf_b = float(std::log(1.0 + 4.0 / 4.0));  // in 3 of 4 docs
  CHECK(vectorizer.idf()[1] == idf_a);
  CHECK(vectorizer.idf()[2] == idf_b);
  CHECK(vectorizer.idf()[0] == float((double(idf_a) + double(idf_b)) / 2));
  auto rows = dense_rows(vectorizer.transform(docs));
  CHECK(rows[0] == std::vector<float>{0, 5 * idf_a, 0});
  CHECK(rows[1] == std::vector<float>{0, 0, idf_b});
  CHECK(rows[3] == std::vector<float>{vectorizer.idf()[0], 0, idf_b});  // "x" is out of vocabulary
}

TEST_CASE("hand-computed: ties go to the larger token bytes") {
  TfidfVectorizer vectorizer = TfidfVectorizer::fit(std::vector<std::string>{"apple zebra mango", "Zebra apple mango"}, 3);
  CHECK(vectorizer.vocabulary() == Tokens{"[UNK]", "zebra", "mango"});
  // Bytes compare unsigned: "\xC3\xA9" (é) ranks above every ASCII token of the same count.
  TfidfVectorizer bytes = TfidfVectorizer::fit(std::vector<std::string>{"z \xC3\xA9 y"}, 3);
  CHECK(bytes.vocabulary() == Tokens{"[UNK]", "\xC3\xA9", "z"});
}

TEST_CASE("golden: equal to real Keras TextVectorization(output_mode='tf_idf')") {
  std::vector<GoldenCase> cases = read_golden(source_folder() / "tests" / "golden" / "tfidf_small.txt");
  REQUIRE(cases.size() >= 4);
  for (const GoldenCase& golden : cases) {
    INFO("case ", golden.name);
    for (int threads : {1, 2, 3}) {
      TfidfVectorizer::FittedRows fitted = TfidfVectorizer::fit_transform(golden.docs, golden.max_tokens, threads);
      CHECK(fitted.vectorizer.vocabulary() == golden.vocabulary);
      REQUIRE(fitted.vectorizer.idf().size() == golden.idf.size());
      for (size_t i = 0; i < golden.idf.size(); ++i) CHECK(close(fitted.vectorizer.idf()[i], golden.idf[i]));
      for (const auto& rows : {dense_rows(fitted.rows), dense_rows(fitted.vectorizer.transform(golden.docs, threads))}) {
        REQUIRE(rows.size() == golden.rows.size());
        for (size_t r = 0; r < rows.size(); ++r) {
          REQUIRE(rows[r].size() == golden.rows[r].size());
          for (size_t c = 0; c < rows[r].size(); ++c) CHECK_MESSAGE(close(rows[r][c], golden.rows[r][c]), "row ", r, " column ", c);
        }
      }
    }
  }
}

TEST_CASE("random corpora: fit_transform, transform and transform_dense equal the plain definition") {
  std::mt19937_64 random(2024);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::string> docs(size_t(1 + random() % 40));
    for (std::string& doc : docs) doc = random_doc(random);
    docs.push_back("aa bb cc");  // at least one token
    int64_t max_tokens = int64_t(2 + random() % 30);
    Reference reference = reference_tfidf(docs, max_tokens);
    for (int threads : {1, 2, 4}) {
      TfidfVectorizer::FittedRows fitted = TfidfVectorizer::fit_transform(docs, max_tokens, threads);
      REQUIRE(fitted.vectorizer.vocabulary() == reference.vocabulary);
      CHECK(fitted.vectorizer.idf() == reference.idf);
      CHECK(dense_rows(fitted.rows) == reference.rows);
      CHECK(dense_rows(fitted.vectorizer.transform(docs, threads)) == reference.rows);
    }
    TfidfVectorizer vectorizer = TfidfVectorizer::fit(docs, max_tokens);
    for (size_t d = 0; d < docs.size(); ++d) CHECK(vectorizer.transform_dense(docs[d]) == reference.rows[d]);
  }
}

// The counter's hash table starts at 2^14 slots and doubles at half full: 40,000 distinct tokens make it
// grow twice, through tables both under and over the 2 MiB a huge page takes (the real IMDB vocabulary,
// whose fit once crashed on a table allocated with less than its slots' 64-byte alignment).
TEST_CASE("a vocabulary that outgrows the counter's first tables still counts every token") {
  std::vector<std::string> docs;
  for (int d = 0; d < 400; ++d) {
    std::string doc;
    for (int t = 0; t < 100; ++t) doc += fmt::format("token{}x{} ", d * 100 + t, t % 7);
    doc += "common";
    docs.push_back(doc);
  }
  for (int threads : {1, 2}) {
    TfidfVectorizer::FittedRows fitted = TfidfVectorizer::fit_transform(docs, 50000, threads);
    CHECK(fitted.vectorizer.vocabulary().size() == 40002);  // [UNK], common, and 40,000 tokens
    CHECK(fitted.vectorizer.vocabulary()[1] == "common");
  }
}

TEST_CASE("save and load give back the same vectorizer, bit for bit") {
  fs::path folder = fs::temp_directory_path() / ("dtrain_test_tfidf_" + std::to_string(getpid()));
  fs::remove_all(folder);
  std::vector<std::string> docs = {"The café, the CAFÉ!", "one two three two", "x y z z z"};
  TfidfVectorizer vectorizer = TfidfVectorizer::fit(docs, 6);
  vectorizer.save(folder.string());
  std::ifstream vocabulary_file(folder / "vocabulary.txt");
  std::string first;
  std::getline(vocabulary_file, first);
  CHECK(first == "[UNK]");
  TfidfVectorizer loaded = TfidfVectorizer::load(folder.string());
  CHECK(loaded.vocabulary() == vectorizer.vocabulary());
  CHECK(loaded.idf() == vectorizer.idf());
  CHECK(dense_rows(loaded.transform(docs)) == dense_rows(vectorizer.transform(docs)));

  auto write = [&](const char* name, const std::string& text) { std::ofstream(folder / name) << text; };
  write("idf_weights.txt", "1\n2\n");
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);  // 6 tokens, 2 weights
  write("vocabulary.txt", "[UNK]\nfine\n");
  write("idf_weights.txt", "1\nnot-a-number\n");
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);
  write("vocabulary.txt", "first\nsecond\n");
  write("idf_weights.txt", "1\n2\n");
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);  // [UNK] must come first
  write("vocabulary.txt", "[UNK]\ntwice\ntwice\n");
  write("idf_weights.txt", "1\n2\n3\n");
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);
  write("vocabulary.txt", "[UNK]\nNot Standard\n");
  write("idf_weights.txt", "1\n2\n");
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);
  fs::remove_all(folder);
  CHECK_THROWS_AS(TfidfVectorizer::load(folder.string()), dtrain::UsageError);
}

TEST_CASE("bad arguments are usage errors") {
  std::vector<std::string> docs = {"a b"};
  CHECK_THROWS_AS(TfidfVectorizer::fit(docs, 1), dtrain::UsageError);  // Keras refuses max_tokens < 2 too
  CHECK_THROWS_AS(TfidfVectorizer::fit(std::vector<std::string>{"", "..."}, 10), dtrain::UsageError);
  CHECK_THROWS_AS(TfidfVectorizer::fit(std::vector<std::string>{}, 10), dtrain::UsageError);
  TfidfVectorizer small = TfidfVectorizer::fit(docs, 100);
  CHECK(small.size() == 3);  // fewer distinct tokens than max_tokens: a smaller vocabulary, like Keras
  CHECK(small.transform(std::vector<std::string>{}).rows() == 0);
}
