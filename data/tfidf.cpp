#include "data/tfidf.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <sys/mman.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "data/text.hpp"

namespace dtrain::data {
namespace {

// Large arrays probed at random (the token counter's hash table: megabytes) ask for 2 MiB pages: with 4 KiB
// pages nearly every probe of a rare token also misses the TLB.
template <class T>
struct HugePageAllocator {
  static constexpr size_t kHugePage = size_t(2) << 20;
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t count) {
    size_t bytes = count * sizeof(T);
    // Aligned as T asks (a Slot is one 64-byte cache line): the compiler may copy it with aligned vector
    // moves, which fault on the 16-byte alignment of plain operator new.
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes, std::align_val_t(alignof(T))));
    void* memory = std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    if (memory == nullptr) throw std::bad_alloc();
    ::madvise(memory, bytes, MADV_HUGEPAGE);  // only advice: without it the table still works
    return static_cast<T*>(memory);
  }
  void deallocate(T* memory, size_t count) {
    if (count * sizeof(T) < kHugePage) ::operator delete(memory, std::align_val_t(alignof(T)));
    else std::free(memory);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// Token bytes are read 8 at a time, so every buffer holding tokens keeps this many readable bytes after
// its last token; bytes past a token's end are masked off.
constexpr size_t kPadding = 8;
constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighBits = 0x8080808080808080ull;

inline uint64_t load_word(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}

// The low `bytes` bytes of a little-endian word (all of it from 8 on).
inline uint64_t low_bytes_mask(size_t bytes) { return bytes >= 8 ? ~0ull : (1ull << (8 * bytes)) - 1; }

// Sets the high bit of each byte of `word` that lies in [low, high] (both < 0x80): SWAR, no branches.
inline uint64_t bytes_in_range(uint64_t word, uint8_t low, uint8_t high) {
  uint64_t seven_bits = word & ~kHighBits;
  uint64_t at_least_low = seven_bits + kOnes * uint64_t(0x80 - low);
  uint64_t above_high = seven_bits + kOnes * uint64_t(0x7f - high);
  return at_least_low & ~above_high & ~word & kHighBits;
}

// The 8 byte flags (high bits) of a word as 8 bits, byte i -> bit i.
inline uint64_t gather_flags(uint64_t flags) { return ((flags >> 7) * 0x0102040810204080ull) >> 56; }

// ASCII lower-case of 8 bytes at once (text.hpp's table, word-wise).
inline uint64_t lower_word(uint64_t word) { return word | (bytes_in_range(word, 'A', 'Z') >> 2); }

inline uint64_t space_flags(uint64_t word) {  // " \t\n\v\f\r", as text.hpp
  return bytes_in_range(word, 0x09, 0x0d) | bytes_in_range(word, 0x20, 0x20);
}
inline uint64_t punctuation_flags(uint64_t word) {  // !"#$%&'()*+,-./ :;<=>?@ [\]^_` {|}~
  return bytes_in_range(word, 0x21, 0x2f) | bytes_in_range(word, 0x3a, 0x40) | bytes_in_range(word, 0x5b, 0x60) |
         bytes_in_range(word, 0x7b, 0x7e);
}

// A token of a document, after standardization: `length` bytes at `bytes` (ASCII upper-case letters may
// still be there: every reader lower-cases words as it loads them), padded; its hash, and its first 8
// lower-cased bytes (zero beyond its length).
struct TokenRef {
  const char* bytes;
  size_t length;
  uint64_t hash;
  uint64_t prefix;
};

inline uint64_t lowered_word_at(const char* bytes, size_t length, size_t offset) {
  return lower_word(load_word(bytes + offset)) & low_bytes_mask(length - offset);
}

inline TokenRef make_token(const char* bytes, size_t length) {
  uint64_t prefix = lowered_word_at(bytes, length, 0);
  uint64_t hash = (0x9e3779b97f4a7c15ull ^ (uint64_t(length) * 0xc2b2ae3d27d4eb4full) ^ prefix) * 0xff51afd7ed558ccdull;
  for (size_t offset = 8; offset < length; offset += 8) {
    hash ^= hash >> 32;
    hash = (hash ^ lowered_word_at(bytes, length, offset)) * 0xff51afd7ed558ccdull;
  }
  hash ^= hash >> 29;
  hash *= 0xc4ceb9fe1a85ec53ull;
  return TokenRef{bytes, length, hash ^ (hash >> 32), prefix};
}

// Whether a token equals `length` stored lower-case bytes at `stored` (padded), from byte `from` on.
inline bool same_tail(const TokenRef& token, const char* stored, size_t from = 8) {
  for (size_t offset = from; offset < token.length; offset += 8)
    if (lowered_word_at(token.bytes, token.length, offset) != (load_word(stored + offset) & low_bytes_mask(token.length - offset)))
      return false;
  return true;
}

// A 32-bit tag that holds the token's length exactly (up to 255) and 24 bits of its hash: with the
// prefix, a tag match is an exact match for tokens of 8 bytes or less.
inline uint32_t tag_of(const TokenRef& token) {
  return (uint32_t(token.hash >> 32) & 0xffffff00u) | uint32_t(std::min<size_t>(token.length, 255));
}

// Appends a token's lower-case bytes to a padded arena; returns where they start.
inline uint64_t store_lowered(std::string& arena, const TokenRef& token) {
  uint64_t offset = arena.size() - kPadding;  // overwrite the trailing padding
  arena.resize(offset + ((token.length + 7) / 8) * 8 + kPadding);
  for (size_t at = 0; at < token.length; at += 8) {
    uint64_t word = lowered_word_at(token.bytes, token.length, at);
    std::memcpy(arena.data() + offset + at, &word, 8);
  }
  arena.resize(offset + token.length + kPadding);
  std::memset(arena.data() + offset + token.length, 0, kPadding);
  return offset;
}

// Splits one document into Keras tokens (standardize, then whitespace split; same tokens as text.hpp's
// tokenize) without copying most of them: whitespace and punctuation are found 8 bytes at a time, a
// token with no punctuation is hashed where it lies, one with punctuation is compacted first.
class Tokenizer {
 public:
  template <class OnToken>
  void for_each(std::string_view doc, OnToken&& on_token) {
    size_t size = doc.size();
    size_t words = size / 64 + 2;  // one more: a sentinel of spaces
    if (text_.size() < words * 64 + kPadding) text_.resize(words * 64 + kPadding);
    if (compacted_.size() < size + kPadding) compacted_.resize(size + kPadding);
    space_bits_.resize(words);
    punctuation_bits_.resize(words);
    char* text = text_.data();
    std::memcpy(text, doc.data(), size);
    std::memset(text + size, ' ', words * 64 - size);  // spaces past the end end the last token
    for (size_t word = 0; word < words; ++word) {
      space_bits_[word] = space_bits_of(text + word * 64);
      punctuation_bits_[word] = punctuation_bits_of(text + word * 64);
    }
    char* compacted_end = compacted_.data();
    auto emit = [&](size_t start, size_t end) {
      if (!any_bit(punctuation_bits_, start, end)) {
        on_token(make_token(text + start, end - start));
        return;
      }
      char* write = compacted_end;
      for (size_t at = start; at < end; ++at) {
        unsigned char c = (unsigned char)text[at];
        *write = char(c);
        write += text_tables::kept[c];
      }
      size_t length = size_t(write - compacted_end);
      if (length == 0) return;  // all punctuation: nothing is left of it
      std::memset(write, 0, kPadding);
      on_token(make_token(compacted_end, length));
      compacted_end = write;  // later tokens go after this one; its padding may be overwritten
    };
    // Token starts (a non-space after a space) and ends (a space after a non-space) alternate; the text
    // ends in spaces, so the last token ends.
    size_t token_start = 0;
    bool in_token = false;
    uint64_t space_before = 1;  // the byte before the text counts as a space
    for (size_t word = 0; word < words; ++word) {
      uint64_t space = space_bits_[word];
      uint64_t after_space = (space << 1) | space_before;  // bit i: byte i - 1 is a space
      space_before = space >> 63;
      for (uint64_t events = (~space & after_space) | (space & ~after_space); events != 0; events &= events - 1) {
        size_t at = word * 64 + size_t(__builtin_ctzll(events));
        if (!in_token) {
          token_start = at;
        } else {
          emit(token_start, at);
        }
        in_token = !in_token;
      }
    }
  }

 private:
#if defined(__AVX2__)
  // Bit i = whether byte i of the 64 at `bytes` is whitespace / punctuation: the SWAR flags below, 32
  // bytes per instruction (signed compares: bytes >= 0x80 are negative, so never match).
  static uint64_t mask_of(const char* bytes, __m256i (*flags)(__m256i)) {
    __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32));
    return uint64_t(uint32_t(_mm256_movemask_epi8(flags(low)))) |
           (uint64_t(uint32_t(_mm256_movemask_epi8(flags(high)))) << 32);
  }
  static __m256i in_range(__m256i c, char low, char high) {  // low - 1 and high + 1 stay below 0x80
    return _mm256_and_si256(_mm256_cmpgt_epi8(c, _mm256_set1_epi8(char(low - 1))),
                            _mm256_cmpgt_epi8(_mm256_set1_epi8(char(high + 1)), c));
  }
  static __m256i space_vector(__m256i c) {  // " \t\n\v\f\r"
    return _mm256_or_si256(_mm256_cmpeq_epi8(c, _mm256_set1_epi8(' ')), in_range(c, 0x09, 0x0d));
  }
  static __m256i punctuation_vector(__m256i c) {  // printable ASCII but no digit or letter
    __m256i folded = _mm256_or_si256(c, _mm256_set1_epi8(0x20));  // 'A'-'Z' -> 'a'-'z'; no other byte lands there
    __m256i alphanumeric = _mm256_or_si256(in_range(c, '0', '9'), in_range(folded, 'a', 'z'));
    return _mm256_andnot_si256(alphanumeric, in_range(c, 0x21, 0x7e));
  }
  static uint64_t space_bits_of(const char* bytes) { return mask_of(bytes, space_vector); }
  static uint64_t punctuation_bits_of(const char* bytes) { return mask_of(bytes, punctuation_vector); }
