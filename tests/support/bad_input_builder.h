// The bad-input catalogue's building blocks, shared by its two halves: tests/support/bad_inputs.cpp
// (model files: checkpoints, configs, tokenizers) and bad_inputs_jobs.cpp (datasets, projects,
// run files, exports). The suites take the catalogue from bad_inputs.h, not from here.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "tests/support/bad_inputs.h"

namespace hh::test::bad_inputs {

// The file's bytes; writes them (throws naming the file on failure).
std::string readBytes(const std::string& path);
void writeBytes(const std::string& path, const std::string& bytes);
// A copy of a fixture model folder of tests/data (without the parity reference) at `to`.
std::string copyFixture(const std::string& fixture, const std::string& to);
// `depth` nested JSON arrays.
std::string deepJson(size_t depth);

// Collects the entries; `root` is the catalogue's folder.
struct Builder {
  std::string root;
  std::vector<BadInput> out;

  BadInput& add(const std::string& id, const std::string& category, const std::string& description,
                const std::string& file, std::vector<std::string> cli, GuiOpen gui, const std::string& guiPath);
  // The tiny GPT-2 with a two-label sequence-classification head in <root>/<id>: a convert
  // project's classification task needs a teacher with that head (refused before any stage without).
  std::string classifier(const std::string& id);
  // A fresh tiny GPT-2 copy in <root>/<id>; the case then breaks one file in it.
  std::string model(const std::string& id, const std::string& fixture = "tiny-random-gpt2");
  // A model folder case: `hedgehog inspect FOLDER`, File > Open model folder.
  BadInput& folderCase(const std::string& id, const std::string& category, const std::string& description,
                       const std::string& folder, const std::string& file);
};

// The case groups, each adding its category's entries. In bad_inputs.cpp:
void checkpointCases(Builder& b);
void configCases(Builder& b);
void tokenizerCases(Builder& b);
// In bad_inputs_jobs.cpp:
void datasetCases(Builder& b);
void projectCases(Builder& b);
void runCases(Builder& b);
void exportCases(Builder& b);

}  // namespace hh::test::bad_inputs
