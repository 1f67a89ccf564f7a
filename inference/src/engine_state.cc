// Sequence state out of and back into the KV cache: SaveState, LoadState, Release, TTLs.
//
// A saved state is one blob: magic, model name and config, tokens, cached/pending counts, the
// sampling seed and RNG position, every TokenRecord, then the raw KV pages.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine_impl.h"
#include "flotilla/common/ids.h"
#include "flotilla/common/status.h"

namespace flotilla::inference {
namespace {

constexpr uint64_t kStateMagic = 0x31545345544c4cf1ull;

class BlobWriter {
 public:
  template <typename T>
  void Put(const T& v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_ += s;
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    Put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class BlobReader {
 public:
  explicit BlobReader(const std::string& s) : s_(s) {}
  template <typename T>
  bool Get(T* v) {
    if (pos_ + sizeof(T) > s_.size()) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* v) {
    uint64_t n;
    if (!Get(&n) || n > s_.size() - pos_) return false;
    v->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool GetVector(std::vector<T>* v) {
    uint64_t n;
    if (!Get(&n) || n > (s_.size() - pos_) / sizeof(T)) return false;
    v->resize(n);
    std::memcpy(v->data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool GetBytes(uint8_t* dst, size_t n) {
    if (n > s_.size() - pos_) return false;
    std::memcpy(dst, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::string> EngineImpl::SaveState(const std::string& sequence_id, bool to_file,
                                                  uint32_t ttl_ms) {
  StepLock step(this);
  std::lock_guard<std::mutex> l(mu_);
  auto it = seqs_.find(sequence_id);
  if (it == seqs_.end()) return absl::NotFoundError(absl::StrCat("no kept sequence '", sequence_id, "'"));
  Sequence* seq = it->second.get();
  if (seq->running) return absl::FailedPreconditionError(absl::StrCat("sequence '", sequence_id, "' is running; interrupt it first"));
  ModelBackend* backend = seq->model->backend.get();
  BlobWriter w;
  w.Put(kStateMagic);
  w.PutString(seq->id);
  w.PutString(seq->model->name);
  w.PutString(seq->model->config.ToJson());
  w.PutString(backend->name());
  w.PutVector(seq->tokens);
  w.Put(seq->cached);
  w.Put(seq->pending_prompt);
  w.Put(seq->seed);
  w.Put(seq->rng.state());
  w.Put<uint64_t>(seq->records.size());
  for (const TokenRecord& r : seq->records) {
    w.Put(r.token);
    w.Put(r.logprob);
    w.Put(r.policy_version);
    w.PutVector(r.experts);
    w.PutVector(r.top_ids);
    w.PutVector(r.top_logprobs);
  }
  const uint32_t pt = backend->page_tokens();
  const size_t used_pages = (static_cast<size_t>(seq->cached) + pt - 1) / pt;
  w.Put<uint64_t>(used_pages);
  w.Put<uint64_t>(backend->page_bytes());
  std::vector<uint8_t> page(backend->page_bytes());
  for (size_t i = 0; i < used_pages; ++i) {
    RETURN_IF_ERROR(backend->ReadPage(seq->pages[i], page.data()));
    w.out().append(reinterpret_cast<const char*>(page.data()), page.size());
  }
  SavedState saved;
  saved.bytes = w.out().size();
  saved.expires_ns = ttl_ms == 0 ? 0 : NowNanos() + int64_t{ttl_ms} * 1'000'000;
  std::string handle = NewId("state");
  if (to_file) {
    ASSIGN_OR_RETURN(std::string dir, StateDirLocked());
    saved.file = (std::filesystem::path(dir) / handle).string();
    std::ofstream f(saved.file, std::ios::binary | std::ios::trunc);
    f.write(w.out().data(), static_cast<std::streamsize>(w.out().size()));
    f.close();
    if (!f) return absl::UnavailableError(absl::StrCat("cannot write state file ", saved.file));
  } else {
    saved.blob = std::move(w.out());
  }
  FreeSequenceLocked(seq);
  saved_[handle] = std::move(saved);
  return handle;
}

absl::StatusOr<std::string> EngineImpl::StateDirLocked() {
  if (state_dir_.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "flotilla-kv-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return absl::UnavailableError("cannot make a directory for saved states");
    state_dir_ = tmpl;
    own_state_dir_ = true;
  } else if (!state_dir_made_) {
    std::error_code ec;
    std::filesystem::create_directories(state_dir_, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("cannot make ", state_dir_, ": ", ec.message()));
  }
  state_dir_made_ = true;
  return state_dir_;
}

absl::StatusOr<std::string> EngineImpl::LoadState(const std::string& handle) {
  StepLock step(this);
  std::lock_guard<std::mutex> l(mu_);
  PurgeExpiredLocked();
  auto it = saved_.find(handle);
  if (it == saved_.end()) return absl::NotFoundError(absl::StrCat("no saved state '", handle, "' (released or expired)"));
  std::string file_blob;
  const std::string* blob = &it->second.blob;
  if (!it->second.file.empty()) {
    std::ifstream f(it->second.file, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    file_blob = ss.str();
    blob = &file_blob;
  }
  auto corrupt = [&](const char* what) {
    return absl::DataLossError(absl::StrCat("saved state '", handle, "' is corrupt: ", what));
  };
  BlobReader r(*blob);
  uint64_t magic = 0;
  if (!r.Get(&magic) || magic != kStateMagic) return corrupt("bad magic");
  auto seq = std::make_unique<Sequence>();
  std::string model_name, config_json, backend_name;
  if (!r.GetString(&seq->id) || !r.GetString(&model_name) || !r.GetString(&config_json) ||
      !r.GetString(&backend_name)) {
    return corrupt("header");
  }
  ModelSlot* slot = FindModelLocked(model_name);
  if (slot == nullptr) return absl::FailedPreconditionError(absl::StrCat("saved state needs model '", model_name, "', not loaded"));
  if (slot->config.ToJson() != config_json || backend_name != slot->backend->name()) {
    return absl::FailedPreconditionError(absl::StrCat("saved state was made by a different config or backend of '", model_name, "'"));
  }
  if (seqs_.count(seq->id)) return absl::AlreadyExistsError(absl::StrCat("sequence '", seq->id, "' already exists"));
  seq->model = slot;
  // Under which weights the saved K/V was computed is not known here: never shared.
  seq->cacheable = false;
  seq->prefix_looked_up = true;
  uint64_t rng_state = 0, n_records = 0;
  if (!r.GetVector(&seq->tokens) || !r.Get(&seq->cached) || !r.Get(&seq->pending_prompt) ||
      !r.Get(&seq->seed) || !r.Get(&rng_state) || !r.Get(&n_records)) {
    return corrupt("sequence");
  }
  seq->rng.set_state(rng_state);
  for (uint64_t i = 0; i < n_records; ++i) {
    TokenRecord rec;
    if (!r.Get(&rec.token) || !r.Get(&rec.logprob) || !r.Get(&rec.policy_version) ||
        !r.GetVector(&rec.experts) || !r.GetVector(&rec.top_ids) || !r.GetVector(&rec.top_logprobs)) {
      return corrupt("records");
    }
    seq->records.push_back(std::move(rec));
  }
  uint64_t n_pages = 0, page_bytes = 0;
  if (!r.Get(&n_pages) || !r.Get(&page_bytes) || page_bytes != slot->backend->page_bytes()) {
    return corrupt("pages");
  }
  if (absl::Status st = EnsurePagesLocked(seq.get(), seq->cached); !st.ok()) {
    ReleasePagesLocked(slot, &seq->pages);
    return st;
  }
  std::vector<uint8_t> page(page_bytes);
  for (uint64_t i = 0; i < n_pages; ++i) {
    if (i >= seq->pages.size() || !r.GetBytes(page.data(), page_bytes)) {
      ReleasePagesLocked(slot, &seq->pages);
      return corrupt("page data");
    }
    if (absl::Status st = slot->backend->WritePage(seq->pages[i], page.data()); !st.ok()) {
      ReleasePagesLocked(slot, &seq->pages);
      return st;
    }
  }
  std::string id = seq->id;
  seqs_[id] = std::move(seq);
  std::error_code ec;
  if (!it->second.file.empty()) std::filesystem::remove(it->second.file, ec);
  saved_.erase(it);
  return id;
}

absl::StatusOr<uint64_t> EngineImpl::Release(const std::string& sequence_id) {
  // A kept sequence that is not running gives its pages back under mu_ alone: no step uses
  // them (a step's rows, pending ones too, are running sequences) and pages are handed out
  // only while a step is planned, under step_mu_. So the scheduler keeps its hold across
  // steps; with hundreds of samples finishing each second, a Release per sample taking
  // step_mu_ would end the hold nearly every step.
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = seqs_.find(sequence_id);
    if (it != seqs_.end() && !it->second->running) {
      Sequence* seq = it->second.get();
      const uint64_t bytes = seq->pages.size() * seq->model->backend->page_bytes();
      FreeSequenceLocked(seq);
      return bytes;
    }
  }
  // A running sequence is cancelled between two steps; a saved state's file goes too.
  std::vector<Delivery> deliveries;
  uint64_t bytes = 0;
  {
    StepLock step(this);
    std::lock_guard<std::mutex> l(mu_);
    auto it = seqs_.find(sequence_id);
    if (it != seqs_.end()) {
      Sequence* seq = it->second.get();
      bytes = seq->pages.size() * seq->model->backend->page_bytes();
      if (seq->running) {
        FinishLocked(seq, FinishReason::kCancelled, "", &deliveries);
      }
      if (seqs_.count(sequence_id)) FreeSequenceLocked(seq);
    } else {
      auto st = saved_.find(sequence_id);
      if (st == saved_.end()) return absl::NotFoundError(absl::StrCat("no sequence or saved state '", sequence_id, "'"));
      bytes = st->second.bytes;
      std::error_code ec;
      if (!st->second.file.empty()) std::filesystem::remove(st->second.file, ec);
      saved_.erase(st);
    }
  }
  for (Delivery& d : deliveries) d.Send();
  return bytes;
}

void EngineImpl::PurgeExpiredLocked() {
  const int64_t now = NowNanos();
  for (auto it = saved_.begin(); it != saved_.end();) {
    if (it->second.expires_ns != 0 && it->second.expires_ns <= now) {
      std::error_code ec;
      if (!it->second.file.empty()) std::filesystem::remove(it->second.file, ec);
      it = saved_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace flotilla::inference