#else
  static uint64_t space_bits_of(const char* bytes) {
    uint64_t bits = 0;
    for (size_t at = 0; at < 64; at += 8) bits |= gather_flags(space_flags(load_word(bytes + at))) << at;
    return bits;
  }
  static uint64_t punctuation_bits_of(const char* bytes) {
    uint64_t bits = 0;
    for (size_t at = 0; at < 64; at += 8) bits |= gather_flags(punctuation_flags(load_word(bytes + at))) << at;
    return bits;
  }
#endif

  // Whether any bit in [begin, end) is set.
  static bool any_bit(const std::vector<uint64_t>& bits, size_t begin, size_t end) {
    size_t first = begin / 64, last = (end - 1) / 64;
    uint64_t head = ~0ull << (begin % 64);
    uint64_t tail = ~0ull >> (63 - (end - 1) % 64);
    if (first == last) return (bits[first] & head & tail) != 0;
    if (bits[first] & head) return true;
    for (size_t index = first + 1; index < last; ++index)
      if (bits[index]) return true;
    return (bits[last] & tail) != 0;
  }

  std::vector<char> text_;       // the document, padded with spaces to whole 64-byte words
  std::vector<char> compacted_;  // tokens with their punctuation removed
  std::vector<uint64_t> space_bits_;
  std::vector<uint64_t> punctuation_bits_;
};

