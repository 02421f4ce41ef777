// Fixtures and helpers shared by the inspector suites (app.gui.inspector, app.gui.converted_maps).
#pragma once
#include <torch/types.h>

#include <QString>

#include <cmath>
#include <string>
#include <vector>

#include "engine/config/attention_types.h"
#include "engine/jobs/train_job.h"
#include "engine/models/model_io.h"
#include "engine/tokenizers/tokenizer.h"
#include "tests/support/temp_dir.h"

namespace hh::test::inspector {

inline const std::string kModel = std::string(HH_FIXTURES_DIR) + "/tiny-random-gpt2";
inline const std::string kGpt2Tokenizer = std::string(HH_FIXTURES_DIR) + "/gpt2-tokenizer";
inline const QString kText = QStringLiteral("The quick brown fox jumps over the lazy dog. It was not tired at all.");

// A tiny random Llama (2 layers, 2 heads, RoPE, 4096 positions) with the GPT-2 tokenizer, saved.
inline std::string writeLongLlama(const hh::test::TempDir& dir) {
  hh::jobs::ArchitectureConfig a;
  a.modelType = "llama";
  a.nEmbd = 32;
  a.nLayer = 2;
  a.nHead = 2;
  a.nPositions = 4096;
  const auto tokenizer = hh::tok::loadTokenizer(kGpt2Tokenizer);
  torch::manual_seed(0);
  auto model = hh::models::createModel(hh::models::parseModelConfig(
      hh::jobs::architectureToHfJson(a, tokenizer->vocabSize(), tokenizer->bosId(), tokenizer->eosId()), "test"));
  const auto folder = dir.file("long");
  hh::models::saveModel(*model, folder, kGpt2Tokenizer);
  return folder;
}

// More than 4096 tokens of the GPT-2 tokenizer.
inline QString longText() {
  QString text;
  for (int i = 0; i < 1200; ++i) text += QStringLiteral("the cat sat on a mat ");
  return text;
}

// The tiny fixture with every layer converted to Hedgehog (feature maps nudged off the identity
// so that the trained map differs from an untrained one), saved as a model folder.
inline std::string writeConverted(const hh::test::TempDir& dir) {
  auto model = hh::models::loadModel(kModel);
  hh::attn::LinearAttentionConfig lc;
  lc.featureMap.kind = hh::attn::FeatureMapKind::Hedgehog;
  model->setAttentionPlan(hh::models::AttentionPlan::uniform(model->layerCount(), lc));
  torch::manual_seed(3);
  {
    at::NoGradGuard noGrad;
    for (auto& [name, t] : model->adapterTensors()) t.add_(0.05 * torch::randn_like(t));
  }
  const auto out = dir.file("converted");
  hh::models::saveModel(*model, out, kModel);
  return out;
}

inline double maxAbsDiff(const std::vector<float>& a, const torch::Tensor& b) {  // b [T, T]
  const auto c = b.to(torch::kFloat).contiguous();
  double worst = 0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float x = a[size_t(i)];
    if (std::isnan(x)) continue;  // masked
    worst = std::max(worst, std::abs(double(x) - double(c.data_ptr<float>()[i])));
  }
  return worst;
}

// A saved model's own captures of every layer on kText, with the teacher's activations in every
// layer (as the inspector computes them): the reference for the inspector's maps.
inline hh::models::ModelOutput capturedOnText(const std::string& folder) {
  const auto model = hh::models::loadModel(folder);
  const auto ids = hh::tok::loadTokenizer(folder)->encode(kText.toStdString(), true);
  hh::models::CaptureRequest capture;
  hh::models::ForwardOptions options;
  options.capture = &capture;
  options.teacher = true;
  return model->forward(torch::tensor(ids, torch::kLong).unsqueeze(0), options);
}

}  // namespace hh::test::inspector
