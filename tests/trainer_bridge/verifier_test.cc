// SandboxVerifier over a real node (the sandbox runtime behind the NodeAgent API): the check script recomputes the truth from the
// prompt inside a no-network sandbox, compares the response literally, and a broken sandbox is
// replaced once.
#include "flotilla/trainer_bridge/verifier.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "flotilla/app/embedded_node.h"
#include "flotilla/worker/sandbox_client.h"
#include "testing/temp_dir.h"

namespace flotilla::trainer_bridge {
namespace {

class VerifierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new flotilla::testing::TempDir();
    auto node = app::EmbeddedNode::Start(dir_->file("state"), "flotilla-verifier-test-" + std::to_string(::getpid()));
    if (node.ok()) {
      node_ = node->release();
      sandboxes_ = new worker::SandboxClient(node_->channel());
    } else {
      open_error_ = new std::string(node.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete sandboxes_;
    sandboxes_ = nullptr;
    delete node_;
    node_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (node_ == nullptr) GTEST_SKIP() << "sandbox runtime unavailable: " << *open_error_;
    auto v = SandboxVerifier::Create(*sandboxes_, "no-network");
    ASSERT_TRUE(v.ok()) << v.status();
    verifier_ = std::move(*v);
  }

  static flotilla::testing::TempDir* dir_;
  static app::EmbeddedNode* node_;
  static worker::SandboxClient* sandboxes_;
  static std::string* open_error_;
  std::unique_ptr<SandboxVerifier> verifier_;
};

flotilla::testing::TempDir* VerifierTest::dir_ = nullptr;
app::EmbeddedNode* VerifierTest::node_ = nullptr;
worker::SandboxClient* VerifierTest::sandboxes_ = nullptr;
std::string* VerifierTest::open_error_ = nullptr;

struct Case {
  VerifyItem item;
  double reward;
};

TEST_F(VerifierTest, JudgesEveryFamilyByItsOwnTruth) {
  const std::vector<Case> cases = {
      {{"arith", "2+3=", "5", "5"}, 1.0},
      {{"arith", "2+3=", "5", "  5 "}, 1.0},         // surrounding blanks are trimmed
      {{"arith", "2+3=", "6", "5"}, 1.0},            // the truth is recomputed, not the reference
      {{"arith", "2+3=", "5", "6"}, 0.0},
      {{"arith", "12*3-4=", "32", "32"}, 1.0},
      {{"arith", "2+3=", "5", "5\n"}, 1.0},          // a newline becomes a trimmed blank
      {{"arith", "2+3=", "5", "5\nand more"}, 0.0},  // a second line is part of the response
      {{"arith", "2+3=", "5", "$((2+3))"}, 0.0},     // compared literally, never evaluated
      {{"arith", "$(echo 5)=", "5", "5"}, 0.0},      // not an arithmetic prompt
      {{"copy", "copy hello world", "", "hello world"}, 1.0},
      {{"copy", "copy hello world", "", "hello"}, 0.0},
      {{"copy", "copy a\tb", "", "a b"}, 1.0},       // a tab in the prompt becomes a blank
      {{"file", "what is in answer.txt?", "42", "42"}, 1.0},
      {{"file", "what is in answer.txt?", "42", "41"}, 0.0},
      {{"poem", "write a poem", "", "roses"}, 0.0},  // an unknown family earns nothing
  };
  std::vector<VerifyItem> items;
  std::vector<double> want;
  for (const Case& c : cases) {
    items.push_back(c.item);
    want.push_back(c.reward);
  }
  auto got = verifier_->Verify(items);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)[i], want[i]) << "item " << i << ": " << cases[i].item.family << " '" << cases[i].item.prompt
                                  << "' -> '" << cases[i].item.response << "'";
  }
  EXPECT_EQ(verifier_->execs(), 1u) << "one batch is one exec";
}

// A malformed arithmetic prompt (from a dataset) fails its own item; the script used to die on
// the shell's arithmetic error and fail the whole batch, twice (the sandbox was replaced).
TEST_F(VerifierTest, AMalformedExpressionFailsOnlyItsItem) {
  auto got = verifier_->Verify({{"arith", "1+=", "", "1"}, {"arith", "2+2=", "4", "4"}, {"arith", "08=", "", "8"},
                                {"arith", "7*6=", "42", "42"}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<double>{0.0, 1.0, 0.0, 1.0}));
  EXPECT_EQ(verifier_->execs(), 1u);
}

TEST_F(VerifierTest, AnEmptyBatchRunsNothing) {
  auto got = verifier_->Verify({});
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(verifier_->execs(), 0u);
}

TEST_F(VerifierTest, ADestroyedSandboxIsReplacedOnce) {
  const std::string first = verifier_->sandbox_id();
  ASSERT_FALSE(first.empty());
  ASSERT_TRUE(sandboxes_->Destroy(first).ok());
  auto got = verifier_->Verify({{"arith", "3*3=", "9", "9"}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::vector<double>{1.0});
  EXPECT_NE(verifier_->sandbox_id(), first);
  EXPECT_EQ(verifier_->execs(), 1u);
}

TEST_F(VerifierTest, TheResponseCannotChangeTheVerdictsOfOthers) {
  // A response that tries to end its line and forge a verdict line for the next item.
  auto got = verifier_->Verify({{"arith", "1+1=", "2", "3\n1"}, {"arith", "1+1=", "2", "5"}});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<double>{0.0, 0.0}));
}

}  // namespace
}  // namespace flotilla::trainer_bridge
