// Hugging Face tokenizers (inference/include/flotilla/inference/hf_tokenizer.h): the input is
// tokenizer.json, a NUL byte, then a text. Loading gives a tokenizer or an error; a loaded one
// encodes the text to ids in range (or refuses invalid UTF-8), and its streaming decoder gives
// exactly what Decode gives, as the header promises.
#include <cstring>
#include <string>
#include <string_view>

#include "flotilla/inference/hf_tokenizer.h"
#include "fuzz_check.h"
#include "fuzz_target.h"

FLOTILLA_FUZZ_TARGET(hf_tokenizer) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view json = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  auto tok = flotilla::inference::HfTokenizer::FromJson(json, "", "fuzz");
  if (!tok.ok()) {
    FUZZ_CHECK(!tok.status().message().empty());
    return;
  }
  for (bool parse_special : {true, false}) {
    auto ids = (*tok)->Encode(text, parse_special);
    if (!ids.ok()) {
      FUZZ_CHECK(ids.status().code() == absl::StatusCode::kInvalidArgument ||
                 ids.status().code() == absl::StatusCode::kResourceExhausted);
      continue;
    }
    for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < (*tok)->vocab_size());
    const std::string whole = (*tok)->Decode(*ids);
    flotilla::inference::HfStreamingDecoder decoder(**tok);
    std::string streamed;
    for (int32_t id : *ids) streamed += decoder.Push(id);
    streamed += decoder.Finish();
    FUZZ_CHECK(streamed == whole);
  }
}