// Every distinct token of a range of documents with its total count and the number of documents holding
// it. Open addressing; a slot carries the counts and enough of the key (prefix + tag) to settle most
// lookups in one cache line; full token bytes live in a padded arena, so the table owns its keys.
class TokenCounter {
 public:
  // One cache line: tokens of up to 16 bytes are settled without reading the arena.
  struct alignas(64) Slot {
    uint64_t prefix;
    uint64_t second;  // lower-case bytes 8..15 (zero beyond the token's length)
    uint32_t tag;
    uint32_t entry;  // entry index + 1; 0 = empty
    uint32_t doc_freq;
    uint32_t last_doc;  // the last document that counted toward doc_freq
    uint64_t count;
    uint64_t offset;  // of the token's bytes in arena_
  };
  struct Entry {
    uint64_t hash;
    uint64_t offset;  // into arena_
    uint64_t length;
    uint64_t slot;
  };
  static constexpr uint32_t kNoDoc = UINT32_MAX;

  TokenCounter() : slots_(size_t(1) << 14, Slot{}), mask_((size_t(1) << 14) - 1) { arena_.assign(kPadding, '\0'); }

  // The token's entry index (stable: entries are only appended).
  uint32_t add(const TokenRef& token, uint32_t doc) {
    Slot& slot = find_or_insert(token);
    slot.count += 1;
    if (slot.last_doc != doc) {
      slot.doc_freq += 1;
      slot.last_doc = doc;
    }
    return slot.entry - 1;
  }

