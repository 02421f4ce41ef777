// Small text corpora the job tests train on (a folder of .txt documents under a TempDir), the
// tiny conversion the convert, dashboard and pause tests start from, and the small associative
// recall setting the train and recall-check tests train on.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/jobs/convert_job.h"
#include "engine/jobs/train_job.h"
#include "tests/support/test_device.h"
#include "tests/support/temp_dir.h"
#include "tests/support/hh_test.h"

namespace hh::test {

// 12 documents of 300 words from an 18-word vocabulary in a fixed, varied order.
inline std::string writeWordCorpus(const TempDir& dir) {
  const auto path = dir.file("corpus");
  std::filesystem::create_directories(path);
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "around", "in", "circles",
                         "and", "birds", "sang", "songs", "about", "rain"};
  for (int d = 0; d < 12; ++d) {
    std::ofstream out(path + "/doc" + std::to_string(d) + ".txt");
    for (int w = 0; w < 300; ++w) out << words[(w * 7 + d * 3 + w / 5) % 18] << (w % 11 == 10 ? ". " : " ");
  }
  return path;
}

// `documents` documents of `sentences` sentences drawn from four (easy to learn).
inline std::string writeSentenceCorpus(const TempDir& dir, int documents, int sentences) {
  const auto path = dir.file("corpus");
  std::filesystem::create_directories(path);
  const char* pool[] = {"the cat sat on the mat. ", "a dog ran in the park. ", "birds sing songs in the rain. ",
                        "the sun is warm today. "};
  for (int d = 0; d < documents; ++d) {
    std::ofstream out(path + "/doc" + std::to_string(d) + ".txt");
    for (int s = 0; s < sentences; ++s) out << pool[(s * 3 + d + s / 4) % 4];
  }
  return path;
}

// The tiny GPT-2 fixture converted on writeWordCorpus: 32-token sequences, batches of 4, 8
// held-out sequences for validation and evaluation. Callers set the steps and the rest.
inline jobs::ConvertConfig tinyConvertConfig(const TempDir& dir) {
  jobs::ConvertConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.modelDir = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
  c.runDir = dir.file("run");
  c.data.corpus = writeWordCorpus(dir);
  c.data.sequenceLength = 32;
  c.data.maxValidationSequences = 8;
  c.distill.batchSize = 4;
  c.finetune.batchSize = 4;
  c.evaluate.maxSequences = 8;
  return c;
}

// Writes `config` as a project file (the CLI's --config JSON) in `dir`; returns its path.
inline std::string writeProjectFile(const TempDir& dir, const jobs::ConvertConfig& config) {
  const auto path = dir.file("project.json");
  std::ofstream(path) << jobs::toJson(config).dump(2);
  return path;
}

// Associative recall from scratch: llama (rotary), 2 layers, 2 heads of 32 (C = 64), V = 16,
// T = 32, 2000 training rows, 500 test rows, lr 3e-3, 400 steps of 32 (tests change what they need).
inline jobs::TrainConfig recallConfig(const TempDir& dir, const std::string& featureMap) {
  jobs::TrainConfig c;
  c.device = hh::test::testDevice();
  c.dtype = hh::test::testDtype();
  c.architecture.modelType = "llama";
  c.architecture.nEmbd = 64;
  c.architecture.nLayer = 2;
  c.architecture.nHead = 2;
  c.architecture.nPositions = 32;
  c.featureMap = featureMap;
  c.runDir = dir.file("run-" + featureMap);
  c.task.kind = "associative_recall";
  c.task.vocabSize = 16;
  c.task.sequenceLength = 32;
  c.task.trainSamples = 2000;
  c.task.testSamples = 500;
  c.task.seed = 1;
  c.lr = 3e-3;
  c.warmupSteps = 20;
  c.weightDecay = 0.0;
  c.steps = 400;
  c.batchSize = 32;
  c.evalEvery = 100;
  c.evalBatches = 4;
  c.seed = 0;
  return c;
}

// Records the last step a job reported; cancels once it has reached `cancelAt` (-1: never).
struct StepObserver : jobs::JobObserver {
  int64_t cancelAt = -1, lastStep = 0;
  void progress(int64_t step, int64_t, const std::string&) override { lastStep = step; }
  bool cancelled() override { return cancelAt >= 0 && lastStep >= cancelAt; }
};

}  // namespace hh::test
