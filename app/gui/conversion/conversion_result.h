// What a finished conversion came to, read from its run files as plain data for the summary page
// (conversion_summary.h): the convert run file (kind "convert": stage times, KL before and after
// distillation, perplexity or accuracy, the export) and, beside it, the evaluate stage's
// (evaluate/run.h5: every feature map's mean KL, entropy and monotonicity, and the per-head KL
// table of the converted model's own maps). The stages' run files lie in the convert run's
// folder: distill/, finetune/, evaluate/ (engine/jobs/convert_job.h).
#pragma once
#include <QString>
#include <QStringList>

#include <cmath>
#include <limits>
#include <vector>

namespace hh::gui {

struct MapScore {
  QString name;  // a feature map ("hedgehog", "exp_t=2") or "trained" (the converted model's own)
  double kl = std::nan(""), entropy = std::nan(""), monotonicity = std::nan("");
};

struct HeadScore {
  int layer = 0, head = 0;
  double kl = 0;
};

struct ConversionResult {
  QString runFile;                 // the convert run file
  QString status, statusMessage;   // completed | failed | cancelled (or running) and its message
  QString teacher, featureMap, rule;
  double seconds = std::nan("");   // the stages' seconds summed
  QString task;                    // lm | classification
  double qualityOriginal = std::nan(""), qualityConverted = std::nan("");  // perplexity or accuracy
  double klUntrained = std::nan(""), klDistilled = std::nan("");
  double softmaxEntropy = std::nan("");
  std::vector<MapScore> maps;      // sorted by KL, lowest first; NaN KLs last
  // The converted model's own maps per head (table kl_trained of the evaluate run), row-major
  // [layers, heads]; NaN for layers that stayed softmax.
  int layers = 0, heads = 0;
  std::vector<double> headKl;
  std::vector<HeadScore> bestHeads, worstHeads;  // the 3 lowest and 3 highest KLs
  QString exportPath;              // the exported model ("" when none)
  QString distillRun, finetuneRun, evaluateRun;  // those that exist
  bool lm() const { return task != QLatin1String("classification"); }
};

// Reads the result of the convert run file `path`; on failure returns one with an empty runFile
// and the reason in `error`.
ConversionResult readConversionResult(const QString& path, QString* error);

}  // namespace hh::gui