  void prefetch(const TokenRef& token) const { __builtin_prefetch(&slots_[token.hash & mask_], 1); }

  // Adds `other`'s counts (the two counted disjoint documents); returns, for each of other's entries,
  // its entry index here.
  std::vector<uint32_t> merge(const TokenCounter& other) {
    std::vector<uint32_t> where(other.entries_.size());
    constexpr size_t kAhead = 16;  // slots requested from memory ahead of their lookup
    for (size_t k = 0; k < other.entries_.size(); ++k) {
      if (k + kAhead < other.entries_.size()) __builtin_prefetch(&slots_[other.entries_[k + kAhead].hash & mask_], 1);
      const Entry& theirs = other.entries_[k];
      const Slot& their_slot = other.slots_[theirs.slot];
      // Their arena holds the lower-case bytes, so make_token's hash is the one they stored.
      const char* bytes = other.arena_.data() + theirs.offset;
      TokenRef token{bytes, theirs.length, theirs.hash, lowered_word_at(bytes, theirs.length, 0)};
      Slot& mine = find_or_insert(token);
      mine.count += their_slot.count;
      mine.doc_freq += their_slot.doc_freq;
      where[their_slot.entry - 1] = mine.entry - 1;
    }
    return where;
  }

  size_t size() const { return entries_.size(); }
  std::string_view token(uint32_t entry) const {
    return std::string_view(arena_.data() + entries_[entry].offset, entries_[entry].length);
  }
  uint64_t count(uint32_t entry) const { return slots_[entries_[entry].slot].count; }
  uint64_t doc_freq(uint32_t entry) const { return slots_[entries_[entry].slot].doc_freq; }

 private:
  Slot& find_or_insert(const TokenRef& token) {
    uint32_t tag = tag_of(token);
    uint64_t second = token.length > 8 ? lowered_word_at(token.bytes, token.length, 8) : 0;
    for (uint64_t index = token.hash & mask_;; index = (index + 1) & mask_) {
      Slot& slot = slots_[index];
      if (slot.entry == 0) return insert(index, token, tag, second);
      if (slot.tag == tag && slot.prefix == token.prefix && slot.second == second &&
          (token.length <= 16 || same_tail(token, arena_.data() + slot.offset, 16)))
        return slot;
    }
  }

  Slot& insert(uint64_t index, const TokenRef& token, uint32_t tag, uint64_t second) {
    uint64_t offset = store_lowered(arena_, token);
    entries_.push_back(Entry{token.hash, offset, token.length, index});
    slots_[index] = Slot{token.prefix, second, tag, uint32_t(entries_.size()), 0, kNoDoc, 0, offset};
    if (entries_.size() * 2 <= slots_.size()) return slots_[index];
    grow();
    return slots_[entries_.back().slot];
  }

