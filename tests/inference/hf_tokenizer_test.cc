// Unit tests of the Hugging Face tokenizer's pieces on small hand-made tokenizer.json files:
// regex splitting, added-token matching and its flags, BPE merge order, streaming decode of
// split UTF-8 and the errors for unsupported features. The real tokenizers are checked against
// the library's own ids in hf_tokenizer_golden_test.cc.
#include "flotilla/inference/hf_tokenizer.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hf/added_tokens.h"
#include "hf/pre_tokenizer.h"
#include "hf/utf8.h"
#include "nlohmann/json.hpp"

namespace flotilla::inference {
namespace {

constexpr char kQwenPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kLlamaPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> Pieces(const nlohmann::json& pre, std::string_view text) {
  auto p = hf::PreTokenizer::FromJson(pre, "pre_tokenizer");
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  hf::PreTokenizer::Scratch scratch;
  std::vector<std::string_view> views;
  absl::Status st = (*p)->Split(text, &scratch, &views);
  EXPECT_TRUE(st.ok()) << st;
  return std::vector<std::string>(views.begin(), views.end());
}

nlohmann::json SplitStep(const std::string& pattern, const std::string& behavior = "Isolated") {
  return {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", behavior}, {"invert", false}};
}

TEST(HfPreTokenizerTest, QwenPatternSplitsWordsDigitsAndWhitespaceRuns) {
  using V = std::vector<std::string>;
  nlohmann::json pre = SplitStep(kQwenPattern);
  // A whitespace run before a word leaves its last space to the word: \s+(?!\S).
  EXPECT_EQ(Pieces(pre, "Hello   world"), (V{"Hello", "  ", " world"}));
  EXPECT_EQ(Pieces(pre, "It's 42!"), (V{"It", "'s", " ", "4", "2", "!"}));
  EXPECT_EQ(Pieces(pre, "x  \n\n\ty"), (V{"x", "  \n\n", "\ty"}));
  EXPECT_EQ(Pieces(pre, "end   "), (V{"end", "   "}));
  EXPECT_EQ(Pieces(pre, "DON'T"), (V{"DON", "'T"}));
  // \p{L} covers CJK and accented letters; a leading non-letter joins the word.
  EXPECT_EQ(Pieces(pre, "\xe4\xbd\xa0\xe5\xa5\xbd,caf\xc3\xa9"), (V{"\xe4\xbd\xa0\xe5\xa5\xbd", ",caf\xc3\xa9"}));
}

TEST(HfPreTokenizerTest, WhitespaceIsUnicodeWhiteSpaceAsInTheLibrary) {
  using V = std::vector<std::string>;
  nlohmann::json pre = SplitStep(kQwenPattern);
  // U+0085 and U+3000 are White_Space; U+180E (Mongolian vowel separator) left it in Unicode 6.3
  // and PCRE2's own \s still takes it: here it is a symbol, one piece with the space before it.
  EXPECT_EQ(Pieces(pre, "a\xc2\x85\xe3\x80\x80" "b"), (V{"a", "\xc2\x85", "\xe3\x80\x80" "b"}));
  EXPECT_EQ(Pieces(pre, "a \xe1\xa0\x8e b"), (V{"a", " \xe1\xa0\x8e", " b"}));
}

TEST(HfPreTokenizerTest, LlamaPatternGroupsDigitsByThree) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(SplitStep(kLlamaPattern), "1234567 abc"), (V{"123", "456", "7", " abc"}));
}

TEST(HfPreTokenizerTest, SequenceSplitsEachPieceSeparately) {
  using V = std::vector<std::string>;
  nlohmann::json pre = {{"type", "Sequence"},
                        {"pretokenizers", {SplitStep(R"(\p{N}{1,3})"), SplitStep(kLlamaPattern)}}};
  // The digits are cut first, so "  " before them ends its own piece and keeps both spaces.
  EXPECT_EQ(Pieces(pre, "a  12345"), (V{"a", "  ", "123", "45"}));
}

TEST(HfPreTokenizerTest, BehaviorsAndInvertFollowTheLibrary) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(SplitStep("-", "Removed"), "a-b--c"), (V{"a", "b", "c"}));
  EXPECT_EQ(Pieces(SplitStep("-", "MergedWithPrevious"), "a-b--c"), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(Pieces(SplitStep("-", "MergedWithNext"), "a-b--c"), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(Pieces(SplitStep("-", "Contiguous"), "a-b--c"), (V{"a", "-", "b", "--", "c"}));
  nlohmann::json inverted = SplitStep("[a-z]+", "Removed");
  inverted["invert"] = true;
  EXPECT_EQ(Pieces(inverted, "ab, cd"), (V{"ab", "cd"}));
  nlohmann::json literal = {{"type", "Split"}, {"pattern", {{"String", "::"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(Pieces(literal, "a::b"), (V{"a", "::", "b"}));
}

TEST(HfPreTokenizerTest, ByteLevelWithRegexAddsPrefixSpace) {
  using V = std::vector<std::string>;
  nlohmann::json pre = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(Pieces(pre, "Hi there"), (V{" Hi", " there"}));
}

TEST(HfUtf8Test, LossyDecodingReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(hf::Utf8Lossy("a\xF0\x9F\x99" "b"), "a\xEF\xBF\xBD" "b");  // truncated 4-byte: one U+FFFD
  EXPECT_EQ(hf::Utf8Lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");   // overlong: two
  EXPECT_EQ(hf::Utf8Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: three
  EXPECT_EQ(hf::IncompleteUtf8Tail("ab\xF0\x9F\x99"), 3u);
  EXPECT_EQ(hf::IncompleteUtf8Tail("ab\xF0\x9F\x99\x82"), 0u);
  EXPECT_EQ(hf::IncompleteUtf8Tail("ab\xC0"), 0u);  // never valid: nothing to wait for
  EXPECT_EQ(hf::FirstInvalidUtf8("ok\xE2\x82"), 2u);
  EXPECT_EQ(hf::FirstInvalidUtf8("ok\xE2\x82\xAC"), std::string_view::npos);
}

// A byte-level BPE over the 256 byte symbols with a few merges, the Qwen pattern, and added
// tokens exercising every flag.
nlohmann::json ToyTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& map = hf::ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) vocab[std::string(map.Encode(static_cast<uint8_t>(b)))] = b;
  const std::string sp(map.Encode(' '));  // "Ġ"
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["bc"] = 258;
  vocab[sp + "a"] = 259;
  vocab["aa"] = 260;
  vocab["aaaa"] = 261;
  nlohmann::json merges = {"b c", "a b", "ab c", sp + " a", "a a", "aa aa"};
  auto added = [](int id, const std::string& content, bool special, bool lstrip, bool rstrip, bool single_word) {
    return nlohmann::json{{"id", id}, {"content", content}, {"special", special}, {"lstrip", lstrip},
                          {"rstrip", rstrip}, {"single_word", single_word}, {"normalized", false}};
  };
  return {{"version", "1.0"},
          {"added_tokens",
           {added(300, "<|s|>", true, false, false, false), added(301, "<|s|>x", true, false, false, false),
            added(302, "<L>", false, true, false, false), added(303, "<R>", false, false, true, false),
            added(304, "word", false, false, false, true), added(305, "<|e|>", true, false, false, false)}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {SplitStep(kQwenPattern), {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

std::unique_ptr<HfTokenizer> Toy(const std::string& config = "") {
  auto t = HfTokenizer::FromJson(ToyTokenizer().dump(), config, "");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> Ids(const HfTokenizer& t, std::string_view text, bool parse_special = true) {
  auto ids = t.Encode(text, parse_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(HfTokenizerTest, MergesByRankThenLeftmost) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  using V = std::vector<int32_t>;
  EXPECT_EQ(Ids(*t, "abc"), (V{'a', 258}));  // "b c" ranks before "a b"
  EXPECT_EQ(Ids(*t, "ab"), (V{256}));
  EXPECT_EQ(Ids(*t, "aaaaa"), (V{261, 'a'}));  // leftmost "a a" first, then "aa aa"
  EXPECT_EQ(Ids(*t, "x a"), (V{'x', 259}));
  EXPECT_EQ(Ids(*t, "\xc3\xa9"), (V{0xc3, 0xa9}));
}

TEST(HfTokenizerTest, AddedTokensMatchLeftmostLongestBeforeBpe) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  using V = std::vector<int32_t>;
  EXPECT_EQ(Ids(*t, "ab<|s|>xab"), (V{256, 301, 256}));  // the longer "<|s|>x" wins
  EXPECT_EQ(Ids(*t, "<|s|><|e|>"), (V{300, 305}));
  // Without special-token parsing the specials are text; non-special added tokens still match.
  EXPECT_EQ(Ids(*t, "<|e|> <R>", false), (V{'<', '|', 'e', '|', '>', ' ', 303}));
}

TEST(HfTokenizerTest, AddedTokenStripAndSingleWordFlags) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  using V = std::vector<int32_t>;
  EXPECT_EQ(Ids(*t, "x  <L>"), (V{'x', 302}));          // lstrip eats the spaces before
  EXPECT_EQ(Ids(*t, "<R> \n x"), (V{303, 'x'}));        // rstrip eats the whitespace after
  EXPECT_EQ(Ids(*t, "a word."), (V{'a', ' ', 304, '.'}));
  EXPECT_EQ(Ids(*t, "words"), (V{'w', 'o', 'r', 'd', 's'}));  // single_word: not inside a word
}

TEST(HfTokenizerTest, DecodeAndStreamingNeverEmitPartialUtf8) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  const std::string text = "caf\xc3\xa9 \xf0\x9f\x99\x82<|s|>ab";
  std::vector<int32_t> ids = Ids(*t, text);
  EXPECT_EQ(t->Decode(ids), text);
  EXPECT_EQ(t->Decode(ids, /*skip_special=*/true), "caf\xc3\xa9 \xf0\x9f\x99\x82" "ab");
  HfStreamingDecoder d(*t);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(d.Push(id));
  chunks.push_back(d.Finish());
  // c a f \xc3 \xa9 ' ' \xf0 \x9f \x99 \x82 <|s|> ab
  std::vector<std::string> want = {"c", "a", "f", "", "\xc3\xa9", " ", "", "", "", "\xf0\x9f\x99\x82",
                                   "<|s|>", "ab", ""};
  EXPECT_EQ(chunks, want);
  HfStreamingDecoder cut(*t);
  EXPECT_EQ(cut.Push(0xf0), "");
  EXPECT_EQ(cut.Push('A'), "\xEF\xBF\xBD" "A");  // an interrupted character is one U+FFFD
  EXPECT_EQ(cut.Push(0xe2), "");
  EXPECT_EQ(cut.Finish(), "\xEF\xBF\xBD");
}

TEST(HfTokenizerTest, NfcNormalizesTextAndNormalizedAddedTokens) {
  nlohmann::json j = ToyTokenizer();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  // A normalized added token written decomposed matches the composed text, and the other way.
  j["added_tokens"].push_back({{"id", 306}, {"content", "e\xcc\x81!"}, {"special", false}, {"normalized", true}});
  auto t = HfTokenizer::FromJson(j.dump(), "", "");
  ASSERT_TRUE(t.ok()) << t.status();
  using V = std::vector<int32_t>;
  EXPECT_EQ(Ids(**t, "e\xcc\x81"), (V{0xc3, 0xa9}));  // NFC: U+00E9
  EXPECT_EQ(Ids(**t, "x\xc3\xa9!"), (V{'x', 306}));
  EXPECT_EQ(Ids(**t, "xe\xcc\x81!"), (V{'x', 306}));
  // Non-normalized tokens are cut from the raw text first; each side is normalized alone.
  EXPECT_EQ(Ids(**t, "e<|s|>\xcc\x81"), (V{'e', 300, 0xcc, 0x81}));
}

TEST(HfTokenizerTest, ConcurrentEncodesAgree) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "ab abc aaaa <|s|> x" + std::to_string(i) + "\n";
  const std::vector<int32_t> want = Ids(*t, text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&t, &text, &g] { g = *t->Encode(text); });
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

TEST(HfTokenizerTest, ConfigGivesBosEosAndFlags) {
  auto t = Toy(R"({"bos_token": "<|s|>", "eos_token": {"content": "<|e|>"}, "add_bos_token": true})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->bos_id(), 300);
  EXPECT_EQ(t->eos_id(), 305);
  EXPECT_FALSE(t->pad_id().has_value());
  EXPECT_TRUE(t->add_bos_token());
  EXPECT_EQ(t->vocab_size(), 306);
  EXPECT_TRUE(t->IsSpecial(305));
  EXPECT_FALSE(t->IsSpecial(302));
}

struct ErrorCase {
  const char* name;
  std::function<void(nlohmann::json&)> edit;
  std::string config;
  std::string want;
};

TEST(HfTokenizerTest, UnsupportedFeaturesAreNamedWithFileAndField) {
  std::vector<ErrorCase> cases = {
      {"unigram", [](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }, "",
       "m/tokenizer.json: model.type 'Unigram' is not supported"},
      {"metaspace", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}}; }, "",
       "m/tokenizer.json: pre_tokenizer.pretokenizers[0].type 'Metaspace' is not supported"},
      {"byte_level_not_last",
       [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"].push_back(SplitStep("x")); }, "",
       "m/tokenizer.json: pre_tokenizer.pretokenizers[1]: ByteLevel must be the last step"},
      {"bad_regex", [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0] = SplitStep("(a"); }, "",
       "m/tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex: regex does not compile at offset 2: "
       "missing closing parenthesis"},
      {"normalizer", [](nlohmann::json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "",
       "m/tokenizer.json: normalizer.type 'Lowercase' is not supported"},
      {"decoder", [](nlohmann::json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "",
       "m/tokenizer.json: decoder.type 'WordPiece' is not supported"},
      {"byte_fallback", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }, "",
       "m/tokenizer.json: model.byte_fallback is not supported"},
      {"merge_not_in_vocab", [](nlohmann::json& j) { j["model"]["merges"].push_back("q z"); }, "",
       "m/tokenizer.json: model.merges[6]: 'qz' is not in the vocab"},
      {"merge_shape", [](nlohmann::json& j) { j["model"]["merges"].push_back(7); }, "",
       "m/tokenizer.json: model.merges[6]: expected \"a b\" or [a, b]"},
      {"bos_unknown", [](nlohmann::json&) {}, R"({"bos_token": "<nope>"})",
       "m/tokenizer_config.json: bos_token: '<nope>' is not a token"},
  };
  for (const ErrorCase& c : cases) {
    nlohmann::json j = ToyTokenizer();
    c.edit(j);
    auto t = HfTokenizer::FromJson(j.dump(), c.config, "m");
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(t.status().message(), c.want) << c.name;
  }
}

TEST(HfTokenizerTest, InvalidUtf8InputIsRefusedWithItsOffset) {
  auto t = Toy();
  ASSERT_NE(t, nullptr);
  auto ids = t->Encode("ok\xff");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ids.status().message(), "text is not valid UTF-8 at byte 2");
}

TEST(HfTokenizerTest, MissingFolderIsNotFound) {
  auto t = HfTokenizer::LoadDir("/nonexistent-flotilla-model");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "/nonexistent-flotilla-model/tokenizer.json: cannot open");
}

}  // namespace
}  // namespace flotilla::inference
