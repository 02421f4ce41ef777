// engine.core.error_text: errorText keeps Torch's message and leaves out the C++ stack trace its
// what() carries ("Exception raised from ... frame #0 ..."), which the CLI printed as one long
// error line; other errors pass through unchanged.
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "engine/core/error_text.h"
#include "tests/support/hh_test.h"

namespace test_error_text {

// Runs `raise`, which must throw a Torch error whose what() has the stack trace; errorText must
// keep `message` and drop the trace.
template <typename Raise>
void checkWithoutTrace(Raise raise, const std::string& message) {
  try {
    raise();
    QFAIL("no error was raised");
  } catch (const std::exception& e) {
    const std::string raw = e.what(), text = hh::errorText(e);
    QVERIFY2(raw.find("Exception raised from") != std::string::npos, "Torch's what() carries the trace");
    QVERIFY2(text.find("Exception raised from") == std::string::npos, text.c_str());
    QVERIFY2(text.find("frame #") == std::string::npos, text.c_str());
    QVERIFY2(text.find(message) != std::string::npos, text.c_str());
  }
}

class TestErrorText : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void torchErrorsLoseTheirStackTrace() {
    // An embedding lookup past the table, as a token id past the vocabulary was: raised inside ATen.
    checkWithoutTrace(
        [] {
          (void)torch::embedding(torch::ones({2, 3}), torch::tensor({5}));
        },
        "index out of range in self");
    // A TORCH_CHECK in the engine's own code.
    checkWithoutTrace([] { TORCH_CHECK(false, "attention mask must be [B,T] like the ids"); },
                      "attention mask must be [B,T] like the ids");
  }

  void otherErrorsPassThrough() {
    const std::runtime_error error("model.safetensors: truncated\nsecond line");
    QCOMPARE(hh::errorText(error), std::string(error.what()));
  }
};

HH_TEST_SUITE(TestErrorText, "engine.core.error_text", &TestErrorText::torchErrorsLoseTheirStackTrace,
              &TestErrorText::otherErrorsPassThrough)

}  // namespace test_error_text

#if HH_HAVE_QTEST
#include "test_error_text.moc"
#endif