  void grow() {
    std::vector<Slot, HugePageAllocator<Slot>> old(slots_.size() * 2, Slot{});
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.entry == 0) continue;
      Entry& entry = entries_[slot.entry - 1];
      uint64_t index = entry.hash & mask_;
      while (slots_[index].entry != 0) index = (index + 1) & mask_;
      slots_[index] = slot;
      entry.slot = index;
    }
  }

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  uint64_t mask_;
  std::vector<Entry> entries_;
  std::string arena_;  // lower-case token bytes back to back, then kPadding bytes
};

// Per-document token ids of a range of documents (fit_transform keeps them to skip a second tokenization).
struct TokenIds {
  std::vector<uint32_t> ids;
  std::vector<int64_t> offsets{0};
};

// Counts the columns of one document into sparse row entries: output = count * idf[column].
class RowBuilder {
 public:
  explicit RowBuilder(int64_t size) : counts_(size_t(size), 0), bits_((size_t(size) + 63) / 64, 0) {}
  void add(int32_t column) {
    if (counts_[size_t(column)]++ == 0) {
      touched_.push_back(column);
      bits_[size_t(column) / 64] |= 1ull << (column % 64);
    }
  }
  void finish_row(const std::vector<float>& idf, SparseRows& rows) {
    // Columns in increasing order: scan the bitmap when it is short next to the row, else sort.
    if (bits_.size() <= 4 * touched_.size()) {
      for (size_t word = 0; word < bits_.size(); ++word) {
        for (uint64_t bits = bits_[word]; bits != 0; bits &= bits - 1) emit(int32_t(word * 64 + size_t(__builtin_ctzll(bits))), idf, rows);
        bits_[word] = 0;
      }
    } else {
      std::sort(touched_.begin(), touched_.end());
      for (int32_t column : touched_) {
        emit(column, idf, rows);
        bits_[size_t(column) / 64] = 0;
      }
    }
    touched_.clear();
    rows.offsets.push_back(int64_t(rows.indices.size()));
  }

 private:
  void emit(int32_t column, const std::vector<float>& idf, SparseRows& rows) {
    rows.indices.push_back(column);
    // Keras: bincount as float32, times the float32 idf.
    rows.values.push_back(float(counts_[size_t(column)]) * idf[size_t(column)]);
    counts_[size_t(column)] = 0;
  }

  std::vector<int32_t> counts_;
  std::vector<uint64_t> bits_;
  std::vector<int32_t> touched_;
};

SparseRows concatenate(std::vector<SparseRows>& parts, int64_t columns) {
  SparseRows all = std::move(parts[0]);
  all.columns = columns;
  for (size_t k = 1; k < parts.size(); ++k) all.append(parts[k]);
  return all;
}

