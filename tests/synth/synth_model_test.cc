// The synthesizer's model stages without sandboxes: rewrites (model_rewriter.h) and problem
// statements (statement_writer.h) asked of (a) a scripted OpenAI-compatible endpoint answering
// real one-bug rewrites of the tally fixture and leaking or clean statements, and (b) a real
// `flotilla worker` serving its embedded random-init model over HTTP, whose replies are garbage:
// recorded, refused with their reasons, and the deterministic statement kept. The fixture's
// functions are listed and parse-checked with this machine's python3 (the synthesizer uses the
// environment's, in its sandbox).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "flotilla/common/text_files.h"
#include "flotilla/synth/c_mutator.h"
#include "gtest/gtest.h"
#include "model_rewriter.h"
#include "scripted_endpoint.h"
#include "statement_writer.h"
#include "synth_model.h"
#include "task_writer.h"
#include "testing/daemon_process.h"
#include "testing/shell.h"
#include "testing/temp_dir.h"

namespace flotilla::synth {
namespace {

namespace fs = std::filesystem;

std::string FixtureDir() {
  const char* src = std::getenv("FLOTILLA_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/tests/synth/testdata/tally";
}

bool HavePython() {
  int st = 0;
  testing::RunShell("python3 -c 'import ast' 2>/dev/null", &st);
  return st == 0;
}

// The project as a folder on this machine, commands run by bash here.
class LocalShell : public ProjectShell {
 public:
  explicit LocalShell(const testing::TempDir& dir, const std::string& from = FixtureDir())
      : root_(dir.file("repo")), scratch_(dir.file("scratch")) {
    fs::create_directories(scratch_);
    fs::copy(from, root_, fs::copy_options::recursive);
  }
  std::string root() const override { return root_; }
  std::string scratch() const override { return scratch_; }
  absl::Status Put(const std::string& path, const std::string& content) override {
    std::ofstream(path, std::ios::binary) << content;
    return absl::OkStatus();
  }
  absl::StatusOr<ShellRun> Run(const std::string& script, uint32_t) override {
    ShellRun r;
    int st = 0;
    r.output = testing::RunShell("cd " + ShellQuote(root_) + " && bash -c " + ShellQuote(script) + " 2>&1", &st);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  }

 private:
  std::string root_, scratch_;
};

SynthModelOptions Opts(const std::string& endpoint, uint32_t timeout_ms = 120'000, uint32_t max_tokens = 1024) {
  SynthModelOptions o;
  o.endpoint = endpoint;
  o.timeout_ms = timeout_ms;
  o.max_tokens = max_tokens;
  return o;
}

const std::vector<std::string> kTallyFiles = {"tally/__init__.py", "tally/core.py"};

TEST(ModelRewriterTest, FindsCFunctionDefinitions) {
  const std::string src =
      "#include <stdio.h>\n"              // 1
      "static int\n"                      // 2
      "add (int a, int b)\n"              // 3
      "{\n"                               // 4
      "  return a + b;\n"                 // 5
      "}\n"                               // 6
      "int table[3] = {1, 2, 3};\n"       // 7
      "struct s { int x; };\n"            // 8
      "int main(void) {\n"                // 9
      "  if (add(1, 2) > 2) {\n"          // 10
      "    puts(\"x\");\n"                // 11
      "  }\n"                             // 12
      "  return 0;\n"                     // 13
      "}\n";                              // 14
  std::vector<FunctionSpan> fns = CFunctions("a.c", src);
  ASSERT_EQ(fns.size(), 2u);
  EXPECT_EQ(fns[0].name, "add");
  EXPECT_EQ(fns[0].line, 3);
  EXPECT_EQ(fns[0].start, src.find("static int"));
  EXPECT_EQ(fns[0].end, src.find("}\nint table") + 1);
  EXPECT_EQ(fns[1].name, "main");
  EXPECT_EQ(fns[1].line, 9);
  EXPECT_EQ(fns[1].start, src.find("int main"));
  EXPECT_EQ(fns[1].end, src.size() - 1);
}

TEST(ModelRewriterTest, RefusesUnusableRepliesWithTheirReason) {
  const std::string src = ReadFileOrEmpty(FixtureDir() + "/tally/core.py");
  const size_t start = src.find("def clamp");
  const size_t end = src.find("    return x\n") + 12;
  const FunctionSpan clamp{"tally/core.py", "clamp", 4, start, end, ""};
  std::string long_body = "```python\ndef clamp(x, low, high):\n";
  for (int i = 0; i < 39; ++i) long_body += "    x = x\n";
  long_body += "```\n";
  struct Case {
    std::string reply, finish, reason;
  };
  const std::vector<Case> cases = {
      {"I would rather not.", "stop", "no fenced code block in the reply"},
      {"```python\ndef clamp(x, low", "length", "the reply was cut at --model-max-tokens before its code block closed"},
      {"```python\ndef other(x):\n    return x\n```", "stop", "the code does not start with `def clamp(`: def other(x):"},
      {"```\n" + src.substr(start, end - start) + "\n```", "stop", "the rewrite is the original function (whitespace aside)"},
      {long_body, "stop", "the rewrite has 40 lines for 7 in the original: not a small change"},
      {"```python\n```", "stop", "the code block is empty"},
  };
  for (const Case& c : cases) {
    auto e = RewriteEdit("python", clamp, src, c.reply, c.finish);
    ASSERT_FALSE(e.ok()) << c.reply;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(e.status().message(), c.reason);
  }
  // A method: the reply comes dedented and goes back at the method's indentation.
  const std::string cls = "class A:\n    def f(self, x):\n        y = x\n        return y\n";
  const FunctionSpan f{"a.py", "f", 2, cls.find("    def"), cls.size() - 1, "    "};
  auto e = RewriteEdit("python", f, cls, "Sure:\n```py\ndef f(self, x):\n    y = x\n    return -y\n```\n", "stop");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(ApplyEdit(cls, *e), "class A:\n    def f(self, x):\n        y = x\n        return -y\n");
  EXPECT_EQ(e->kind, "rewrite");
  EXPECT_EQ(e->description, "model rewrite of f");
}

TEST(StatementWriterTest, RefusesLeaksOffSubjectAndCutStatements) {
  const std::string fixed = "def f(x):\n    if x > 10:\n        return 10\n    return x\n";
  const std::string broken = "def f(x):\n    if x >= 10:\n        return 10\n    return x\n";
  EXPECT_EQ(LeakLines(fixed, broken), (std::vector<std::string>{"if x > 10:", "if x >= 10:"}));
  StatementRequest r{"tally", "python", {"tests/test_core.py::test_clamp_above"},
                     {{"tests/test_core.py::test_clamp_above", "assert 12 == 10"}}, fixed, broken};
  const std::set<std::string> words = SubjectWords(r);
  EXPECT_EQ(words, (std::set<std::string>{"above", "clamp"}));
  const std::string issue =
      "# clamp returns the value above the range\n\nclamp(12, 0, 10) gives 12; 10 was expected.";
  struct Case {
    std::string text, finish, reason;  // reason "": accepted
  };
  const std::vector<Case> cases = {
      {issue, "stop", ""},
      {issue, "length", "the reply was cut at --model-max-tokens"},
      {"# broken", "stop", "too short to describe the problem (7 non-space characters < 40)"},
      {std::string(4001, 'a') + " clamp", "stop", "too long (4007 characters > 4000)"},
      {"# Something is wrong\n\nThe library returns a wrong number in some case, please look.", "stop",
       "names nothing of the failing tests (no word of their names or messages): not about this problem"},
      {issue + "\nThe check `if   x >= 10:` is wrong.", "stop", "leaks the fix: it contains the changed line `if x >= 10:`"},
      {issue + "\nIt should read\n    if x > 10:\n", "stop", "leaks the fix: it contains the changed line `if x > 10:`"},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckStatement(c.text, c.finish, LeakLines(fixed, broken), words);
    EXPECT_EQ(std::string(s.message()), c.reason) << c.text.substr(0, 80);
    EXPECT_EQ(s.ok(), c.reason.empty());
  }
}

TEST(SynthModelTest, BadOptionsNameTheOption) {
  auto a = SynthModel::Connect(Opts("localhost:8000"));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(), "--model-endpoint 'localhost:8000': not an http(s):// or anthropic+http(s):// base URL");
  auto b = SynthModel::Connect(Opts("http://127.0.0.1:9/v1", 700'000));
  EXPECT_EQ(b.status().message(), "--model-timeout 700: must be 1 to 600 seconds");
  auto c = SynthModel::Connect(Opts("http://127.0.0.1:9/v1", 120'000, 8));
  EXPECT_EQ(c.status().message(), "--model-max-tokens 8: must be 16 to 8192");
}

TEST(SynthModelTest, ReplyExcerptIsOneLineAndCutOnACharacter) {
  EXPECT_EQ(ReplyExcerpt("a\nb\tc\x01", 10), "a b c ");
  EXPECT_EQ(ReplyExcerpt("abcdef", 3), "abc...");
  EXPECT_EQ(ReplyExcerpt("ab\xc3\xa9z", 3), "ab...");  // not inside the two bytes of U+00E9
}

// The scripted endpoint answers real rewrites (is_sorted's does not parse): four candidates,
// one refusal naming the parser's complaint.
TEST(ScriptedEndpointTest, TallyRewritesParseAndBrokenCodeIsRefused) {
  if (!HavePython()) GTEST_SKIP() << "no python3 on this machine";
  ScriptedEndpoint server([](const ScriptedTurn& t) -> std::string {
    const TallyBug* b = BugFor(t.user);
    if (b == nullptr) return "no such function";
    if (b->name == "is_sorted") return "```python\ndef is_sorted(values:\n    return True\n```\n";
    return "Here it is:\n\n```python\n" + b->rewrite + "```\n";
  });
  ASSERT_TRUE(server.ok());
  auto model = SynthModel::Connect(Opts(server.base_url()));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->name(), "scripted");
  testing::TempDir dir;
  LocalShell shell(dir);
  std::vector<std::string> skipped;
  auto fns = ListFunctions(shell, "python", shell.root(), kTallyFiles, &skipped);
  ASSERT_TRUE(fns.ok()) << fns.status();
  EXPECT_TRUE(skipped.empty());
  std::vector<std::pair<std::string, int>> names;
  for (const FunctionSpan& f : *fns) names.push_back({f.name, f.line});
  EXPECT_EQ(names, (std::vector<std::pair<std::string, int>>{
                       {"clamp", 4}, {"mean", 13}, {"count_if", 20}, {"chunks", 29}, {"is_sorted", 36}}));
  std::vector<RewriteOutcome> out = ProposeRewrites(**model, shell, "python", shell.root(), *fns, {});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(server.turns().size(), 5u);
  const std::string core = ReadFileOrEmpty(shell.root() + "/tally/core.py");
  int usable = 0;
  for (const RewriteOutcome& o : out) {
    SCOPED_TRACE(o.function.name);
    EXPECT_FALSE(o.reply.empty());
    if (o.function.name == "is_sorted") {
      EXPECT_FALSE(o.usable);
      EXPECT_EQ(o.reason.rfind("does not parse (ast.parse): ", 0), 0u) << o.reason;
      EXPECT_NE(o.reason.find("SyntaxError"), std::string::npos) << o.reason;
      continue;
    }
    ++usable;
    ASSERT_TRUE(o.usable) << o.reason;
    EXPECT_EQ(o.reason, "parses (ast.parse)");
    const TallyBug* b = BugFor("Function: " + o.function.name + "\n");
    ASSERT_NE(b, nullptr);
    std::string broken = ApplyEdit(core, o.edit);
    EXPECT_NE(broken.find(b->rewrite), std::string::npos);
    EXPECT_EQ(broken.find(b->fixed_line), std::string::npos);
  }
  EXPECT_EQ(usable, 4);
  // The clamp rewrite runs, with its bug.
  for (const RewriteOutcome& o : out) {
    if (o.function.name != "clamp") continue;
    std::ofstream(shell.root() + "/tally/core.py") << ApplyEdit(core, o.edit);
    int st = 0;
    std::string got = testing::RunShell("cd " + ShellQuote(shell.root()) +
                                            " && python3 -B -c 'from tally import clamp; print(clamp(12, 0, 10))'",
                                        &st);
    EXPECT_EQ(got, "12\n");
  }
}

// The statement prompt holds the failing tests and their messages, never the code; a
// statement quoting the fixed line is refused, a clean one kept.
TEST(ScriptedEndpointTest, LeakingStatementIsRefusedCleanOneKept) {
  const std::string leaking =
      "# clamp ignores the upper bound\n\nclamp(12, 0, 10) returns 12. The branch should `return high`.";
  const std::string clean = "# clamp ignores the upper bound\n\nclamp(12, 0, 10) returns 12; 10 was expected.";
  int n = 0;
  ScriptedEndpoint server([&](const ScriptedTurn&) { return n++ == 0 ? leaking : clean; });
  ASSERT_TRUE(server.ok());
  SynthModelOptions o = Opts(server.base_url());
  o.name = "scripted";
  auto model = SynthModel::Connect(o);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string fixed = ReadFileOrEmpty(FixtureDir() + "/tally/core.py");
  const TallyBug& b = TallyBugs()[0];
  const size_t start = fixed.find("def clamp"), end = fixed.find("    return x\n") + 13;
  const std::string broken = fixed.substr(0, start) + b.rewrite + fixed.substr(end);
  StatementRequest r{"tally", "python", {"tests/test_core.py::test_clamp_above"},
                     {{"tests/test_core.py::test_clamp_above", "assert 12 == 10"}}, fixed, broken};
  StatementOutcome first = WriteStatement(**model, r);
  EXPECT_EQ(first.statement, "");
  EXPECT_EQ(first.reply, leaking);
  EXPECT_EQ(first.reason, "leaks the fix: it contains the changed line `return high`");
  StatementOutcome second = WriteStatement(**model, r);
  EXPECT_EQ(second.statement, clean);
  EXPECT_EQ(second.reason, "no leak (1 changed lines checked)");
  ASSERT_EQ(server.turns().size(), 2u);
  const ScriptedTurn t = server.turns()[0];
  EXPECT_EQ(t.system, kStatementSystemPrompt);
  EXPECT_EQ(t.user,
            "Project: tally (Python)\nFailing tests (1):\n- tests/test_core.py::test_clamp_above: assert 12 == 10\n\n"
            "Write the issue.");
}

// C: functions from the tokenizer, rewrites checked with this machine's compiler (the file's
// folder on the include path, so its own headers resolve).
TEST(ScriptedEndpointTest, CRewriteCompilesBrokenOneIsRefused) {
  int st = 0;
  testing::RunShell("cc --version >/dev/null 2>&1", &st);
  if (st != 0) GTEST_SKIP() << "no C compiler on this machine";
  testing::TempDir dir;
  const std::string src =
      "#include \"ops.h\"\n\nint\nadd (int a, int b)\n{\n  int s = a + b;\n  return s;\n}\n\n"
      "int\nsub (int a, int b)\n{\n  int d = a - b;\n  return d;\n}\n";
  fs::create_directories(dir.file("proj/src"));
  std::ofstream(dir.file("proj/src/ops.h")) << "int add (int a, int b);\nint sub (int a, int b);\n";
  std::ofstream(dir.file("proj/src/ops.c")) << src;
  ScriptedEndpoint server([](const ScriptedTurn& t) -> std::string {
    if (t.user.find("Function: add\n") != std::string::npos) {
      return "```c\nint\nadd (int a, int b)\n{\n  int s = a - b;\n  return s;\n}\n```";
    }
    return "```c\nint\nsub (int a, int b)\n{\n  int d = a - ;\n  return d;\n}\n```";
  });
  ASSERT_TRUE(server.ok());
  auto model = SynthModel::Connect(Opts(server.base_url()));
  ASSERT_TRUE(model.ok()) << model.status();
  LocalShell shell(dir, dir.file("proj"));
  auto fns = ListFunctions(shell, "c", shell.root(), {"src/ops.c"}, nullptr);
  ASSERT_TRUE(fns.ok()) << fns.status();
  ASSERT_EQ(fns->size(), 2u);
  std::vector<RewriteOutcome> out = ProposeRewrites(**model, shell, "c", shell.root(), *fns, {});
  ASSERT_EQ(out.size(), 2u);
  for (const RewriteOutcome& o : out) {
    SCOPED_TRACE(o.function.name);
    if (o.function.name == "add") {
      ASSERT_TRUE(o.usable) << o.reason;
      EXPECT_EQ(o.reason, "compiles (cc -fsyntax-only)");
      std::string want = src;
      want.replace(want.find("a + b"), 5, "a - b");
      EXPECT_EQ(ApplyEdit(src, o.edit), want);
    } else {
      EXPECT_FALSE(o.usable);
      EXPECT_EQ(o.reason.rfind("does not compile (cc): ", 0), 0u) << o.reason;
      EXPECT_NE(o.reason.find("error"), std::string::npos) << o.reason;
    }
  }
}

// A model's statement replaces the deterministic header and list; the instructions that follow
// are the same.
TEST(StatementWriterTest, ModelStatementLeadsTheInstruction) {
  TaskSpec spec;
  spec.package = "tally";
  spec.version = "1.0";
  spec.fail_to_pass = {"tests/test_core.py::test_clamp_above"};
  ProjectProfile p;
  p.language = "python";
  EXPECT_EQ(ProblemStatement(spec, p).rfind("# Failing tests in tally\n", 0), 0u);
  spec.statement = "# clamp ignores the upper bound\n\nclamp(12, 0, 10) returns 12.";
  const std::string text = ProblemStatement(spec, p);
  EXPECT_EQ(text.rfind(spec.statement + "\n\n## What to do\n\nThe repository in `/app` is tally 1.0.", 0), 0u) << text;
  EXPECT_EQ(text.find("## Failing tests"), std::string::npos);
  EXPECT_NE(text.find("cd /app && python3 -m pytest -q"), std::string::npos);
}

// `flotilla worker` with its embedded random-init model, as a separate process over HTTP.
class WorkerProcess {
 public:
  explicit WorkerProcess(const testing::TempDir& dir) : log_(dir.file("worker.log")) {
    std::string bin = testing::FlotillaBinary();
    if (::access(bin.c_str(), X_OK) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      if (freopen(log_.c_str(), "w", stdout) == nullptr) ::_exit(126);
      dup2(1, 2);
      std::vector<std::string> args = {bin, "worker", "--listen", "127.0.0.1:0", "--state-dir", dir.file("state"),
                                       "--threads", "2"};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    std::smatch m;
    const std::regex re("serving on (http://[0-9.]+:[0-9]+)");
    testing::WaitFor([&] {
      std::string log = ReadFileOrEmpty(log_);
      if (std::regex_search(log, m, re)) url_ = m[1].str() + "/v1";
      return !url_.empty() || ::waitpid(pid_, nullptr, WNOHANG) != 0;
    }, 60);
  }
  ~WorkerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }
  const std::string& url() const { return url_; }
  std::string log() const { return ReadFileOrEmpty(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  std::string url_;
};

TEST(WorkerModelTest, RandomModelRepliesAreRecordedAndRefused) {
  if (!HavePython()) GTEST_SKIP() << "no python3 on this machine";
  testing::TempDir dir;
  WorkerProcess worker(dir);
  if (!worker.started()) GTEST_SKIP() << "no flotilla binary at " << testing::FlotillaBinary();
  ASSERT_FALSE(worker.url().empty()) << worker.log();
  auto model = SynthModel::Connect(Opts(worker.url(), 60'000, 48));
  ASSERT_TRUE(model.ok()) << model.status();
  LocalShell shell(dir);
  auto fns = ListFunctions(shell, "python", shell.root(), kTallyFiles, nullptr);
  ASSERT_TRUE(fns.ok()) << fns.status();
  RewriteOptions ro;
  ro.max_functions = 2;
  std::vector<RewriteOutcome> out = ProposeRewrites(**model, shell, "python", shell.root(), *fns, ro);
  ASSERT_EQ(out.size(), 2u);
  const std::set<std::string> refusals = {"no fenced code block in the reply",
                                          "the reply was cut at --model-max-tokens before its code block closed"};
  for (const RewriteOutcome& o : out) {
    EXPECT_FALSE(o.usable) << o.reply;
    EXPECT_TRUE(refusals.count(o.reason)) << o.reason;
    EXPECT_GT(o.seconds, 0);
  }
  StatementRequest r{"tally", "python", {"tests/test_core.py::test_clamp_above"},
                     {{"tests/test_core.py::test_clamp_above", "assert 12 == 10"}}, "a\n", "b\n"};
  StatementOutcome s = WriteStatement(**model, r);
  EXPECT_EQ(s.statement, "") << s.reply;
  EXPECT_EQ(s.reason.find("the request failed"), std::string::npos) << s.reason;
  EXPECT_FALSE(s.reason.empty());
}

}  // namespace
}  // namespace flotilla::synth
