// Token ids (Keras TextVectorization output_mode='int'): hand-computed cases following Keras' rules, the golden
// file written by REAL Keras (tests/golden/make_text_ids_golden.py), and random corpora against a plain
// map-based definition built on text.hpp's tokenize().
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "data/text.hpp"
#include "data/text_ids.hpp"

using namespace dtrain;
using namespace dtrain::data;
namespace fs = std::filesystem;
using Tokens = std::vector<std::string>;
using Ids = std::vector<float>;

namespace {

// The definition with std::map: count tokens, rank by count then bytes (both descending), "" and "[UNK]" first.
TokenIdVectorizer reference_fit(const std::vector<std::string>& docs, int64_t max_tokens, int64_t length,
                                Tokens* vocabulary_out) {
  std::map<std::string, int64_t> counts;
  for (const std::string& doc : docs)
    for (const std::string& token : tokenize(doc)) counts[token] += 1;
  std::vector<std::pair<std::string, int64_t>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first > b.first;
  });
  if (max_tokens > 0) ranked.resize(std::min(ranked.size(), size_t(max_tokens - 2)));
  Tokens vocabulary{"", "[UNK]"};
  for (const auto& entry : ranked) vocabulary.push_back(entry.first);
  *vocabulary_out = vocabulary;
  return TokenIdVectorizer::from_vocabulary(vocabulary, length);
}

Ids reference_ids(const Tokens& vocabulary, const std::string& doc, int64_t length) {
  Ids ids(size_t(length), 0.0f);
  Tokens tokens = tokenize(doc);
  for (size_t i = 0; i < tokens.size() && i < ids.size(); ++i) {
    auto at = std::find(vocabulary.begin() + 2, vocabulary.end(), tokens[i]);
    ids[i] = at == vocabulary.end() ? 1.0f : float(at - vocabulary.begin());
  }
  return ids;
}

Ids row(const Ids& all, int64_t r, int64_t length) {
  return Ids(all.begin() + r * length, all.begin() + (r + 1) * length);
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

struct GoldenCase {
  std::string name;
  int64_t max_tokens = 0, sequence_length = 0;
  std::vector<std::string> docs;
  Tokens vocabulary;
  std::vector<Ids> ids;
};

std::vector<GoldenCase> read_golden(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, word, hex;
    fields >> kind;
    if (kind == "case") {
      GoldenCase golden;
      fields >> golden.name >> word >> golden.max_tokens >> word >> golden.sequence_length;
      cases.push_back(golden);
    } else if (kind == "doc") {
      fields >> hex;
      cases.back().docs.push_back(from_hex(hex));
    } else if (kind == "token") {
      fields >> hex;
      cases.back().vocabulary.push_back(from_hex(hex));
    } else if (kind == "ids") {
      Ids ids;
      int64_t id;
      while (fields >> id) ids.push_back(float(id));
      cases.back().ids.push_back(ids);
    }
  }
  return cases;
}

fs::path source_folder() { return fs::path(__FILE__).parent_path().parent_path(); }

}  // namespace

TEST_CASE("hand-computed: '' and '[UNK]' first, then tokens by count, ties to the larger bytes") {
  // Counts: d 3, a 2, b 2, c 2 -> d, then c, b, a (ties: larger bytes first).
  const std::vector<std::string> docs = {"b a A, c", "C b d d D!"};
  TokenIdVectorizer all = TokenIdVectorizer::fit(docs, 0, 6);
  CHECK(all.vocabulary() == Tokens{"", "[UNK]", "d", "c", "b", "a"});
  CHECK(all.size() == 6);
  // max_tokens counts "" and "[UNK]": 5 keeps three tokens, and "a" becomes [UNK] (1).
  TokenIdVectorizer five = TokenIdVectorizer::fit(docs, 5, 6);
  CHECK(five.vocabulary() == Tokens{"", "[UNK]", "d", "c", "b"});
  CHECK(five.transform_one("A b. c? D zebra") == Ids{1, 4, 3, 2, 1, 0});
  CHECK(five.id_of("d") == 2);
  CHECK(five.id_of("zebra") == 1);
  // Longer than the vocabulary is fine: Keras keeps every token then.
  CHECK(TokenIdVectorizer::fit(docs, 100, 2).size() == 6);
}

TEST_CASE("hand-computed: sequences keep the first tokens and pad with 0 at the end") {
  TokenIdVectorizer v = TokenIdVectorizer::from_vocabulary({"", "[UNK]", "the", "movie", "was"}, 3);
  CHECK(v.transform_one("The movie was GREAT") == Ids{2, 3, 4});  // truncated: the first three
  CHECK(v.transform_one("movie!") == Ids{3, 0, 0});
  CHECK(v.transform_one("") == Ids{0, 0, 0});
  CHECK(v.transform_one(" ... !!! ") == Ids{0, 0, 0});  // punctuation only: no tokens at all, not [UNK]
  CHECK(v.transform_one("great, was") == Ids{1, 4, 0});
  const std::vector<std::string> docs = {"the was", "x y z w", "movie"};
  CHECK(v.transform(docs, 2) == Ids{2, 4, 0, 1, 1, 1, 3, 0, 0});
}