int range_count(int threads, size_t docs) {
  return int(std::max<int64_t>(1, std::min<int64_t>(threads, int64_t(docs))));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DTRAIN_CHECK_USAGE(in.good(), "[tfidf] cannot open '{}'", path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

// Vocabulary token -> column; column 0 ("[UNK]") is never stored, so a miss means out of vocabulary.
struct TfidfVectorizer::Index {
  struct Slot {
    uint64_t prefix = 0;
    uint32_t tag = 0;
    int32_t column = 0;  // 0 = empty
  };
  std::vector<Slot> slots;
  uint64_t mask = 0;
  std::string arena;  // lower-case tokens back to back, padded
  std::vector<uint64_t> offsets;

  explicit Index(const std::vector<std::string>& vocabulary) {
    size_t capacity = 16;
    while (capacity < vocabulary.size() * 4) capacity *= 2;
    slots.resize(capacity);
    mask = capacity - 1;
    arena.assign(kPadding, '\0');
    offsets.push_back(0);
    for (size_t column = 1; column < vocabulary.size(); ++column) {
      std::string padded = vocabulary[column] + std::string(kPadding, '\0');
      TokenRef token = make_token(padded.data(), vocabulary[column].size());
      offsets.push_back(store_lowered(arena, token));
      uint64_t index = token.hash & mask;
      while (slots[index].column != 0) index = (index + 1) & mask;
      slots[index] = Slot{token.prefix, tag_of(token), int32_t(column)};
    }
  }

  int32_t find(const TokenRef& token) const {
    uint32_t tag = tag_of(token);
    for (uint64_t index = token.hash & mask;; index = (index + 1) & mask) {
      const Slot& slot = slots[index];
      if (slot.column == 0) return 0;
      if (slot.tag == tag && slot.prefix == token.prefix &&
          (token.length <= 8 || same_tail(token, arena.data() + offsets[size_t(slot.column)])))
        return slot.column;
    }
  }
};

TfidfVectorizer::TfidfVectorizer(std::vector<std::string> vocabulary, std::vector<float> idf)
    : vocabulary_(std::move(vocabulary)), idf_(std::move(idf)) {
  DTRAIN_CHECK_USAGE(!vocabulary_.empty() && vocabulary_[0] == unknown_token,
                     "[tfidf] a vocabulary starts with '{}'", unknown_token);
  DTRAIN_CHECK_USAGE(vocabulary_.size() == idf_.size(), "[tfidf] {} tokens but {} idf weights",
                     vocabulary_.size(), idf_.size());
  DTRAIN_CHECK_USAGE(vocabulary_.size() < size_t(INT32_MAX), "[tfidf] vocabulary too large");
  for (size_t column = 1; column < vocabulary_.size(); ++column) {
    std::vector<std::string> tokens = tokenize(vocabulary_[column]);
    DTRAIN_CHECK_USAGE(tokens.size() == 1 && tokens[0] == vocabulary_[column],
                       "[tfidf] vocabulary entry {} ('{}') is not a standardized token", column, vocabulary_[column]);
  }
  index_ = std::make_shared<const Index>(vocabulary_);
  for (size_t column = 1; column < vocabulary_.size(); ++column) {
    DTRAIN_CHECK_USAGE(column_of(vocabulary_[column]) == int32_t(column), "[tfidf] token '{}' appears twice in the vocabulary",
                       vocabulary_[column]);
  }
}

TfidfVectorizer TfidfVectorizer::from_weights(std::vector<std::string> vocabulary, std::vector<float> idf) {
  return TfidfVectorizer(std::move(vocabulary), std::move(idf));
}

int32_t TfidfVectorizer::column_of(std::string_view token) const {
  if (token.empty()) return 0;
  std::string padded(token);
  padded.append(kPadding, '\0');
  return index_->find(make_token(padded.data(), token.size()));
}

TfidfVectorizer::FittedRows TfidfVectorizer::fit_transform(std::span<const std::string> docs, int64_t max_tokens,
                                                           int threads) {
  DTRAIN_CHECK_USAGE(max_tokens >= 2, "[tfidf] max_tokens must be at least 2 ('[UNK]' and one token), got {}",
                     max_tokens);
  DTRAIN_CHECK_USAGE(docs.size() < size_t(TokenCounter::kNoDoc), "[tfidf] too many documents ({})", docs.size());
  int ranges = range_count(threads, docs.size());
  std::vector<TokenCounter> counters(static_cast<size_t>(ranges));
  std::vector<TokenIds> token_ids(static_cast<size_t>(ranges));
  parallel_ranges(int64_t(docs.size()), ranges, [&](int range, int64_t begin, int64_t end) {
    TokenCounter& counter = counters[size_t(range)];
    TokenIds& ids = token_ids[size_t(range)];
    Tokenizer tokenizer;
    std::vector<TokenRef> tokens;
    size_t bytes = 0;
    for (int64_t doc = begin; doc < end; ++doc) bytes += docs[size_t(doc)].size();
    ids.ids.reserve(bytes / 5 + 16);  // English averages about 5.5 bytes per token: few regrowths
    ids.offsets.reserve(size_t(end - begin) + 1);
    for (int64_t doc = begin; doc < end; ++doc) {
      // All of a document's tokens first, so their table slots load from memory in parallel.
      tokens.clear();
      tokenizer.for_each(docs[size_t(doc)], [&](const TokenRef& token) {
        counter.prefetch(token);
        tokens.push_back(token);
      });
      for (const TokenRef& token : tokens) ids.ids.push_back(counter.add(token, uint32_t(doc)));
      ids.offsets.push_back(int64_t(ids.ids.size()));
    }
  });
  TokenCounter& all = counters[0];
  std::vector<std::vector<uint32_t>> merged_index(counters.size());  // range's entry -> entry of `all`
  for (size_t k = 1; k < counters.size(); ++k) merged_index[k] = all.merge(counters[k]);

  // Keras: np.lexsort((tokens, counts))[::-1] -> by count, then by token bytes, both descending.
  DTRAIN_CHECK_USAGE(all.size() > 0, "[tfidf] the corpus ({} documents) has no tokens to learn from", docs.size());
  std::vector<uint32_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = uint32_t(i);
  size_t keep = std::min(order.size(), size_t(max_tokens - 1));
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(keep), order.end(), [&](uint32_t a, uint32_t b) {
    if (all.count(a) != all.count(b)) return all.count(a) > all.count(b);
    return all.token(a) > all.token(b);  // char_traits<char> compares bytes as unsigned
  });

  std::vector<std::string> vocabulary{std::string(unknown_token)};
  std::vector<float> idf{0.0f};
  std::vector<int32_t> column_of_entry(all.size(), 0);  // 0 = out of vocabulary -> "[UNK]"
  double idf_sum = 0;
  double num_docs = double(docs.size());
  for (size_t rank = 0; rank < keep; ++rank) {
    column_of_entry[order[rank]] = int32_t(rank + 1);
    vocabulary.emplace_back(all.token(order[rank]));
    // Keras divides int64 tensors (true division, float64), takes the log, then casts to float32.
    float weight = float(std::log(1.0 + num_docs / (1.0 + double(all.doc_freq(order[rank])))));
    idf.push_back(weight);
    idf_sum += weight;
  }
  idf[0] = float(idf_sum / double(keep));  // Keras pads with the mean of the float32 weights
  TfidfVectorizer vectorizer(std::move(vocabulary), std::move(idf));

  // Transform from the kept token ids: no second tokenization.
  std::vector<SparseRows> parts(static_cast<size_t>(ranges));
  parallel_ranges(int64_t(ranges), ranges, [&](int range, int64_t, int64_t) {
    const TokenIds& ids = token_ids[size_t(range)];
    // This range's entry -> column, composed once so each token costs one lookup.
    std::vector<int32_t> remapped;
    if (range != 0) {
      const std::vector<uint32_t>& remap = merged_index[size_t(range)];
      remapped.resize(remap.size());
      for (size_t entry = 0; entry < remap.size(); ++entry) remapped[entry] = column_of_entry[remap[entry]];
    }
    const int32_t* columns = range == 0 ? column_of_entry.data() : remapped.data();
    SparseRows& rows = parts[size_t(range)];
    rows.columns = vectorizer.size();
    // Range 0 makes room for all ranges' rows (about 0.4 nonzeros per token in English), so appending
    // the others does not move its own.
    size_t docs_here = ids.offsets.size(), tokens_here = ids.ids.size();
    if (range == 0) {
      for (size_t k = 1; k < token_ids.size(); ++k) {
        docs_here += token_ids[k].offsets.size() - 1;
        tokens_here += token_ids[k].ids.size();
      }
    }
    rows.offsets.reserve(docs_here);
    rows.indices.reserve(tokens_here / 2);
    rows.values.reserve(tokens_here / 2);
    RowBuilder builder(vectorizer.size());
    for (size_t doc = 0; doc + 1 < ids.offsets.size(); ++doc) {
      for (int64_t k = ids.offsets[doc]; k < ids.offsets[doc + 1]; ++k) builder.add(columns[ids.ids[size_t(k)]]);
      builder.finish_row(vectorizer.idf_, rows);
    }
  });
  SparseRows rows = concatenate(parts, vectorizer.size());
  return FittedRows{std::move(vectorizer), std::move(rows)};
}

TfidfVectorizer TfidfVectorizer::fit(std::span<const std::string> docs, int64_t max_tokens, int threads) {
  return fit_transform(docs, max_tokens, threads).vectorizer;
}

SparseRows TfidfVectorizer::transform(std::span<const std::string> docs, int threads) const {
  int ranges = range_count(threads, docs.size());
  std::vector<SparseRows> parts(static_cast<size_t>(ranges));
  parallel_ranges(int64_t(docs.size()), ranges, [&](int range, int64_t begin, int64_t end) {
    SparseRows& rows = parts[size_t(range)];
    rows.columns = size();
    RowBuilder builder(size());
    Tokenizer tokenizer;
    for (int64_t doc = begin; doc < end; ++doc) {
      tokenizer.for_each(docs[size_t(doc)], [&](const TokenRef& token) { builder.add(index_->find(token)); });
      builder.finish_row(idf_, rows);
    }
  });
  return concatenate(parts, size());
}

std::vector<float> TfidfVectorizer::transform_dense(std::string_view doc) const {
  // The plain path: text.hpp's reference tokenizer and column_of, no shared code with transform().
  std::vector<float> counts(size_t(size()), 0.0f);
  for (const std::string& token : tokenize(doc)) counts[size_t(column_of(token))] += 1.0f;
  for (size_t column = 0; column < counts.size(); ++column) counts[column] *= idf_[column];
  return counts;
}

void TfidfVectorizer::save(const std::string& folder) const {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(folder, error);
  DTRAIN_CHECK(!error, "[tfidf] cannot create folder '{}': {}", path_text(folder), error.message());
  std::string vocabulary_text, idf_text;
  for (const std::string& token : vocabulary_) vocabulary_text += token + "\n";
  for (float weight : idf_) idf_text += fmt::format("{:.9g}\n", weight);
  for (auto [name, text] : {std::pair{"vocabulary.txt", &vocabulary_text}, std::pair{"idf_weights.txt", &idf_text}}) {
    std::string path = (fs::path(folder) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *text;
    out.close();
    DTRAIN_CHECK(out.good(), "[tfidf] cannot write '{}'", path_text(path));
  }
}

TfidfVectorizer TfidfVectorizer::load(const std::string& folder) {
  namespace fs = std::filesystem;
  std::string vocabulary_path = (fs::path(folder) / "vocabulary.txt").string();
  std::string idf_path = (fs::path(folder) / "idf_weights.txt").string();
  std::vector<std::string> vocabulary = split_lines(read_text_file(vocabulary_path));
  std::vector<std::string> idf_lines = split_lines(read_text_file(idf_path));
  DTRAIN_CHECK_USAGE(!vocabulary.empty() && vocabulary[0] == unknown_token, "[tfidf] '{}' must start with '{}'",
                     vocabulary_path, unknown_token);
  DTRAIN_CHECK_USAGE(vocabulary.size() == idf_lines.size(), "[tfidf] '{}' has {} tokens but '{}' has {} weights",
                     vocabulary_path, vocabulary.size(), idf_path, idf_lines.size());
  std::vector<float> idf;
  for (size_t line = 0; line < idf_lines.size(); ++line) {
    const char* start = idf_lines[line].c_str();
    char* end = nullptr;
    float weight = std::strtof(start, &end);
    DTRAIN_CHECK_USAGE(end != start && *end == '\0' && std::isfinite(weight),
                       "[tfidf] '{}' line {}: '{}' is not a number", idf_path, line + 1, idf_lines[line]);
    idf.push_back(weight);
  }
  return TfidfVectorizer(std::move(vocabulary), std::move(idf));
}

}  // namespace dtrain::data
