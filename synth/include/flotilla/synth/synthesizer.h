// Synthesizer: turns a source tree with a test suite into validated Harbor-format coding tasks.
//
//   SynthOptions o{.repo = "src/toolz-0.12.0", .out = "tasks/toolz", .max_tasks = 5, .sandboxes = &client};
//   ASSIGN_OR_RETURN(SynthSummary s, RunSynth(o, [](std::string_view l) { std::cerr << l; }));
//
// Stages (state in <out>/synth.db, see synth_state.h; a rerun resumes):
//   environment  detect language and runner, write a Debian-only Dockerfile, build it with
//                environments::EnvBuilder, run the suite three times at the base state; accept
//                when >= 80 % of the tests pass; tests whose outcome changes between runs are
//                flaky and never used.
//   sources      commit mining first (commit_miner.h: git history with --mine-commits, and a
//                Debian package's debian/patches; each fix's source change reverted on the
//                tree is a candidate, every skipped commit or patch recorded with its reason);
//                with a model (model_endpoint), rewrites written by it next (model_rewriter.h:
//                a function picked, rewritten with one subtle bug, its code block checked to
//                parse in the environment; source "model rewrite", kind "rewrite"), every
//                unusable reply recorded with its reason; then procedural mutations (Python:
//                synth/scripts/py_mutate.py, run with the environment's python3; C: MutateC).
//   validate     each candidate's broken state runs the suite: >= 1 fail-to-pass test, every
//                other base-passing test still passing, at most half the suite broken.
//   write        instruction (with a model: an issue it writes from the failing tests' names and
//                messages, refused when it leaks a changed line (statement_writer.h); else, or
//                when refused, the deterministic one from the same; never the diff), task.toml
//                with provenance, environment/ (the broken tree as a fresh one-commit
//                repository), tests/ (verifier restoring hidden tests, checking their hashes and
//                the runner's), solution/solve.sh.
//   probe        in the task's own built environment: oracle scores 1; nop, deleting the tests,
//                editing the tests, replacing the runner and (C) a GNUmakefile shadowing the
//                Makefile score 0; no line unique to the fix
//                is found in the environment. A candidate failing any probe is dropped (the next
//                mutation takes its place: repair), its task folder removed, the reason kept.
//   difficulty   with a policy configured (options.difficulty.agent: oracle, nop, mini or
//                terminal, the model ones over the served --model): each valid task tried
//                `attempts` times through eval's trial runner; solve rate, label (easy >= 0.7,
//                medium >= 0.3, hard > 0, unsolved 0) in synth.db and task.toml; with a band
//                LO:HI, tasks outside it moved to <out>/excluded/ (difficulty.h). Without a
//                policy the difficulty stays unknown, recorded so. --max-tasks counts valid
//                tasks before the band.
//
// Thread-safety: one RunSynth per output folder at a time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "flotilla/environments/env_builder.h"
#include "flotilla/synth/difficulty.h"
#include "flotilla/worker/sandbox_client.h"

namespace flotilla::synth {

struct SynthOptions {
  std::string repo;          // source tree (a Debian source package unpacked, or any folder)
  std::string out;           // task folders and synth.db go here
  int max_tasks = 10;
  int max_candidates = 200;  // validation attempts at most
  std::string model;         // empty: no model (deterministic statements, difficulty unknown)
  // The model for rewrites and statements, through the worker's wire API (synth/src/
  // synth_model.h): an OpenAI-compatible base URL ("http://HOST:PORT/v1"; anthropic+http(s)://
  // for the Messages API). `flotilla synth --model DIR` starts the embedded worker serving DIR
  // and sets this to it; --model-endpoint names an external one. Empty: no rewrites, and
  // deterministic statements.
  std::string model_endpoint;
  std::string model_name;            // the endpoint's model; empty: the first it lists
  uint32_t model_timeout_ms = 120'000;  // per request (1 s .. 10 min)
  uint32_t model_max_tokens = 1024;     // per reply (16 .. 8192)
  int model_rewrites = 20;           // functions the model is asked to rewrite, at most
  std::string package;       // provenance: source package name (default: the folder's name)
  std::string version;       // provenance: its version (default: debian/changelog's, else "")
  uint64_t seed = 1;         // order in which candidates are tried
  int mine_commits = 200;    // newest git commits looked at by commit mining (0: none)
  environments::EnvBuilderOptions builder;
  // Where the suites and probes run: sandboxes of the built environments reached through the
  // NodeAgent API, as every task's sandbox is (borrowed; the caller starts the embedded
  // platform over builder.store_dir's images). Required.
  worker::SandboxClient* sandboxes = nullptr;
  // The difficulty stage: agent empty or attempts 0, not measured; else its policy is required.
  DifficultyOptions difficulty;
};

struct SynthSummary {
  int candidates = 0;  // generated
  int tried = 0;       // validated or rejected so far
  int validated = 0;   // passed validation
  int valid = 0;       // tasks written and passing every probe
  int excluded = 0;    // of them, in <out>/excluded/ (outside the difficulty band)
  double seconds = 0;  // all stages, this run and earlier ones
  std::string report;  // human-readable, one line per stage
};

absl::StatusOr<SynthSummary> RunSynth(const SynthOptions& options,
                                      const std::function<void(std::string_view)>& progress);

// The yield of each stage and seconds per valid task, from <out>/synth.db.
absl::StatusOr<std::string> SynthStats(const std::string& out_dir);

}  // namespace flotilla::synth