TEST_CASE("hand-computed: truncating and padding 'pre' keep the last tokens and pad the start (pad_sequences)") {
  const Tokens vocabulary{"", "[UNK]", "the", "movie", "was", "bad"};
  auto with = [&](bool truncate_front, bool pad_front) {
    return TokenIdVectorizer::from_vocabulary(vocabulary, 3, {truncate_front, pad_front});
  };
  // keras.utils.pad_sequences([[2, 3, 4, 1, 5], [3]], maxlen=3, truncating=..., padding=...):
  CHECK(with(true, true).transform_one("The movie was GREAT bad") == Ids{4, 1, 5});  // the last three
  CHECK(with(true, true).transform_one("movie!") == Ids{0, 0, 3});
  CHECK(with(true, false).transform_one("movie!") == Ids{3, 0, 0});
  CHECK(with(false, true).transform_one("The movie was GREAT bad") == Ids{2, 3, 4});
  CHECK(with(false, true).transform_one("the movie") == Ids{0, 2, 3});
  CHECK(with(true, true).transform_one("the movie was") == Ids{2, 3, 4});  // exactly L: unchanged
  CHECK(with(true, true).transform_one("") == Ids{0, 0, 0});
  // Every length around L, against slicing the whole id list.
  const Tokens words{"the", "movie", "was", "x", "bad"};
  for (int count = 0; count <= 8; ++count) {
    std::string doc;
    Ids all;
    for (int i = 0; i < count; ++i) {
      doc += words[size_t(i * 3 % 5)] + " ";
      const auto at = std::find(vocabulary.begin() + 2, vocabulary.end(), words[size_t(i * 3 % 5)]);
      all.push_back(at == vocabulary.end() ? 1.0f : float(at - vocabulary.begin()));
    }
    const size_t kept = std::min<size_t>(all.size(), 3);
    Ids last(all.end() - std::ptrdiff_t(kept), all.end());
    last.insert(last.begin(), 3 - kept, 0.0f);
    CHECK_MESSAGE(with(true, true).transform_one(doc) == last, count << " tokens");
  }
}

TEST_CASE("text_ids: bad settings are usage errors") {
  const std::vector<std::string> docs = {"a b"};
  CHECK_THROWS_WITH_AS(TokenIdVectorizer::fit(docs, 2, 4),
                       "[text_ids] max_tokens must be at least 3 ('', '[UNK]' and one token) or 0 for no limit, got 2",
                       UsageError);
  CHECK_THROWS_WITH_AS(TokenIdVectorizer::fit(docs, 10, 0),
                       "[text_ids] output_sequence_length must be at least 1, got 0", UsageError);
  CHECK_THROWS_AS(TokenIdVectorizer::from_vocabulary({"[UNK]", "a"}, 4), UsageError);
}

TEST_CASE("golden: equal to real Keras TextVectorization(output_mode='int')") {
  std::vector<GoldenCase> cases = read_golden(source_folder() / "tests" / "golden" / "text_ids_small.txt");
  REQUIRE(cases.size() >= 5);
  for (const GoldenCase& golden : cases) {
    INFO("case ", golden.name);
    for (int threads : {1, 2, 3}) {
      TokenIdVectorizer v = TokenIdVectorizer::fit(golden.docs, golden.max_tokens, golden.sequence_length, threads);
      CHECK(v.vocabulary() == golden.vocabulary);
      const Ids ids = v.transform(golden.docs, threads);
      REQUIRE(ids.size() == golden.docs.size() * size_t(golden.sequence_length));
      for (size_t r = 0; r < golden.docs.size(); ++r)
        CHECK_MESSAGE(row(ids, int64_t(r), golden.sequence_length) == golden.ids[r], "document ", r);
    }
  }
}

TEST_CASE("random corpora: fit and transform equal the plain definition") {
  std::mt19937_64 random(2026);
  const std::string alphabet = "abcAB ,.!'\t\n";
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> docs(size_t(1 + random() % 30));
    for (std::string& doc : docs) {
      doc.resize(random() % 40);
      for (char& c : doc) c = alphabet[random() % alphabet.size()];
    }
    docs.push_back("aa bb cc");  // at least one token
    const int64_t max_tokens = trial % 5 == 0 ? 0 : int64_t(3 + random() % 20), length = int64_t(1 + random() % 12);
    Tokens vocabulary;
    reference_fit(docs, max_tokens, length, &vocabulary);
    for (int threads : {1, 2, 4}) {
      TokenIdVectorizer v = TokenIdVectorizer::fit(docs, max_tokens, length, threads);
      REQUIRE(v.vocabulary() == vocabulary);
      const Ids ids = v.transform(docs, threads);
      for (size_t r = 0; r < docs.size(); ++r)
        CHECK(row(ids, int64_t(r), length) == reference_ids(vocabulary, docs[r], length));
    }
  }
}
