// Small text corpora the job tests train on: a folder of .txt documents under a TempDir.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/engine/models/model_test_support.h"
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

}  // namespace hh::test
