// `flotilla eval -p ...`: an evaluation job in Harbor's shape.
//
//   flotilla eval -p TASKS [-p ...] -a AGENT [-a ...] [-m MODEL ...] [-k ATTEMPTS] [-n CONCURRENCY]
//                 [--jobs-dir DIR] [--job-name NAME]
//   flotilla eval --resume JOBS_DIR/NAME [--filter-error TYPE]...
//
// TASKS is a task folder or a folder of task folders (Harbor 2.x or Terminal-Bench 1.x).
// AGENT: oracle (the task's solution), nop (nothing), mini or terminal (the built-in scaffolds
// over the served model), or an agent CLI: pi, codex, opencode, claude-code or qwen-code
// (worker/external_agent.h), installed under --agents-dir (scripts/test-deps.d/agent-clis.sh:
// <dir>/<agent> and the Node.js binary in <dir>/node),
// stacked on each task's environment as read-only layers (AddAgentLayer) and pointed at the
// worker's in-sandbox endpoint; a CLI that exits non-zero makes its trial an agent_error.
// Agents x tasks x attempts is the job; its trials run N at a time, each in its own sandbox of
// the task's built environment, capped at the task's cpus and memory and reserving its memory
// and --cpu-request millicores (a tenth of a core unless given) of the node.
//
// -m picks a model the model agents use: a Hugging Face model folder or a Flotilla model served
// by the embedded engine, or an external OpenAI- or Anthropic-compatible endpoint's base URL
// (http[s]://HOST[:PORT]/v1, anthropic+http[s]://...; "#NAME" after it names its model) that
// the worker proxies and records as text (worker/remote_chat.h). -m is repeatable: agents x
// models x tasks x attempts is then the job (oracle and nop, which use no model, once), each
// model's trials on a platform serving it, one model after the other, and the job's result.json
// and report.html show each model agent per model side by side (eval/job_summary.h). The job
// folder: config.json (what was asked, the models included), one folder per trial
// "<task>__<agent>__<attempt>" ("<task>__<agent>@<model>__<attempt>" for a model agent in a job
// of several models, eval/job_models.h) with result.json (eval/trial_result.h: reward,
// status, error_type, detail, seconds, steps, prompt and completion tokens, turns, the
// trajectory id and its store) and, for an agent CLI, agent/output.txt (what it printed),
// result.json of the job (eval/job_summary.h: per agent pass@1,
// pass@k (unbiased), mean reward and its standard error, errors, tokens; per task pass rates;
// every trial), which the dashboard's eval view reads, and report.html (eval/report_html.h, no
// network assets). `flotilla trajectories export --job DIR` writes the job's trajectories as
// JSONL. Error types: env_build_failed, agent_timeout,
// agent_error, verifier_timeout, verifier_error, sandbox_crashed. --resume runs only the
// trials without a result or with an error (with --filter-error, only errors of those types;
// trials with other errors keep their results). The last line printed is
//   eval: tasks=N trials=M pass@1=X pass@k=Y errors=E
// (pass@1 and pass@k averaged over agents x tasks). Exit status 0 when the job completed
// (whatever it scored), 1 when it could not run, 2 for bad arguments, 130/143 when stopped by
// a signal (running trials finish first; their results are kept).
#pragma once

#include <string>
#include <vector>

#include "flotilla/app/embedded_worker.h"
#include "flotilla/worker/scaffold.h"
#include "flotilla/worker/sandbox_client.h"
#include "flotilla/worker/terminal_task.h"
#include "stop_signal.h"

namespace flotilla::cli {

struct EvalJobFlags {
  app::EmbeddedWorkerOptions worker;
  worker::ScaffoldOptions scaffold;
  std::vector<std::string> paths;
  std::vector<std::string> agents;
  std::vector<std::string> models;  // -m, repeatable (eval/job_models.h); empty: worker.model_prefix
  int attempts = 1;
  int concurrency = 1;
  // What each trial's sandbox reserves of the node's CPU at admission. A task's [environment]
  // cpus is a limit (Harbor and Docker apply it as a CFS quota, reserving nothing), so a trial
  // capped at a core reserves only this (at most its cpus): -n trials are admitted at once on a
  // node of fewer cores, each still capped. Memory is reserved as the task gives it.
  uint32_t cpu_request_millicores = 100;
  std::string jobs_dir = "jobs";
  std::string http;  // the dashboard (its eval view reads jobs_dir) and /metrics; empty: none
  std::string job_name;
  std::string resume;
  std::vector<std::string> filter_errors;
  std::string env_store = "/var/lib/flotilla";
  std::string agents_dir = "var/agents";
  uint64_t seed = 0;
};

int RunEvalJob(EvalJobFlags flags);

}  // namespace flotilla::cli
